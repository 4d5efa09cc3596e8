"""The eviction gate (``eviction.requested`` -> ``eviction.decided``), in the
contract's order:

1. pinned set: candidates that a retained span's mention needs, closed transitively;
2. FREEZE when any live span is stale (``stale_rewrites > 0``), with a recompute
   request for those spans and their one-hop neighbours;
3. commit what is left that is not pinned and (for ``basis: score``) scored;
4. poisoned spans are dropped with the decision, unless pinned;
5. committed and dropped spans leave the live set at once.

Cost: O((candidates + their referent edges) * log n); a policy's selection
reads only the ranked prefix it selects.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from itertools import islice
from typing import NamedTuple

from schemas import Action, EvictionPolicy, EvictionRequested, FaultKind, PinMention, RefusalReason
from streams.engine.emit import Emission, assemble
from streams.engine.referent_index import Mention
from streams.engine.state import BULK_SHARE, ScoreKey, SessionState, SpanState


class Pin(NamedTuple):
    """Why a candidate is pinned: who needs it, through which mention, by what path."""

    pinned_for: list[str]
    mention: Mention
    path: list[str]


def decide(session: SessionState, event: EvictionRequested, emission: Emission) -> None:
    """Run the gate for one request and emit its faults, pins, recompute and decision."""
    settings = emission.settings
    spans = session.spans
    requested = (
        list(dict.fromkeys(event.candidates))
        if event.candidates is not None
        else _select(session, event.policy, event.query_sha256)
    )
    refused: list[tuple[str, RefusalReason]] = []
    live: list[str] = []
    for span_id in requested:
        if span_id in spans:
            live.append(span_id)
        else:
            reason = (
                RefusalReason.ALREADY_EVICTED
                if span_id in session.gone
                else RefusalReason.UNKNOWN_SPAN
            )
            refused.append((span_id, reason))
    poisoned = sorted(session.poisoned_pending, key=lambda s: spans[s].order_key)
    removal = set(live) | set(poisoned)

    pins = pinned_set(session, removal)
    dropped = [s for s in poisoned if s not in pins]
    kept_poisoned = [s for s in poisoned if s in pins]
    if kept_poisoned:
        emission.fault(
            FaultKind.POISONED_SPAN,
            kept_poisoned,
            {"request_id": event.request_id, "pinned": True, "treatment": "kept: pinned"},
        )
        refused.extend((s, RefusalReason.PINNED) for s in kept_poisoned if s not in live)

    frozen = event.basis == "score" and bool(session.stale)
    committed: list[str] = []
    recompute_id: str | None = None
    if frozen:
        session.freeze_streak += 1
        if session.freeze_streak % settings.stall_after == 0:
            emission.fault(
                FaultKind.PRUNING_STALLED,
                sorted(session.stale, key=lambda s: spans[s].order_key),
                {"request_id": event.request_id, "consecutive_freezes": session.freeze_streak},
            )
        for span_id in live:
            if span_id in pins:
                refused.append((span_id, RefusalReason.PINNED))
            elif span_id in session.stale:
                refused.append((span_id, RefusalReason.STALE_SCORE))
            elif span_id not in session.poisoned_pending:
                refused.append((span_id, RefusalReason.FROZEN))
    else:
        session.freeze_streak = 0
        committed = _commit(session, event, live, pins, refused, settings.protect_lineage)
        _check_orphans(session, event, committed, dropped, emission)

    _emit_pins(event, pins, emission)
    if frozen:
        recompute_id = _request_recompute(session, set(dropped), emission)
    action = _action(frozen, committed, refused)
    emission.decision(
        event.request_id, event.basis, action, committed, refused, dropped, recompute_id
    )
    session.remove_spans(committed + dropped, event.seq)


def pinned_set(
    session: SessionState, removal: set[str], bulk: bool | None = None
) -> dict[str, Pin]:
    """Candidates (``removal``) that a retained span's mention resolves to, closed
    transitively over the pinned spans' own mentions.

    A small removal set touches only the candidates and their referent edges; a
    large one (or ``bulk=True``) is resolved by one ordered pass over every live
    span, so the gate is never slower than rescanning the session. Both give the
    same pins, in the same order, with the same mention and path.
    """
    spans = session.spans
    if bulk is None:
        bulk = len(removal) * BULK_SHARE > len(spans)
    needed = _needed_in_one_pass(session, removal) if bulk else None
    index = session.referents
    pins: dict[str, Pin] = {}
    queue: deque[str] = deque()
    if needed is None:
        in_order = sorted(removal, key=lambda s: spans[s].order_key)
    else:  # the pass over the session is paid already: no sort of a large selection
        in_order = [at[2] for at in session.order if at[2] in removal]
    for span_id in in_order:
        if needed is not None:
            found = needed.get(span_id)
            if found is None:
                continue
            users, mention = found
        else:
            span = spans[span_id]
            needed_by: dict[str, Mention] = {}
            for user, used in index.dependents(span_id, span.order_key, span.holds):
                if user not in removal:
                    needed_by.setdefault(user, used)
            if not needed_by:
                continue
            users = sorted(needed_by, key=lambda s: spans[s].order_key)
            mention = needed_by[users[0]]
        pins[span_id] = Pin(users, mention, [users[0], span_id])
        queue.append(span_id)
    key_holders = index.key_holders
    while queue:
        holder_id = queue.popleft()
        holder = spans[holder_id]
        # A span that repeats a key depends on the key's binding as much as one that
        # mentions it explicitly: its holdings first, then its mentions.
        for key, type_ in holder.holds:
            binder = key_holders[key][0][2]
            if binder in removal and binder not in pins and binder != holder_id:
                mention = Mention(key=key, type=type_)
                pins[binder] = Pin([holder_id], mention, [*pins[holder_id].path, binder])
                queue.append(binder)
        for mention in holder.mentions:
            bound_by = index.resolve(holder.order_key, mention)
            if (
                bound_by is not None
                and bound_by in removal
                and bound_by not in pins
                and bound_by != holder_id
            ):
                pins[bound_by] = Pin([holder_id], mention, [*pins[holder_id].path, bound_by])
                queue.append(bound_by)
    return pins


def _needed_in_one_pass(
    session: SessionState, removal: set[str]
) -> dict[str, tuple[list[str], Mention]]:
    """For each span of ``removal`` that a retained span needs: the retained users in
    context order, and the mention that the per-candidate walk
    (:meth:`ReferentIndex.dependents`) would give for the first of them: the
    smallest key it holds or mentions that the candidate binds, else the smallest
    type of an anaphor the candidate binds."""
    spans = session.spans
    key_holders = session.referents.key_holders
    latest_of_type: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    first_mention: dict[str, Mention] = {}
    for at in session.order:
        user_id = at[2]
        user = spans[user_id]
        if user_id not in removal:
            # Binder -> (keys, anaphor types) it binds for this user; most users need
            # none, so nothing is allocated until one does.
            by_binder: dict[str, tuple[list[str], list[str]]] | None = None
            binder: str | None
            for key, _ in user.holds:
                binder = key_holders[key][0][2]
                if binder != user_id and binder in removal:
                    by_binder = _bound(by_binder, binder)
                    by_binder[binder][0].append(key)
            for mention in user.mentions:
                if mention.key is not None:
                    holders = key_holders.get(mention.key)
                    binder = holders[0][2] if holders else None
                    if binder is not None and binder != user_id and binder in removal:
                        by_binder = _bound(by_binder, binder)
                        by_binder[binder][0].append(mention.key)
                elif mention.type is not None:
                    binder = latest_of_type.get(mention.type)
                    if binder is not None and binder in removal:
                        by_binder = _bound(by_binder, binder)
                        by_binder[binder][1].append(mention.type)
            for bound_by, (keys, types) in (by_binder or _NO_BINDERS).items():
                listed = users.get(bound_by)
                if listed is None:
                    users[bound_by] = [user_id]
                    if keys:
                        key = min(keys)
                        first_mention[bound_by] = Mention(
                            key=key, type=_type_held(spans[bound_by], key)
                        )
                    else:
                        first_mention[bound_by] = Mention(type=min(types))
                elif listed[-1] != user_id:
                    listed.append(user_id)
        for _, type_ in user.holds:
            latest_of_type[type_] = user_id
    return {span_id: (listed, first_mention[span_id]) for span_id, listed in users.items()}


_NO_BINDERS: dict[str, tuple[list[str], list[str]]] = {}


def _bound(
    by_binder: dict[str, tuple[list[str], list[str]]] | None, binder: str
) -> dict[str, tuple[list[str], list[str]]]:
    # The (keys, types) lists of ``binder``, made on first use (with the dict itself).
    if by_binder is None:
        return {binder: ([], [])}
    if binder not in by_binder:
        by_binder[binder] = ([], [])
    return by_binder


def _type_held(span: SpanState, key: str) -> str:
    # The type the binder holds the key under (its first holding of the key).
    return next(type_ for held, type_ in span.holds if held == key)


def _select(session: SessionState, policy: EvictionPolicy | None, query: str | None) -> list[str]:
    """The policy's selection, ranked only on bound scores (lowest first)."""
    assert policy is not None
    ranked = [
        ranking for q, ranking in session.scores.items() if query is None or q in (None, query)
    ]
    if policy.threshold is not None:
        limit: ScoreKey = (policy.threshold, -1, "")
        below = [islice(r, 0, r.bisect_left(limit)) for r in ranked]
        return [key[2] for key in heapq.merge(*below)]
    assert policy.keep_top_k is not None
    excess = sum(len(r) for r in ranked) - policy.keep_top_k
    if excess <= 0:
        return []
    return [key[2] for key in islice(heapq.merge(*ranked), excess)]


