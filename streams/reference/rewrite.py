"""A ``context.rewritten``: diff the snapshot against the live set, from scratch."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from spanguard.schemas import DEFAULT_SEVERITY, ContextRewritten, FaultKind, SnapshotEntry
from spanguard.streams.reference.extract import Referents, from_harness, from_text
from spanguard.streams.reference.outcome import Compacted, Fault, Outcome
from spanguard.streams.reference.state import (
    POISONED_AT,
    REWRITE_OF_REWRITE_AT,
    Session,
    Span,
    all_mentions,
    resolved,
)

BALLOON_RATIO = 1.0
"""Contract 1.1 default: a rewritten span longer than this x its sources balloons."""
MIN_SUMMARY_TOKENS = 3
"""Contract 1.1 default: a summary below this many tokens may be empty..."""
EMPTY_PARENT_FACTOR = 25
"""...when its parents held at least this x ``MIN_SUMMARY_TOKENS``."""
EMPTY_TEXT_SHA256 = hashlib.sha256(b"").hexdigest()
LOST_KEYS_MIN = 3
"""Contract 1.2 default: a summary's parents must hold this many keys..."""
LOST_KEYS_KEPT = 0.5
"""...and the live set after it fewer than this share of them: ``SUMMARY_LOST_KEYS``."""
THRASH_AFTER = 3
"""Contract 1.2 default: thin rewrites in a row that raise ``COMPACTION_THRASHING``..."""
THRASH_WITHIN_TURNS = 2
"""...each within this many turns of the rewrite before it..."""
THRASH_MIN_REDUCTION = 0.1
"""...each leaving more than (1 - this) x its live tokens before."""
UNKNOWN_ROLE = "unknown"
"""Contract 1.2: the role under which the record counts tokens of spans without one."""


def counter_faults(changes: list[tuple[str, int, int]]) -> list[Outcome]:
    """``REWRITE_OF_REWRITE`` / ``POISONED_SPAN`` for counters that reached 2 / 3
    (``(span_id, before, after)``; a span reaching both gets only the latter)."""
    outcomes: list[Outcome] = []
    for span_id, old, new in changes:
        if old < POISONED_AT <= new:
            outcomes.append(Fault("POISONED_SPAN", frozenset({span_id})))
        elif old < REWRITE_OF_REWRITE_AT <= new:
            outcomes.append(Fault("REWRITE_OF_REWRITE", frozenset({span_id})))
    return outcomes


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _snapshot_score_faults(entries: list[SnapshotEntry]) -> list[Outcome]:
    """A score inside the snapshot never binds; without a hash or a finite value it
    is a provenance gap, with another text's hash a stale score."""
    outcomes: list[Outcome] = []
    for entry in entries:
        if entry.score is None:
            continue
        if not entry.score.text_sha256 or not _finite_number(entry.score.score):
            outcomes.append(Fault("SCORE_PROVENANCE_GAP", frozenset({entry.span_id})))
        elif entry.score.text_sha256 != entry.content_hash:
            outcomes.append(Fault("STALE_SCORE", frozenset({entry.span_id})))
    return outcomes


def _summary_faults(
    before: dict[str, Span], entries: list[SnapshotEntry], merged: set[str]
) -> list[Outcome]:
    """Contract 1.1: ``SUMMARY_BALLOONING`` and ``EMPTY_SUMMARY``."""
    ballooned: set[str] = set()
    empty: set[str] = set()
    for entry in entries:
        parents = list(dict.fromkeys(entry.derived_from or ()))
        old = before.get(entry.span_id)
        if old is None:
            known = bool(parents) and all(p in before for p in parents)
            if known and entry.tokens > BALLOON_RATIO * sum(before[p].tokens for p in parents):
                ballooned.add(entry.span_id)
            if len(parents) >= 2:
                held = sum(before[p].tokens for p in parents if p in before)
                tiny = entry.tokens < MIN_SUMMARY_TOKENS
                enough = held >= EMPTY_PARENT_FACTOR * MIN_SUMMARY_TOKENS
                if entry.content_hash == EMPTY_TEXT_SHA256 or (tiny and enough):
                    empty.add(entry.span_id)
        elif entry.content_hash != old.text_hash:
            sources = old.tokens + sum(before[p].tokens for p in parents if p in merged)
            if entry.tokens > BALLOON_RATIO * sources:
                ballooned.add(entry.span_id)
    outcomes: list[Outcome] = []
    if ballooned:
        outcomes.append(Fault("SUMMARY_BALLOONING", frozenset(ballooned)))
    if empty:
        outcomes.append(Fault("EMPTY_SUMMARY", frozenset(empty)))
    return outcomes


