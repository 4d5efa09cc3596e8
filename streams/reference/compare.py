"""Project output events (the engine's, or any producer's) onto the reference's
outcomes, and compare two runs event by event.

It reads only the contract's output models from :mod:`schemas`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spanguard.schemas import (
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    SpanPinned,
)
from spanguard.streams.reference.model import ReferenceModel
from spanguard.streams.reference.outcome import (
    Compacted,
    Decision,
    Fault,
    Outcome,
    Pin,
    Recompute,
    Rejected,
)

SESSION_WIDE = frozenset({"MONOTONIC_DRIFT", "PRUNING_STALLED", "SEQUENCE_GAP", "OUT_OF_ORDER"})
"""Fault kinds about the session, not about spans: their span ids are not compared."""


def details_of(kind: str, evidence: dict[str, Any]) -> tuple[tuple[str | int, ...], ...]:
    """What a contract 1.2 fault's evidence must state, as the reference states it:
    ``PROTECTED_SPAN_REWRITTEN`` (span, ``modified`` or ``left out``) per span;
    ``TOOL_PAIR_SPLIT`` (call id, the live spans of the call, sorted);
    ``SUMMARY_LOST_KEYS`` (summary, N parent keys, kept, lost);
    ``COMPACTION_THRASHING`` (rewrites in the run, tokens before, tokens after).
    Malformed evidence yields an item that matches nothing."""
    try:
        if kind == "PROTECTED_SPAN_REWRITTEN":
            return tuple((item["span_id"], item["change"]) for item in evidence["spans"])
        if kind == "TOOL_PAIR_SPLIT":
            return ((evidence["tool_call_id"], *sorted(evidence["live"])),)
        if kind == "SUMMARY_LOST_KEYS":
            keys, kept, lost = evidence["parent_keys"], evidence["kept"], evidence["lost"]
            return ((evidence["span_id"], keys, kept, len(lost)),)
        if kind == "COMPACTION_THRASHING":
            run = evidence["consecutive"]
            return ((run, evidence["tokens_before"], evidence["tokens_after"]),)
    except (KeyError, TypeError):
        return (("malformed evidence",),)
    return ()


def outcomes_of(outputs: Iterable[OutputEvent]) -> list[Outcome]:
    """The outcomes a list of output events states (ids, times, most evidence left
    out; a compaction record's fault ids become the kinds of those faults)."""
    found: list[Outcome] = []
    kinds: dict[str, str] = {}
    for output in outputs:
        if isinstance(output, IntegrityFault):
            kind = output.kind.value
            kinds[output.fault_id] = kind
            found.append(Fault(kind, frozenset(output.span_ids), details_of(kind, output.evidence)))
        elif isinstance(output, SpanPinned):
            found.append(Pin(output.span_id, frozenset(output.pinned_for)))
        elif isinstance(output, ScoresRecomputeRequested):
            found.append(Recompute(frozenset(output.span_ids)))
        elif isinstance(output, EvictionDecided):
            found.append(
                Decision(
                    output.request_id,
                    output.action.value,
                    frozenset(output.committed),
                    frozenset((r.span_id, r.reason.value) for r in output.refused),
                    frozenset(output.dropped),
                    frozenset((r.span_id, r.held_by) for r in output.refused if r.held_by),
                )
            )
        elif isinstance(output, ContextCompacted):
            found.append(_compacted(output, kinds))
        elif isinstance(output, EventRejected):
            found.append(Rejected(output.reason.value))
    return found


def _compacted(output: ContextCompacted, kinds: dict[str, str]) -> Compacted:
    """A record as the reference states it; a fault id not produced before it (by
    the same event) reads as ``?<id>``, which no reference record lists."""
    return Compacted(
        output.rewrite_id,
        output.tokens_before,
        output.tokens_after,
        output.spans_before,
        output.spans_after,
        tuple(output.modified),
        tuple(output.created),
        tuple(output.merged),
        tuple(output.removed),
        output.keys_before,
        output.keys_after,
        frozenset(kinds.get(fault_id, f"?{fault_id}") for fault_id in output.faults)
        | (frozenset() if len(set(output.faults)) == len(kinds) else frozenset({"?missing"})),
        output.outcome,
        output.strategy,
        output.trigger,
        tuple(sorted(output.tokens_by_role_before.items())),
        tuple(sorted(output.tokens_by_role_after.items())),
    )


@dataclass(frozen=True, slots=True)
class Semantics:
    """What is compared of one input event's outcomes.

    Faults as ``(kind, span_id)`` pairs (so grouping spans into one fault or
    several does not matter; ``""`` for a session-wide kind), the 1.2 kinds'
    evidence as ``(kind, *detail)`` tuples, pinned spans, ``(pinned span, span
    whose mention needs it)`` pairs, recomputed spans, decisions, compaction
    records, whether each record follows every fault of its event (the contract:
    "produced after every fault it lists") and rejection reasons.
    """

    faults: frozenset[tuple[str, str]]
    details: frozenset[tuple[str | int, ...]]
    pins: frozenset[str]
    pinned_for: frozenset[tuple[str, str]]
    recompute: frozenset[str]
    decisions: tuple[Decision, ...]
    compactions: tuple[Compacted, ...]
    compacted_last: bool
    rejections: tuple[str, ...]


def semantics(outcomes: Sequence[Outcome]) -> Semantics:
    """Reduce a list of outcomes to what the comparison looks at."""
    faults: set[tuple[str, str]] = set()
    details: set[tuple[str | int, ...]] = set()
    pins: set[tuple[str, str]] = set()
    recompute: set[str] = set()
    decisions: list[Decision] = []
    compactions: list[Compacted] = []
    last = True
    rejections: list[str] = []
    for item in outcomes:
        if isinstance(item, Fault):
            last = last and not compactions
            if item.kind in SESSION_WIDE or not item.span_ids:
                faults.add((item.kind, ""))
            else:
                faults.update((item.kind, span_id) for span_id in item.span_ids)
            details.update((item.kind, *detail) for detail in item.details)
        elif isinstance(item, Pin):
            pins.add((item.span_id, ""))
            pins.update((item.span_id, needer) for needer in item.pinned_for)
        elif isinstance(item, Recompute):
            recompute.update(item.span_ids)
        elif isinstance(item, Decision):
            decisions.append(item)
        elif isinstance(item, Compacted):
            compactions.append(item)
        else:
            rejections.append(item.reason)
    return Semantics(
        frozenset(faults),
        frozenset(details),
        frozenset(span_id for span_id, _ in pins),
        frozenset(pair for pair in pins if pair[1]),
        frozenset(recompute),
        tuple(decisions),
        tuple(compactions),
        last,
        tuple(sorted(rejections)),
    )


FIELDS = (
    "faults",
    "details",
    "pins",
    "pinned_for",
    "recompute",
    "decisions",
    "compactions",
    "compacted_last",
    "rejections",
)


def disagreements(engine: Semantics, reference: Semantics) -> list[str]:
    """The fields on which ``engine`` departs from ``reference``.

    ``pinned_for`` only has to be a subset of the reference's: the reference
    lists every span whose mention resolves to the pinned one, while a
    pinned_for that names only the spans that caused the pin (the retained
    spans, and spans pinned before it) is a valid reading too.
    """
    differ = [
        name
        for name in FIELDS
        if name != "pinned_for" and getattr(engine, name) != getattr(reference, name)
    ]
    if not engine.pinned_for <= reference.pinned_for:
        differ.append("pinned_for")
    return differ


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first input line on which a producer departs from the reference."""

    index: int
    line: bytes
    fields: tuple[str, ...]
    produced: Semantics
    expected: Semantics

    def describe(self) -> str:
        """A readable account of the difference (for a failing test or a report)."""
        parts = [f"line {self.index}: {self.line.decode(errors='replace')[:600]}"]
        for name in self.fields:
            parts.append(f"  {name}: produced {getattr(self.produced, name)}")
            parts.append(f"  {name}: expected {getattr(self.expected, name)}")
        return "\n".join(parts)


def first_divergence(
    lines: Sequence[bytes],
    produce: Callable[[int, bytes], Sequence[OutputEvent]],
    model: ReferenceModel | None = None,
) -> Divergence | None:
    """Feed ``lines`` to ``produce`` (index, line -> output events) and to ``model``
    (a fresh :class:`~spanguard.streams.reference.model.ReferenceModel` by default); the first
    line whose outcomes differ, or None."""
    model = model or ReferenceModel()
    for index, line in enumerate(lines):
        produced = semantics(outcomes_of(produce(index, line)))
        expected = semantics(model.process(line))
        fields = disagreements(produced, expected)
        if fields:
            return Divergence(index, line, tuple(fields), produced, expected)
    return None


Producer = Callable[[int, bytes], Sequence[OutputEvent]]


def shrink(lines: Sequence[bytes], fresh: Callable[[], Producer]) -> list[bytes]:
    """A shorter trace that still diverges: drop lines one at a time (the last first)
    while the divergence stays. ``fresh`` makes a new producer for every try.
    ``lines`` must diverge; the result is 1-minimal (no single line can go)."""
    kept = list(lines)
    divergence = first_divergence(kept, fresh())
    assert divergence is not None, "shrink needs a trace that diverges"
    kept = kept[: divergence.index + 1]
    index = len(kept) - 2
    while index >= 0:
        trial = kept[:index] + kept[index + 1 :]
        if first_divergence(trial, fresh()) is not None:
            kept = trial
        index -= 1
    return kept
