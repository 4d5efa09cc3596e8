"""How transports tell the runtime what went wrong."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

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
    backoff: tuple[float, float],
    sleep: Callable[[float], Awaitable[None]],
) -> T:
    """``await action()`` until it succeeds, doubling the pause between attempts from
    ``backoff[0]`` up to ``backoff[1]``; a :class:`FencedError` is not retried (the
    partition belongs to another worker now)."""
    delay = backoff[0]
    while True:
        try:
            return await action()
        except FencedError:
            raise
        except Exception as exc:
            log.warning("%s failed (%r); retrying", what, exc)
            await sleep(delay)
            delay = min(max(delay, 0.01) * 2, backoff[1])
