"""The one back-off every retrying client uses, and the ownership loop's use of it."""

from __future__ import annotations

import pytest

from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.runtime.errors import FencedError, retry_until_done


def test_the_pause_doubles_from_the_first_up_to_the_longest() -> None:
    backoff = Backoff(0.1, 1.0)
    assert [backoff.delay(n) for n in range(6)] == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0]
    assert backoff.delay(10_000) == 1.0  # no overflow after a long outage
    assert Backoff(0.5, 8.0, factor=3).delay(3) == 4.5


async def test_retry_pauses_by_the_backoff_until_done_and_gives_up_when_fenced() -> None:
    pauses: list[float] = []
    failures = iter([OSError("down"), TimeoutError(), OSError("down")])

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    async def flaky() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "open"

    assert await retry_until_done(flaky, "opening", Backoff(0.1, 0.3), sleep) == "open"
    assert pauses == [0.1, 0.2, 0.3]

    async def fenced() -> str:
        raise FencedError("another owner")

    with pytest.raises(FencedError):
        await retry_until_done(fenced, "opening", Backoff(0.1, 0.3), sleep)
    assert pauses == [0.1, 0.2, 0.3]