def _commit(
    session: SessionState,
    event: EvictionRequested,
    live: list[str],
    pins: dict[str, Pin],
    refused: list[tuple[str, RefusalReason]],
    protect_lineage: bool,
) -> list[str]:
    spans = session.spans
    needs_score = event.basis == "score"
    eligible: list[str] = []
    for span_id in live:
        span = spans[span_id]
        if span_id in pins:
            refused.append((span_id, RefusalReason.PINNED))
        elif span_id in session.poisoned_pending:
            continue  # leaves with the decision's `dropped`
        elif needs_score and not _scored_for(span, event.query_sha256):
            refused.append((span_id, RefusalReason.UNSCORED))
        else:
            eligible.append(span_id)
    if not protect_lineage or not session.children:
        return eligible
    # A parent may go when every live span citing it goes with it.
    leaving = set(eligible) | session.poisoned_pending
    committed: list[str] = []
    for span_id in eligible:
        if session.children.get(span_id, set()) - leaving:
            refused.append((span_id, RefusalReason.LINEAGE))
        else:
            committed.append(span_id)
    return committed


def _scored_for(span: SpanState, query: str | None) -> bool:
    bound = span.bound
    if bound is None:
        return False
    return query is None or bound.query_sha256 is None or bound.query_sha256 == query