def _referents(
    session: Session, entry: SnapshotEntry, old: Span | None, before: dict[str, Span]
) -> Referents:
    """A modified entry with text is re-extracted; a modified entry with only a hash
    keeps its referents; a created one inherits its live parents'; plus the
    entry's own."""
    own = from_harness(entry.introduces, entry.mentions)
    if old is not None and entry.content_hash == old.text_hash:
        # Reading (contract-notes): unchanged text has nothing new to extract; the span
        # keeps what it held and mentioned, the harness's lists included.
        return old.referents.plus(own)
    if entry.text is not None:
        return from_text(entry.text, session.known_types, session.names).plus(own)
    if old is not None:
        return old.referents.plus(own)
    inherited = Referents()
    for parent in dict.fromkeys(entry.derived_from or ()):
        if parent in before:
            inherited = inherited.plus(before[parent].referents)
    return inherited.plus(own)


def rewrite(session: Session, event: ContextRewritten) -> list[Outcome]:
    """The outcomes of one rewrite; replaces the session's live set."""
    base = event.base_seq
    before = dict(session.spans)

    def gone_after_base(span_id: str) -> bool:
        left = session.gone.get(span_id)
        return base is not None and left is not None and left.seq > base

    # Reading (contract-notes): position = index in the list as sent, also when an
    # entry before it is skipped (a span evicted after ``base_seq`` stays gone).
    placed = [
        (index, e)
        for index, e in enumerate(event.context)
        if e.span_id in before or not gone_after_base(e.span_id)
    ]
    entries = [e for _, e in placed]
    in_snapshot = {e.span_id for e in entries}
    # Contract 1.2: "a span merged into an entry that is itself gone after the rewrite
    # (an entry evicted after base_seq, which stays gone) is NOT merged": only the
    # derived_from of entries that are live after the rewrite make successors.
    cited = {parent for e in entries for parent in e.derived_from or ()}
    missing = [s for s in session.ordered() if s.span_id not in in_snapshot]
    kept = [s for s in missing if base is not None and s.added_seq > base]
    merged = [s for s in missing if s not in kept and s.span_id in cited]
    ungated = [s for s in missing if s not in kept and s.span_id not in cited]
    modified = [
        e for e in entries if e.span_id in before and e.content_hash != before[e.span_id].text_hash
    ]
    invalidated = set(event.scores_invalidated)
    declared = set(event.declared_modified)

    outcomes: list[Outcome] = []
    unrevoked = {
        s.span_id
        for s in [before[e.span_id] for e in modified] + merged
        if s.score is not None
        and s.score.score_id not in invalidated
        and (base is None or s.score.seq <= base)
    }
    if unrevoked:
        outcomes.append(Fault("REWRITE_WITHOUT_INVALIDATION", frozenset(unrevoked)))
    undeclared = {e.span_id for e in modified if e.span_id not in declared}
    if undeclared:
        outcomes.append(Fault("UNDECLARED_MODIFICATION", frozenset(undeclared)))
    if ungated:
        outcomes.append(Fault("UNGATED_EVICTION", frozenset(s.span_id for s in ungated)))
    outcomes.extend(_snapshot_score_faults(entries))

    after: dict[str, Span] = {}
    changes: list[tuple[str, int, int]] = []
    for index, entry in placed:
        old = before.get(entry.span_id)
        referents = _referents(session, entry, old, before)
        if old is None:
            parents = tuple(entry.derived_from or ())
            counter = 1 + max((session.counter_of(p) for p in parents), default=0)
            changes.append((entry.span_id, 0, counter))
            session.arrivals += 1
            span = Span(
                entry.span_id,
                index,
                session.arrivals,
                entry.content_hash,
                entry.tokens,
                parents,
                counter,
                None,
                referents,
                event.seq,
            )
        else:
            changed = entry.content_hash != old.text_hash
            # Reading (contract-notes): a binding belongs to the text it matched, so
            # ``scores_invalidated`` does not unbind the score of an unchanged span.
            score = None if changed else old.score
            counter = old.counter + 1 if changed else old.counter
            if changed:
                changes.append((entry.span_id, old.counter, counter))
            derived = tuple(entry.derived_from) if entry.derived_from is not None else None
            span = replace(
                old,
                position=index,
                text_hash=entry.content_hash,
                tokens=entry.tokens,
                derived_from=derived if derived is not None else old.derived_from,
                counter=counter,
                score=score,
                referents=referents,
            )
        after[entry.span_id] = span
    for offset, span in enumerate(kept):
        after[span.span_id] = replace(span, position=len(event.context) + offset)
    outcomes.extend(counter_faults(changes))
    outcomes.extend(_summary_faults(before, entries, {s.span_id for s in merged}))
    outcomes.extend(_dropped_referents(before, after))
    rewritten = [before[e.span_id] for e in modified]
    outcomes.extend(_protected_faults(rewritten, merged + ungated))
    outcomes.extend(_split_pairs(before, after))
    created = [e for e in entries if e.span_id not in before]
    outcomes.extend(_lost_keys(session, before, after, created))
    outcomes.extend(_thrashing(session, event, before, after))
    record = Compacted(
        event.rewrite_id,
        _tokens(before.values()),
        _tokens(after.values()),
        len(before),
        len(after),
        tuple(e.span_id for e in modified),
        tuple(e.span_id for e in created),
        tuple(s.span_id for s in merged),
        tuple(s.span_id for s in ungated),
        len(_keys(before.values())),
        len(_keys(after.values())),
        frozenset(),
        "clean",
        event.strategy,
        event.trigger,
        _by_role(before.values()),
        _by_role(after.values()),
    )

    for span in merged + ungated:
        session.leave(span.span_id, event.seq)
    session.spans = after
    for span in after.values():
        session.known_types.update(span.referents.types)
    return [*outcomes, record]


