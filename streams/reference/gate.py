"""The eviction gate, recomputed from scratch for one ``eviction.requested``."""

from __future__ import annotations

from spanguard.schemas import EvictionRequested
from spanguard.streams.reference.outcome import Decision, Fault, Outcome, Pin, Recompute
from spanguard.streams.reference.state import POISONED_AT, Session, Span, all_mentions, binder

STALL_AFTER = 3
"""The contract's default: FREEZEs in a row that raise ``PRUNING_STALLED``."""


def usable_score(span: Span, query: str | None) -> float | None:
    """The span's bound score for ``query`` (a score for another query is absent)."""
    bound = span.score
    if bound is None:
        return None
    if query is not None and bound.query is not None and bound.query != query:
        return None
    return bound.value


def requested_spans(session: Session, event: EvictionRequested) -> list[str]:
    """The candidates, or the policy's selection (ranked only on bound scores)."""
    if event.candidates is not None:
        return list(dict.fromkeys(event.candidates))
    assert event.policy is not None
    ranked: list[tuple[float, Span]] = []
    for span in session.ordered():
        value = usable_score(span, event.query_sha256)
        # Contract 1.2: policies never select a protected span, and keep_top_k
        # neither ranks nor counts one.
        if span.counter < POISONED_AT and value is not None and not span.protected:
            ranked.append((value, span))
    if event.policy.threshold is not None:
        threshold = event.policy.threshold
        return [span.span_id for value, span in ranked if value < threshold]
    # Reading (contract-notes): spans leave lowest score first; among equal scores
    # the earlier position (the older turn) leaves first, then the smaller span id.
    worst_first = sorted(ranked, key=lambda item: (item[0], item[1].order, item[1].span_id))
    excess = len(ranked) - (event.policy.keep_top_k or 0)
    return [span.span_id for _, span in worst_first[: max(0, excess)]]


def _pins(session: Session, leaving: set[str]) -> dict[str, set[str]]:
    """Step 1: spans that would leave but that a retained span needs, closed
    transitively over the pinned spans' own mentions; each with the spans
    (retained, or pinned themselves) whose mentions resolve to it."""
    live = list(session.spans.values())
    pinned: dict[str, set[str]] = {}
    work = [span for span in live if span.span_id not in leaving]
    examined: set[str] = set()
    while work:
        owner = work.pop()
        if owner.span_id in examined:
            continue
        examined.add(owner.span_id)
        for mention in all_mentions(owner):
            needed = binder(mention, owner, live)
            if needed is None or needed.span_id not in leaving:
                continue
            pinned.setdefault(needed.span_id, set()).add(owner.span_id)
            work.append(needed)
    return pinned


def _neighbours(session: Session, stale: list[Span], dropped: set[str]) -> set[str]:
    """Stale spans and their one-hop neighbours: adjacent by position, live
    ``derived_from`` parents and live children, in the live set the decision
    leaves (without the spans it drops)."""
    ordered = [span for span in session.ordered() if span.span_id not in dropped]
    wanted: set[str] = set()
    for span in stale:
        wanted.add(span.span_id)
        index = ordered.index(span)
        if index > 0:
            wanted.add(ordered[index - 1].span_id)
        if index + 1 < len(ordered):
            wanted.add(ordered[index + 1].span_id)
        wanted.update(p for p in span.derived_from if p in session.spans and p not in dropped)
        wanted.update(other.span_id for other in ordered if span.span_id in other.derived_from)
    return wanted


def _absent(session: Session, span_id: str) -> str:
    return "ALREADY_EVICTED" if span_id in session.gone else "UNKNOWN_SPAN"