def _check_orphans(
    session: SessionState,
    event: EvictionRequested,
    committed: list[str],
    dropped: list[str],
    emission: Emission,
) -> None:
    leaving = set(committed) | set(dropped)
    orphans: dict[str, list[str]] = {}
    for span_id in committed:
        staying = sorted(session.children.get(span_id, set()) - leaving)
        if staying:
            orphans[span_id] = staying
    if orphans:
        emission.fault(
            FaultKind.ORPHANED_PARENT,
            list(orphans),
            {"request_id": event.request_id, "cited_by": orphans},
        )


def _emit_pins(event: EvictionRequested, pins: dict[str, Pin], emission: Emission) -> None:
    surfaces = emission.settings.emit_surfaces
    for span_id, pin in pins.items():
        mention = assemble(
            PinMention,
            {
                "key": pin.mention.key,
                "type": pin.mention.type,
                "surface": pin.mention.surface if surfaces else None,
            },
        )
        emission.pin(span_id, event.request_id, pin.pinned_for, mention, pin.path)


def _request_recompute(session: SessionState, dropped: set[str], emission: Emission) -> str:
    # A span the same decision drops is never named (contract 1.1, gate step 5):
    # neighbours are taken among the spans that stay live.
    spans = session.spans
    wanted: set[str] = set()
    for span_id in session.stale:
        wanted.add(span_id)
        wanted.update(session.neighbours(spans[span_id], dropped))
    ordered = sorted(wanted, key=lambda s: spans[s].order_key)
    reason = (
        f"FREEZE: {len(session.stale)} live span(s) rewritten since their last bound score; "
        "recompute them and their one-hop neighbours"
    )
    return emission.recompute(ordered, reason)


def _action(
    frozen: bool, committed: Iterable[str], refused: list[tuple[str, RefusalReason]]
) -> Action:
    if frozen:
        return Action.FREEZE
    if not refused:
        return Action.COMMIT
    return Action.PARTIAL if any(True for _ in committed) else Action.REJECT