def list_faults(outcomes: list[Outcome]) -> list[Outcome]:
    """Fill in a ``context.compacted`` of ``outcomes`` with every fault its event
    caused (sequence and drift faults included: "every fault whose ``caused_by`` is
    the rewrite's event") and the outcome their worst severity gives."""
    faults = [item for item in outcomes if isinstance(item, Fault)]
    worst = max((_severity(item.kind) for item in faults), default=0)
    return [
        replace(
            item,
            faults=frozenset(f.kind for f in faults),
            outcome=("clean", "warning", "critical")[worst],
        )
        if isinstance(item, Compacted)
        else item
        for item in outcomes
    ]


def _severity(kind: str) -> int:
    """0, 1, 2 for the contract's default severity of ``kind``: info, warning, critical."""
    return ("info", "warning", "critical").index(DEFAULT_SEVERITY[FaultKind(kind)].value)


def _tokens(spans: Iterable[Span]) -> int:
    return sum(span.tokens for span in spans)


def _keys(spans: Iterable[Span]) -> set[str]:
    """The distinct referent keys the spans hold."""
    return {key for span in spans for key in span.referents.keys}


def _by_role(spans: Iterable[Span]) -> tuple[tuple[str, int], ...]:
    totals: dict[str, int] = {}
    for span in spans:
        role = span.role or UNKNOWN_ROLE
        totals[role] = totals.get(role, 0) + span.tokens
    return tuple(sorted(totals.items()))


