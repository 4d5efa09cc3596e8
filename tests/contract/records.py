"""Small valid input records the contract tests build on."""

from __future__ import annotations

from typing import Any


def session_closed(**extra: Any) -> dict[str, Any]:
    """A valid ``session.closed`` record, with ``extra`` fields added."""
    return {
        "type": "session.closed",
        "schema_version": 1,
        "event_id": "e",
        "session_id": "s",
        "tenant": "t",
        "seq": 0,
        "turn": 0,
        "ts": "2026-11-30T10:00:00Z",
        **extra,
    }
