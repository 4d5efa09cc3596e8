"""``context.rewritten``: diffing a model's complete snapshot against what was live.

The rewriter's own declaration is not trusted; hashes decide:

* modified: same span id, new hash;   * created: a span id not live before;
* merged: missing from the snapshot but named in a snapshot span's ``derived_from``;
* ungated: missing with no such successor (``UNGATED_EVICTION``).

With ``base_seq``, events after it win: spans added later and missing stay
live (after the snapshot's spans, in their own order), and spans evicted later
but present stay gone. The work is O(size of the snapshot).
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from dataclasses import dataclass, field
from typing import Any

from spanguard.schemas import ContextRewritten, FaultKind, SnapshotEntry
from spanguard.streams.engine import compaction
from spanguard.streams.engine.counters import apply_counters, created_counter
from spanguard.streams.engine.drift import open_window
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.holdings import Holdings, HoldingsBuilder
from spanguard.streams.engine.keys import key_text
from spanguard.streams.engine.referent_index import Mention, first_holder, order_of
from spanguard.streams.engine.state import (
    BULK_SHARE,
    Reshape,
    SessionState,
    SpanState,
    to_digest,
)
from spanguard.streams.engine.summaries import emit_summary_faults, inspect_summaries


@dataclass(slots=True)
class _Diff:
    modified: list[tuple[SnapshotEntry, SpanState]] = field(default_factory=list)
    unchanged: list[tuple[SnapshotEntry, SpanState]] = field(default_factory=list)
    created: list[SnapshotEntry] = field(default_factory=list)
    stays_gone: list[str] = field(default_factory=list)
    kept_late: list[SpanState] = field(default_factory=list)
    merged: list[SpanState] = field(default_factory=list)
    ungated: list[SpanState] = field(default_factory=list)
    placed: list[tuple[int, SpanState]] = field(default_factory=list)
    """Each span live before and after with its new position, in the new order: its
    snapshot index; spans added after ``base_seq`` and missing follow the snapshot
    in their own order."""
    created_at: list[int] = field(default_factory=list)
    """The snapshot index of each of ``created``."""
    modified_at: list[int] = field(default_factory=list)
    """The snapshot index of each of ``modified``."""


def apply_rewrite(
    session: SessionState,
    event: ContextRewritten,
    emission: Emission,
    builder: HoldingsBuilder,
) -> None:
    """Apply a rewrite to the session and emit every fault it proves."""
    window = open_window(session, event.rewrite_id)
    was = compaction.before(session)
    diff = _diff(session, event)
    protected = compaction.protected_rewrites(
        [span for _, span in diff.modified], diff.merged + diff.ungated
    )
    parents = compaction.parent_keys(session, diff.created)
    in_order = _keeps_order(diff)
    holdings = _new_holdings(session, event, diff, builder)
    counters = _new_counters(session, diff)
    affected = _affected_spans(session, diff, holdings) if in_order else None
    before = _resolutions_before(session, diff, holdings, affected)
    summaries = inspect_summaries(
        session, emission.settings, diff.created, diff.modified, diff.merged
    )

    missing_invalidation = _check_invalidation(event, diff)
    window.clean = not missing_invalidation and not diff.ungated
    _check_declaration(event, diff, emission)
    if missing_invalidation:
        emission.fault(
            FaultKind.REWRITE_WITHOUT_INVALIDATION,
            [item["span_id"] for item in missing_invalidation],
            {
                "rewrite_id": event.rewrite_id,
                "spans": missing_invalidation,
                "modified": len(diff.modified),
                "merged": len(diff.merged),
                "scores_invalidated": len(event.scores_invalidated),
            },
        )
    if diff.ungated:
        emission.fault(
            FaultKind.UNGATED_EVICTION,
            [s.span_id for s in diff.ungated],
            {
                "rewrite_id": event.rewrite_id,
                "spans": [
                    {"span_id": s.span_id, "text_sha256": s.text_sha256} for s in diff.ungated
                ],
            },
        )
    _check_snapshot_scores(event, emission)

    _mutate(session, event, diff, holdings, in_order)
    changes = [(s, s.stale_rewrites + 1) for _, s in diff.modified]
    changes += [(session.spans[span_id], n) for span_id, n in counters.items()]
    apply_counters(session, emission, changes, cause=event.rewrite_id)
    if _check_referents(session, event, before, emission):
        window.clean = False
    # Last, so that the ids of the faults above stay those of contract 1.0 (and 1.1).
    emit_summary_faults(summaries, event.rewrite_id, emission)
    compaction.check_after(session, event, emission, was, protected, parents)
    compaction.record(
        session,
        event,
        emission,
        was,
        {
            "modified": [span.span_id for _, span in diff.modified],
            "created": [entry.span_id for entry in diff.created],
            "merged": [span.span_id for span in diff.merged],
            "removed": [span.span_id for span in diff.ungated],
        },
    )


def live_after(session: SessionState, event: ContextRewritten) -> int:
    """How many spans ``event`` would leave live (the session is not changed)."""
    diff = _diff(session, event)
    return len(diff.placed) + len(diff.created)


def _diff(session: SessionState, event: ContextRewritten) -> _Diff:
    diff = _Diff()
    base = event.base_seq
    spans = session.spans
    gone = session.gone
    modified = diff.modified.append
    unchanged = diff.unchanged.append
    placed = diff.placed.append
    for position, entry in enumerate(event.context):
        span = spans.get(entry.span_id)
        if span is not None:
            if entry.text_sha256 != span.text_sha256:
                modified((entry, span))
                diff.modified_at.append(position)
            else:
                unchanged((entry, span))
            placed((position, span))
            continue
        left = gone.get(entry.span_id)
        if base is not None and left is not None and left.seq > base:
            diff.stays_gone.append(entry.span_id)  # an entry for a span evicted later
        else:
            diff.created.append(entry)
            diff.created_at.append(position)
    if len(diff.placed) == len(spans):
        return diff  # every live span is in the snapshot (its span ids are unique)
    in_snapshot = {entry.span_id for entry in event.context}
    # An entry that stays gone (evicted after base_seq) is no successor: what was merged
    # into it survives nowhere live (1.2: UNGATED_EVICTION).
    staying_gone = set(diff.stays_gone)
    named_parents = {
        parent
        for entry in event.context
        if entry.derived_from and entry.span_id not in staying_gone
        for parent in entry.derived_from
    }
    missing = sorted((spans[s] for s in spans.keys() - in_snapshot), key=order_of)
    for span in missing:
        if base is not None and span.added_seq > base:
            placed((len(event.context) + len(diff.kept_late), span))
            diff.kept_late.append(span)
        elif span.span_id in named_parents:
            diff.merged.append(span)
        else:
            diff.ungated.append(span)
    return diff


def _keeps_order(diff: _Diff) -> bool:
    """Whether the spans that stay live keep their order relative to each other (the
    common rewrite: spans merged, condensed or inserted, nothing moved past another).
    Then the order keys move in place (no index is re-sorted), and only the mentions
    that a removed or re-held span could have bound are resolved before and after."""
    old = [order_of(span) for _, span in diff.placed]
    return all(map(operator.lt, old, itertools.islice(old, 1, None)))


def _affected_spans(session: SessionState, diff: _Diff, holdings: dict[str, Holdings]) -> set[str]:
    """Live spans whose mentions may resolve differently after an order-keeping
    rewrite: the spans whose holdings are rebuilt, and every span with a mention
    bound by a span that leaves or is re-held (the mentioners of a key it binds as
    its first holder; the anaphors of a type it holds up to that type's next
    holder). Any other mention keeps the binder it had, still in front of it."""
    spans = session.spans
    index = session.referents
    affected = {span_id for span_id in holdings if span_id in spans}
    binders = [*diff.merged, *diff.ungated, *(spans[span_id] for span_id in affected)]
    for binder in binders:
        affected |= index.dependent_ids(binder)
    return affected


def _new_holdings(
    session: SessionState, event: ContextRewritten, diff: _Diff, builder: HoldingsBuilder
) -> dict[str, Holdings]:
    tenant = session.tenant
    known = session.known_types
    book = session.names

    def explicit(entry: SnapshotEntry) -> Holdings:
        return builder.build(
            tenant, known, book, None, entry.content_hash, entry.introduces, entry.mentions
        )

    def kept(entry: SnapshotEntry, span: SpanState) -> Holdings:
        return Holdings(span.holds, span.mentions, span.surfaces).union(explicit(entry))

    # Only spans whose holdings may change are listed: a span kept as it was (no
    # text, no explicit referents) keeps its holdings, and its types are known.
    result: dict[str, Holdings] = {}
    for entry, span in diff.unchanged:
        if entry.introduces is not None or entry.mentions is not None:
            result[span.span_id] = kept(entry, span)
    # Texts are extracted in snapshot order, modified and created entries alike: the
    # name book learns from each text what a later one may repeat (contract 1.2).
    rewritten = heapq.merge(
        zip(diff.modified_at, diff.modified, strict=True),
        zip(diff.created_at, ((entry, None) for entry in diff.created), strict=True),
        key=operator.itemgetter(0),
    )
    for _, (entry, old) in rewritten:
        if entry.text is not None:
            result[entry.span_id] = builder.build(
                tenant,
                known,
                book,
                entry.text,
                entry.content_hash,
                entry.introduces,
                entry.mentions,
            )
        elif old is not None:
            if entry.introduces is not None or entry.mentions is not None:
                result[entry.span_id] = kept(entry, old)
        else:
            inherited = explicit(entry)
            for parent_id in entry.derived_from or ():
                parent = session.spans.get(parent_id)
                if parent is not None:
                    inherited = inherited.union(
                        Holdings(parent.holds, parent.mentions, parent.surfaces)
                    )
            result[entry.span_id] = inherited
    for item in result.values():
        known = builder.learn_types(known, item)
    session.known_types = known
    return result


def _new_counters(session: SessionState, diff: _Diff) -> dict[str, int]:
    # Measured on the state before the rewrite: a summary inherits the counter of
    # the text it was written from.
    return {e.span_id: created_counter(session, e.derived_from or ()) for e in diff.created}


def _resolutions_before(
    session: SessionState,
    diff: _Diff,
    holdings: dict[str, Holdings],
    affected: set[str] | None,
) -> dict[str, list[tuple[Mention, str]]]:
    """For each span live before and after (each of ``affected``, when given): its
    mentions that resolved before, and to what."""
    survivors = [s for _, s in diff.unchanged] + [s for _, s in diff.modified] + diff.kept_late
    if affected is not None:
        survivors = [span for span in survivors if span.span_id in affected]
    wanted = {
        span.span_id: holdings[span.span_id].mentions if span.span_id in holdings else span.mentions
        for span in survivors
    }
    binders = resolve(session, wanted)
    before: dict[str, list[tuple[Mention, str]]] = {}
    for span in survivors:
        found = binders.get(span.span_id)
        if found is None:
            continue
        resolved = [
            (mention, binder)
            for mention, binder in zip(wanted[span.span_id], found, strict=True)
            if binder is not None
        ]
        if resolved:
            before[span.span_id] = resolved
    return before


def resolve(
    session: SessionState, wanted: dict[str, tuple[Mention, ...]]
) -> dict[str, list[str | None]]:
    """:func:`resolve_in_order`'s answers, found by one index search per mention when
    ``wanted`` is a small share of the session (a pass over it would cost more)."""
    spans = session.spans
    if len(wanted) * BULK_SHARE > len(spans):
        return resolve_in_order(session, wanted)
    index = session.referents
    found: dict[str, list[str | None]] = {}
    for span_id, mentions in wanted.items():
        if mentions:
            span = spans[span_id]
            found[span_id] = [index.resolve(span, mention) for mention in mentions]
    return found


def resolve_in_order(
    session: SessionState, wanted: dict[str, tuple[Mention, ...]]
) -> dict[str, list[str | None]]:
    """What each mention of the live spans in ``wanted`` resolves to (None: nothing),
    aligned with ``wanted``'s lists, in one pass over the context order.

    The same answers as :meth:`ReferentIndex.resolve` for each mention (a key is bound
    by its earliest holder, an anaphor by the latest holder of its type before the
    span), without a sorted-index search per mention.
    """
    key_holders = session.referents.key_holders
    spans = session.spans
    latest: dict[str, str] = {}
    found: dict[str, list[str | None]] = {}
    for span in session.order:
        span_id = span.span_id
        mentions = wanted.get(span_id)
        if mentions:
            binders: list[str | None] = []
            for mention in mentions:
                if mention.key is not None:
                    holders = key_holders.get(mention.key)
                    binders.append(None if holders is None else first_holder(holders).span_id)
                elif mention.type is not None:
                    binders.append(latest.get(mention.type))
                else:
                    binders.append(None)
            found[span_id] = binders
        for type_ in spans[span_id].holds[1::2]:
            latest[type_] = span_id
    return found


def _check_invalidation(event: ContextRewritten, diff: _Diff) -> list[dict[str, Any]]:
    invalidated = set(event.scores_invalidated)
    base = event.base_seq
    missing: list[dict[str, Any]] = []
    changed = [(s, e.content_hash) for e, s in diff.modified] + [(s, None) for s in diff.merged]
    for span, new_hash in changed:
        bound = span.bound
        if bound is None or bound.score_id in invalidated:
            continue
        if base is not None and bound.bound_seq > base:
            continue
        missing.append(
            {
                "span_id": span.span_id,
                "score_id": bound.score_id,
                "bound_sha256": bound.text_sha256,
                "new_sha256": new_hash,
                "merged": new_hash is None,
            }
        )
    return missing


def _check_declaration(event: ContextRewritten, diff: _Diff, emission: Emission) -> None:
    declared = set(event.declared_modified)
    undeclared = [(e, s) for e, s in diff.modified if s.span_id not in declared]
    if not undeclared:
        return
    emission.fault(
        FaultKind.UNDECLARED_MODIFICATION,
        [s.span_id for _, s in undeclared],
        {
            "rewrite_id": event.rewrite_id,
            "declared_modified": sorted(declared),
            "spans": [
                {
                    "span_id": s.span_id,
                    "expected_sha256": s.text_sha256,
                    "actual_sha256": e.content_hash,
                }
                for e, s in undeclared
            ],
        },
    )


def _check_snapshot_scores(event: ContextRewritten, emission: Emission) -> None:
    gaps: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    for entry in event.context:
        claim = entry.score
        if claim is None:
            continue
        value = claim.score
        finite = (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
        if not claim.text_sha256 or not finite:
            gaps.append({"span_id": entry.span_id, "score_id": claim.score_id, "finite": finite})
        elif claim.text_sha256 != entry.content_hash:
            stale.append(
                {
                    "span_id": entry.span_id,
                    "score_id": claim.score_id,
                    "expected_sha256": entry.content_hash,
                    "actual_sha256": claim.text_sha256,
                }
            )
    for kind, items in ((FaultKind.SCORE_PROVENANCE_GAP, gaps), (FaultKind.STALE_SCORE, stale)):
        if items:
            emission.fault(
                kind,
                [item["span_id"] for item in items],
                {"rewrite_id": event.rewrite_id, "source": "context.rewritten", "scores": items},
            )


def _mutate(
    session: SessionState,
    event: ContextRewritten,
    diff: _Diff,
    holdings: dict[str, Holdings],
    in_order: bool,
) -> None:
    kept = diff.unchanged + diff.modified
    session.reshape(
        Reshape(
            seq=event.seq,
            removed=[span.span_id for span in diff.merged + diff.ungated],
            retexted=[(span, entry.content_hash) for entry, span in diff.modified],
            shaped=[
                (
                    span,
                    entry.tokens,
                    span.derived_from
                    if entry.derived_from is None
                    else session.lineage(entry.derived_from),
                )
                for entry, span in kept
            ],
            created=[
                SpanState(
                    span_id=entry.span_id,
                    text_digest=to_digest(entry.content_hash),
                    tokens=entry.tokens,
                    position=position,
                    arrival=session.next_arrival(),
                    added_seq=event.seq,
                    derived_from=session.lineage(entry.derived_from),
                )
                for entry, position in zip(diff.created, diff.created_at, strict=True)
            ],
            placed=diff.placed,
            holdings=holdings,
            in_order=in_order,
        )
    )


def _check_referents(
    session: SessionState,
    event: ContextRewritten,
    before: dict[str, list[tuple[Mention, str]]],
    emission: Emission,
) -> bool:
    dropped: list[dict[str, Any]] = []
    live = {
        span_id: tuple(mention for mention, _ in resolved)
        for span_id, resolved in before.items()
        if span_id in session.spans
    }
    after = resolve(session, live)
    for span_id, resolved in before.items():
        now = after.get(span_id)
        if now is None:
            continue
        for (mention, binder), binder_now in zip(resolved, now, strict=True):
            if binder_now is None:
                dropped.append(
                    {
                        "span_id": span_id,
                        "key": None if mention.key is None else key_text(mention.key),
                        "type": mention.type,
                        "was_bound_by": binder,
                    }
                )
    if dropped:
        emission.fault(
            FaultKind.REFERENT_DROPPED,
            list(dict.fromkeys(item["span_id"] for item in dropped)),
            {"rewrite_id": event.rewrite_id, "mentions": dropped},
        )
    return bool(dropped)