def _protected_faults(changed: Sequence[Span], left_out: Sequence[Span]) -> list[Outcome]:
    """``PROTECTED_SPAN_REWRITTEN``, one per protected span the snapshot modifies or
    leaves out (merged or not)."""
    items = [(span, "modified") for span in changed if span.protected]
    items += [(span, "left out") for span in left_out if span.protected]
    return [
        Fault("PROTECTED_SPAN_REWRITTEN", frozenset({span.span_id}), ((span.span_id, change),))
        for span, change in items
    ]


def _halves(spans: Iterable[Span], call: str) -> tuple[list[Span], list[Span]]:
    """The spans that make ``call`` and those that answer it."""
    spans = list(spans)
    return (
        [s for s in spans if call in s.calls],
        [s for s in spans if s.answers == call],
    )


def _split_pairs(before: dict[str, Span], after: dict[str, Span]) -> list[Outcome]:
    """``TOOL_PAIR_SPLIT``, one per call id whose call and result were both live
    before and of which only one half is live after (a summary that replaces both
    halves leaves neither: healthy)."""
    outcomes: list[Outcome] = []
    for call in sorted({c for span in before.values() for c in span.call_ids}):
        makers, answers = _halves(before.values(), call)
        if not makers or not answers:
            continue
        makers, answers = _halves(after.values(), call)
        if bool(makers) == bool(answers):
            continue
        live = frozenset(s.span_id for s in makers + answers)
        outcomes.append(Fault("TOOL_PAIR_SPLIT", live, ((call, *sorted(live)),)))
    return outcomes


def _lost_keys(
    session: Session, before: dict[str, Span], after: dict[str, Span], created: list[SnapshotEntry]
) -> list[Outcome]:
    """``SUMMARY_LOST_KEYS``: a created span whose parents (live before the rewrite,
    or gone earlier with the keys they held when they left) held N >= 3 distinct
    keys, fewer than half of which a span live after the rewrite holds."""
    held = _keys(after.values())
    outcomes: list[Outcome] = []
    for entry in created:
        keys: set[str] = set()
        for parent in entry.derived_from or ():
            if parent in before:
                keys |= before[parent].referents.keys
            elif parent in session.gone:
                keys |= session.gone[parent].keys
        kept = len(keys & held)
        if len(keys) >= LOST_KEYS_MIN and kept < LOST_KEYS_KEPT * len(keys):
            detail = (entry.span_id, len(keys), kept, len(keys) - kept)
            outcomes.append(Fault("SUMMARY_LOST_KEYS", frozenset({entry.span_id}), (detail,)))
    return outcomes


def _thrashing(
    session: Session, event: ContextRewritten, before: dict[str, Span], after: dict[str, Span]
) -> list[Outcome]:
    """``COMPACTION_THRASHING`` at every ``THRASH_AFTER``-th thin rewrite in a row."""
    was, now = _tokens(before.values()), _tokens(after.values())
    thin = now > (1 - THRASH_MIN_REDUCTION) * was
    last = session.last_rewrite_turn
    # Reading (of the engine, see the module docstring): "within N turns of the rewrite
    # before it" is ``turn - previous turn <= N``; a turn that goes back is close.
    close = last is not None and event.turn - last <= THRASH_WITHIN_TURNS
    if not thin:
        session.thrash_run = 0
    elif close:
        session.thrash_run += 1
    else:
        session.thrash_run = 1
    session.last_rewrite_turn = event.turn
    run = session.thrash_run
    if run and run % THRASH_AFTER == 0:
        return [Fault("COMPACTION_THRASHING", frozenset(), ((run, was, now),))]
    return []


def _dropped_referents(before: dict[str, Span], after: dict[str, Span]) -> list[Outcome]:
    """``REFERENT_DROPPED``: a mention of a span live before and after the rewrite
    that had a live binding before and has none after."""
    lost: set[str] = set()
    before_live = list(before.values())
    after_live = list(after.values())
    for span_id, now in after.items():
        then = before.get(span_id)
        if then is None:
            continue
        for mention in all_mentions(now):
            if resolved(mention, then, before_live) and not resolved(mention, now, after_live):
                lost.add(span_id)
    return [Fault("REFERENT_DROPPED", frozenset(lost))] if lost else []