def decide(session: Session, event: EvictionRequested) -> list[Outcome]:
    """The outcomes of one eviction request; applies its removals to ``session``."""
    outcomes: list[Outcome] = []
    requested = requested_spans(session, event)
    protected = {s.span_id for s in session.spans.values() if s.protected}
    poisoned = {s.span_id for s in session.spans.values() if s.counter >= POISONED_AT}
    # Contract 1.2: a protected candidate counts as retained (it stays, so what it
    # refers to must stay too).
    requested_live = {span_id for span_id in requested if span_id in session.spans}
    leaving = (requested_live | poisoned) - protected
    pinned = _pins(session, leaving)
    outcomes.extend(Pin(span_id, frozenset(needs)) for span_id, needs in pinned.items())
    droppable = poisoned - pinned.keys() - protected
    kept_poisoned = poisoned & pinned.keys()
    if kept_poisoned:
        outcomes.append(Fault("POISONED_SPAN", frozenset(kept_poisoned)))
    stale = [s for s in session.ordered() if 0 < s.counter < POISONED_AT]
    refused: set[tuple[str, str]] = {(span_id, "PINNED") for span_id in kept_poisoned}
    eligible: list[str] = []
    frozen = bool(stale) and event.basis == "score"
    for span_id in requested:
        if span_id in droppable:
            continue
        if span_id in protected:
            refused.add((span_id, "PROTECTED"))
        elif span_id in pinned:
            refused.add((span_id, "PINNED"))
        elif span_id not in session.spans:
            refused.add((span_id, _absent(session, span_id)))
        elif frozen:
            stale_itself = session.spans[span_id].counter > 0
            refused.add((span_id, "STALE_SCORE" if stale_itself else "FROZEN"))
        elif (
            event.basis == "score"
            and usable_score(session.spans[span_id], event.query_sha256) is None
        ):
            stale_itself = session.spans[span_id].counter > 0
            refused.add((span_id, "STALE_SCORE" if stale_itself else "UNSCORED"))
        else:
            eligible.append(span_id)
    paired, held_by = _whole_groups(session, set(eligible) | droppable)
    committed = [span_id for span_id in eligible if span_id in paired]
    refused |= {(span_id, "TOOL_PAIR") for span_id in eligible if span_id not in paired}
    dropped = droppable & paired
    # Contract 1.2, step 4: "The same holds for a poisoned span that is protected, or
    # whose group stays": as a pinned one, it stays, refused (PROTECTED, TOOL_PAIR),
    # with the fault, at every decision that keeps it, requested or not.
    kept_protected = poisoned & protected
    if kept_protected:
        outcomes.append(Fault("POISONED_SPAN", frozenset(kept_protected)))
        refused |= {(span_id, "PROTECTED") for span_id in kept_protected}
    kept_in_group = droppable - paired
    if kept_in_group:
        outcomes.append(Fault("POISONED_SPAN", frozenset(kept_in_group)))
        refused |= {(span_id, "TOOL_PAIR") for span_id in kept_in_group}
    if frozen:
        action = "FREEZE"
        recompute = _neighbours(session, stale, dropped)
        outcomes.append(Recompute(frozenset(recompute)))
        session.freezes += 1
        if session.freezes % STALL_AFTER == 0:
            outcomes.append(Fault("PRUNING_STALLED", frozenset()))
    else:
        session.freezes = 0
        if not refused:
            action = "COMMIT"
        elif committed:
            action = "PARTIAL"
        else:
            action = "REJECT"
    for span_id in [*committed, *sorted(dropped)]:
        session.leave(span_id, event.seq)
    cited = {parent for span in session.spans.values() for parent in span.derived_from}
    orphaned = {span_id for span_id in committed if span_id in cited}
    if orphaned:
        outcomes.append(Fault("ORPHANED_PARENT", frozenset(orphaned)))
    outcomes.append(
        Decision(
            event.request_id,
            action,
            frozenset(committed),
            frozenset(refused),
            frozenset(dropped),
            frozenset((s, held_by[s]) for s, reason in refused if reason == "TOOL_PAIR"),
        )
    )
    return outcomes


def _whole_groups(session: Session, leaving: set[str]) -> tuple[set[str], dict[str, str]]:
    """Contract 1.2: of ``leaving``, the spans whose whole tool pair group leaves too;
    each span held back is held by the first span (by position) of its group that
    stays."""
    paired = set(leaving)
    held_by: dict[str, str] = {}
    for span_id in sorted(leaving):
        if span_id not in paired:
            continue
        group = session.group(span_id)
        staying = [span for span in group if span.span_id not in leaving]
        if staying:
            for span in group:
                if span.span_id in paired:
                    paired.discard(span.span_id)
                    held_by[span.span_id] = staying[0].span_id
    return paired, held_by
