"""What the contract requires an input event to cause, in a form that compares.

Ids, timestamps, severities and evidence are left out on purpose: the
differential test compares the *semantics* (which fault kinds name which spans,
what a decision committed, refused and dropped, which spans were pinned).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fault:
    """An ``integrity.fault`` of ``kind`` naming ``span_ids``."""

    kind: str
    span_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class Pin:
    """A ``span.pinned``: ``span_id`` kept for the retained spans ``pinned_for``."""

    span_id: str
    pinned_for: frozenset[str]


@dataclass(frozen=True, slots=True)
class Recompute:
    """A ``scores.recompute_requested`` for ``span_ids``."""

    span_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class Decision:
    """An ``eviction.decided``; ``refused`` holds ``(span_id, reason)`` pairs."""

    request_id: str
    action: str
    committed: frozenset[str]
    refused: frozenset[tuple[str, str]]
    dropped: frozenset[str]


@dataclass(frozen=True, slots=True)
class Rejected:
    """An ``event.rejected`` with its ``reason``."""

    reason: str


Outcome = Fault | Pin | Recompute | Decision | Rejected
"""One output the contract requires."""
