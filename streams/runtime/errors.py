"""How transports tell the runtime what went wrong."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from spanguard.streams.kafka_io.backoff import Backoff

log = logging.getLogger(__name__)
T = TypeVar("T")


class FencedError(Exception):
    """Another worker took over the partition (its writer fenced ours): stop using it
    and wait for the rebalance, never re-open it (that would fence the new owner)."""


def retriable(error: BaseException) -> bool:
    """Whether retrying the same step may succeed (broker down, timeouts, leadership
    moves) rather than fail the same way again (a record too large, a bug)."""
    if isinstance(error, TimeoutError | ConnectionError | OSError):
        return True
    return bool(getattr(error, "retriable", False))


async def retry_until_done(
    action: Callable[[], Awaitable[T]],
    what: str,
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[None]],
) -> T:
    """``await action()`` until it succeeds, pausing ``backoff`` between attempts; a
    :class:`FencedError` is not retried (the partition belongs to another worker now)."""
    failures = 0
    while True:
        try:
            return await action()
        except FencedError:
            raise
        except Exception as exc:
            failures += 1
            log.warning("%s failed (%r); retrying", what, exc)
            await sleep(backoff.delay(failures))
