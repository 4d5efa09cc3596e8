"""Event time: the contract's RFC 3339 text to seconds since the epoch and back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse_ts(value: Any) -> float | None:
    """RFC 3339 text (or a datetime) -> seconds since the epoch; None when unreadable
    or without an offset (the contract's times always carry one)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def to_datetime(ts: float) -> datetime:
    """Seconds since the epoch -> an aware UTC datetime."""
    return datetime.fromtimestamp(ts, UTC)
