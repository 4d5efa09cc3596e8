"""A ``context.rewritten``: diff the snapshot against the live set, from scratch."""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace

from schemas import ContextRewritten, SnapshotEntry
from streams.reference.extract import Referents, from_harness, from_text
from streams.reference.outcome import Fault, Outcome
from streams.reference.state import (
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
    # Reading (contract-notes): "named in the derived_from of a span in the snapshot"
    # counts every entry as sent, also one that stays gone (evicted after base_seq).
    cited = {parent for e in event.context for parent in e.derived_from or ()}
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

    for span in merged + ungated:
        session.leave(span.span_id, event.seq)
    session.spans = after
    for span in after.values():
        session.known_types.update(span.referents.types)
    return outcomes


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
