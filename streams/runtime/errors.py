"""How transports tell the runtime what went wrong."""

from __future__ import annotations


class FencedError(Exception):
    """Another worker took over the partition (its writer fenced ours): stop using it
    and wait for the rebalance, never re-open it (that would fence the new owner)."""


def retriable(error: BaseException) -> bool:
    """Whether retrying the same step may succeed (broker down, timeouts, leadership
    moves) rather than fail the same way again (a record too large, a bug)."""
    if isinstance(error, TimeoutError | ConnectionError | OSError):
        return True
    return bool(getattr(error, "retriable", False))
