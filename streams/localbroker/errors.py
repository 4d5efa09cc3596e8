"""The one exception type of :mod:`spanguard.streams.localbroker` (its own module, so that the Java,
jar and broker modules can all raise it without importing each other)."""

from __future__ import annotations

__all__ = ["BrokerError"]


class BrokerError(RuntimeError):
    """Raised when the local broker cannot be fetched, started, probed or stopped."""
