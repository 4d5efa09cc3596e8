"""What the contract requires an input event to cause, in a form that compares.

Ids, timestamps and severities are left out on purpose: the differential test
compares the *semantics* (which fault kinds name which spans, what a decision
committed, refused and dropped, which spans were pinned, what a compaction
record says). Evidence is compared only where it is the substance of a fault
(contract 1.2's kinds: the call id of a split pair, a summary's key counts, a
thrashing run), as a ``detail`` tuple.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fault:
    """An ``integrity.fault`` of ``kind`` naming ``span_ids``."""

    kind: str
    span_ids: frozenset[str]
    details: tuple[tuple[str | int, ...], ...] = ()
    """Contract 1.2 kinds: what the evidence must state, one tuple per item
    (see :func:`spanguard.streams.reference.compare.details_of`)."""


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
    held_by: frozenset[tuple[str, str]] = frozenset()
    """Contract 1.2: ``(span_id, held_by)`` of each ``TOOL_PAIR`` refusal."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """An ``event.rejected`` with its ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Compacted:
    """A ``context.compacted`` (contract 1.2): the record of one accepted rewrite.

    ``faults`` are the kinds of the faults it lists (ids do not compare across
    producers; the record must list every fault of its event); ``tokens_by_role_*``
    are sorted ``(role, tokens)`` pairs.
    """

    rewrite_id: str
    tokens_before: int
    tokens_after: int
    spans_before: int
    spans_after: int
    modified: tuple[str, ...]
    created: tuple[str, ...]
    merged: tuple[str, ...]
    removed: tuple[str, ...]
    keys_before: int
    keys_after: int
    faults: frozenset[str]
    outcome: str
    strategy: str | None
    trigger: str | None
    tokens_by_role_before: tuple[tuple[str, int], ...]
    tokens_by_role_after: tuple[tuple[str, int], ...]


Outcome = Fault | Pin | Recompute | Decision | Rejected | Compacted
"""One output the contract requires."""
