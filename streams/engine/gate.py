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
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import NamedTuple

from spanguard.schemas import (
    Action,
    EvictionPolicy,
    EvictionRequested,
    FaultKind,
    PinMention,
    RefusalReason,
)
from spanguard.streams.engine.emit import Emission, assemble
from spanguard.streams.engine.keys import StoredKey, key_text, sort_keyed
from spanguard.streams.engine.referent_index import (
    IndexedSpan,
    KeyHolders,
    Mention,
    OrderKey,
    order_of,
)
from spanguard.streams.engine.state import (
    GATE_BULK_SHARE,
    SessionState,
    SpanState,
    bound_score,
    rank_key,
    rank_place,
)

# Enum members read once: under Python 3.11 reading one from its class runs a Python
# descriptor (about 2,000 instructions), and a request reads several.
_ALREADY_EVICTED, _UNKNOWN_SPAN = RefusalReason.ALREADY_EVICTED, RefusalReason.UNKNOWN_SPAN
_PINNED, _PROTECTED = RefusalReason.PINNED, RefusalReason.PROTECTED
_UNSCORED = RefusalReason.UNSCORED
_STALE_SCORE, _FROZEN = RefusalReason.STALE_SCORE, RefusalReason.FROZEN
_TOOL_PAIR, _LINEAGE = RefusalReason.TOOL_PAIR, RefusalReason.LINEAGE
_COMMIT, _PARTIAL, _REJECT, _FREEZE = Action.COMMIT, Action.PARTIAL, Action.REJECT, Action.FREEZE


class Pin(NamedTuple):
    """Why a candidate is pinned: who needs it, through which mention, by what path."""

    pinned_for: list[str]
    mention: Mention
    path: list[str]


def decide(session: SessionState, event: EvictionRequested, emission: Emission) -> None:
    """Run the gate for one request and emit its faults, pins, recompute and decision."""
    settings = emission.settings
    spans = session.spans
    protected = session.protected
    # A policy selects from the rankings, which hold live spans only.
    ranked = event.candidates is None
    refused: list[tuple[str, RefusalReason]] = []
    if ranked:
        live = _select(session, event.policy, event.query_sha256)
    else:
        requested = list(dict.fromkeys(event.candidates or ()))
        live = [span_id for span_id in requested if span_id in spans]
        if len(live) < len(requested):
            refused = [
                (span_id, _ALREADY_EVICTED if span_id in session.gone else _UNKNOWN_SPAN)
                for span_id in requested
                if span_id not in spans
            ]
    pending = session.poisoned_pending
    poisoned = session.in_order(pending) if pending else []
    live_set = set(live)
    removal = live_set.union(poisoned) if poisoned else live_set
    if protected:
        # A protected candidate stays, so what it refers to must stay too (1.2).
        removal = removal - protected

    pins = pinned_set(session, removal)
    droppable: list[str] = []
    if poisoned:
        droppable = [s for s in poisoned if s not in pins and s not in protected]
        kept_poisoned = [s for s in poisoned if s in pins]
        if kept_poisoned:
            emission.fault(
                FaultKind.POISONED_SPAN,
                kept_poisoned,
                {"request_id": event.request_id, "pinned": True, "treatment": "kept: pinned"},
            )
            refused.extend((s, _PINNED) for s in kept_poisoned if s not in live_set)
        refused.extend((s, _PROTECTED) for s in poisoned if s in protected and s not in live_set)

    frozen = event.basis == "score" and bool(session.stale)
    committed: list[str] = []
    held_by: dict[str, str] = {}
    recompute_id: str | None = None
    if frozen:
        session.freeze_streak += 1
        if session.freeze_streak % settings.stall_after == 0:
            emission.fault(
                FaultKind.PRUNING_STALLED,
                session.in_order(session.stale),
                {"request_id": event.request_id, "consecutive_freezes": session.freeze_streak},
            )
        for span_id in live:
            if span_id in protected:
                refused.append((span_id, _PROTECTED))
            elif span_id in pins:
                refused.append((span_id, _PINNED))
            elif span_id in session.stale:
                refused.append((span_id, _STALE_SCORE))
            elif span_id not in pending:
                refused.append((span_id, _FROZEN))
        dropped = _whole_groups(session, [], droppable, refused, held_by, False)[1]
    else:
        session.freeze_streak = 0
        eligible = _eligible(session, event, live, ranked, pins, refused)
        committed, dropped = _whole_groups(
            session, eligible, droppable, refused, held_by, settings.protect_lineage
        )
        _check_orphans(session, event, committed, dropped, emission)
    if pending:
        _keep_poisoned(session, event, droppable, dropped, emission)
    if pins:
        _emit_pins(session, event, pins, emission)
    if frozen:
        recompute_id = _request_recompute(session, set(dropped), emission)
    action = _action(frozen, committed, refused)
    emission.decision(
        event.request_id,
        event.basis,
        action,
        committed,
        refused,
        dropped,
        recompute_id,
        held_by,
    )
    session.remove_spans(committed + dropped, event.seq)


def _keep_poisoned(
    session: SessionState,
    event: EvictionRequested,
    droppable: list[str],
    dropped: list[str],
    emission: Emission,
) -> None:
    """A poisoned span that is protected, or whose tool pair group stays, stays too,
    with the fault at every decision that keeps it (1.2)."""
    leaving = set(dropped)
    protected = [s for s in session.poisoned_pending if s in session.protected]
    grouped = [s for s in droppable if s not in leaving]
    for kept, treatment in ((protected, "kept: protected"), (grouped, "kept: its tool pair stays")):
        if kept:
            emission.fault(
                FaultKind.POISONED_SPAN,
                session.in_order(kept),
                {"request_id": event.request_id, "pinned": False, "treatment": treatment},
            )


def _whole_groups(
    session: SessionState,
    eligible: list[str],
    droppable: list[str],
    refused: list[tuple[str, RefusalReason]],
    held_by: dict[str, str],
    protect_lineage: bool,
) -> tuple[list[str], list[str]]:
    """What may leave of ``eligible`` and ``droppable`` (poisoned spans): a span of a
    tool pair group only with every live span of its group (else ``TOOL_PAIR``, held
    by the first of the group that stays), a parent only when every live span citing
    it leaves too (``LINEAGE``, when configured). The two rules feed each other, so
    they run until nothing changes."""
    if not session.call_spans and not (protect_lineage and session.children):
        return eligible, droppable  # no rule applies: everything may leave
    leaving = dict.fromkeys(eligible) | dict.fromkeys(droppable)
    refusing: dict[str, RefusalReason] = {}
    changed = True
    while changed:
        changed = False
        if session.call_spans:
            for span_id in list(leaving):
                if span_id not in leaving or not session.spans[span_id].call_ids:
                    continue
                group = session.group(span_id)
                staying = [member for member in group if member not in leaving]
                if staying:
                    for member in group:
                        if member in leaving:
                            del leaving[member]
                            refusing[member] = _TOOL_PAIR
                            held_by[member] = staying[0]
                    changed = True
        if protect_lineage and session.children:
            for span_id in list(leaving):
                if any(kid not in leaving for kid in session.children_of(span_id)):
                    del leaving[span_id]
                    refusing[span_id] = _LINEAGE
                    changed = True
    poisoned = set(droppable)
    for span_id in (*eligible, *droppable):
        reason = refusing.get(span_id)
        if reason is not None:
            refused.append((span_id, reason))
    return (
        [s for s in eligible if s in leaving],
        [s for s in droppable if s in leaving and s in poisoned],
    )


def pinned_set(
    session: SessionState, removal: set[str], bulk: bool | None = None
) -> dict[str, Pin]:
    """Candidates (``removal``) that a retained span's mention resolves to, closed
    transitively over the pinned spans' own mentions.

    A small removal set touches only the candidates and their referent edges; a
    large one (or ``bulk=True``) is resolved from the whole referent index at once
    (one look at every key and every anaphor, as a rescan would), so the gate is
    never slower than rescanning the session. Both give the same pins, in the
    same order, with the same mention and path.
    """
    spans = session.spans
    if bulk is None:
        bulk = len(removal) * GATE_BULK_SHARE > len(spans)
    pins = _direct_pins_in_bulk(session, removal) if bulk else _direct_pins(session, removal)
    queue = deque(pins)
    index = session.referents
    key_holders = index.key_holders
    while queue:
        holder_id = queue.popleft()
        holder = spans[holder_id]
        # A span that repeats a key depends on the key's binding as much as one that
        # mentions it explicitly: its holdings first, then its mentions.
        holds = holder.holds
        # ``hold_pairs`` and ``first_holder`` inlined: this runs for every holding of
        # every pinned span (the pairs read in place, see ``Holds``).
        at = 0
        while at < len(holds):
            key, type_ = holds[at], holds[at + 1]
            at += 2
            entry = key_holders[key]
            binder = (entry[0] if isinstance(entry, list) else entry).span_id
            if binder != holder_id and binder in removal and binder not in pins:
                mention = Mention(key=key, type=type_)
                pins[binder] = Pin([holder_id], mention, [*pins[holder_id].path, binder])
                queue.append(binder)
        for mention in holder.mentions:
            bound_by = index.resolve(holder, mention)
            if (
                bound_by is not None
                and bound_by in removal
                and bound_by not in pins
                and bound_by != holder_id
            ):
                pins[bound_by] = Pin([holder_id], mention, [*pins[holder_id].path, bound_by])
                queue.append(bound_by)
    return pins


def _direct_pins(session: SessionState, removal: set[str]) -> dict[str, Pin]:
    """The candidates a retained span needs, in context order, each with its retained
    users in context order and the mention that binds the first of them to it."""
    # The first user's mention is the first a walk over the candidate's bindings meets
    # for it: the smallest key (text form) the candidate binds for it, else the
    # smallest anaphor type. Each user's first need is kept as (its order key, key or
    # None, type, the user), and a Mention is made for the first user only.
    spans = session.spans
    index = session.referents
    key_holders = index.key_holders
    key_mentioners = index.key_mentioners
    pins: dict[str, Pin] = {}
    for candidate in sorted([spans[span_id] for span_id in removal], key=order_of):
        holds = candidate.holds
        if not holds:
            continue  # binds nothing: nobody needs it
        bound: list[tuple[StoredKey, str, KeyHolders]] = []
        # ``hold_pairs`` inlined: this runs for every candidate (the pairs read in place,
        # see ``Holds``).
        at_pair = 0
        while at_pair < len(holds):
            key, type_ = holds[at_pair], holds[at_pair + 1]
            at_pair += 2
            entry = key_holders.get(key)
            # ``first_holder`` inlined: this runs for every holding of every candidate.
            if entry is not None and (entry[0] if isinstance(entry, list) else entry) is candidate:
                bound.append((key, type_, entry))
        if len(bound) > 1:
            # A key held twice counts under its first type.
            firsts: dict[StoredKey, tuple[StoredKey, str, KeyHolders]] = {}
            for held in bound:
                firsts.setdefault(held[0], held)
            bound = list(firsts.values())
            sort_keyed(bound, None, _held_text)
        needed: dict[str, tuple[OrderKey, StoredKey | None, str, str]] = {}
        for key, type_, entry in bound:
            if isinstance(entry, list):
                for other in entry[1:]:
                    user = other.span_id
                    if user not in removal:
                        needed.setdefault(user, (order_of(other), key, type_, user))
            for user in key_mentioners.get(key, ()):
                if user not in removal and user not in needed:
                    needed[user] = (order_of(spans[user]), key, type_, user)
        for type_ in (holds[1],) if len(holds) == 2 else sorted(set(holds[1::2])):
            for anaphor in index.anaphors_bound_by(candidate, type_):
                user = anaphor.span_id
                if user not in removal:
                    needed.setdefault(user, (order_of(anaphor), None, type_, user))
        if needed:
            # One entry per user: the (unique) order keys decide every comparison.
            found = sorted(needed.values())
            users = [need[3] for need in found]
            _, used, type_, _ = found[0]
            mention = Mention(type=type_) if used is None else Mention(key=used, type=type_)
            pins[candidate.span_id] = Pin(users, mention, [users[0], candidate.span_id])
    return pins


def _held_text(held: tuple[StoredKey, str, KeyHolders]) -> str:
    return key_text(held[0])


_KEY, _ANAPHOR = 0, 1
"""How a user needs a candidate, in the order the per-candidate walk tries them."""

Edge = tuple[OrderKey, int, StoredKey, str]
"""``(user's order key, how, key or type, user's id)``: a user's need of a candidate."""


def _edge_text(edge: Edge) -> tuple[OrderKey, int, str, str]:
    # An edge as its key's text form sorts it (bytes and str keys never compare).
    at, how, name, user = edge
    return at, how, key_text(name), user


def _direct_pins_in_bulk(session: SessionState, removal: set[str]) -> dict[str, Pin]:
    """:func:`_direct_pins`'s answer from one look at every key's holders and
    mentioners and at every anaphor, without a sorted-index search per candidate.

    Each (user, how, key or type) edge to a candidate is collected, then a
    candidate's edges are sorted: users come in context order and its first edge
    is the walk's mention for the first user.
    """
    spans = session.spans
    index = session.referents
    # By binder id, with the binders aside, to sort them.
    edges: dict[str, list[Edge]] = {}
    binders: list[IndexedSpan] = []

    def edges_of(binder: IndexedSpan) -> list[Edge]:
        found = edges.get(binder.span_id)
        if found is None:
            found = edges[binder.span_id] = []
            binders.append(binder)
        return found

    mentioners = index.key_mentioners
    for key, entry in index.key_holders.items():
        if not isinstance(entry, list):  # one holder: the entry is the span
            # Many keys have one holder and no mentioner: nobody else to need the binder.
            if key not in mentioners or entry.span_id not in removal:
                continue
            binder = entry
            found: list[Edge] | None = None
        else:  # two holders or more (see ``KeyHolders``)
            binder = entry[0]
            if binder.span_id not in removal:
                continue
            found = None
            # Short lists: plain loops, no comprehension to call per key.
            for holder in entry[1:]:
                if holder.span_id not in removal:
                    if found is None:
                        found = edges_of(binder)
                    found.append((order_of(holder), _KEY, key, holder.span_id))
        for user in mentioners.get(key, ()):
            if user not in removal and user != binder.span_id:
                if found is None:
                    found = edges_of(binder)
                found.append((order_of(spans[user]), _KEY, key, user))
    for type_, anaphors in index.anaphors.items():
        typed = index.type_holders.get(type_)
        if not typed:
            continue
        # Users come in order, so each one's binder (the latest holder of the type
        # before it) is searched for from the previous one's, among the holders' order
        # keys read once (a key function would read them again at every probe).
        places = list(map(order_of, typed))
        after = 0
        for anaphor in anaphors:
            if anaphor.span_id in removal:
                continue
            place = order_of(anaphor)
            after = bisect_left(places, place, after)
            if after and typed[after - 1].span_id in removal:
                edges_of(typed[after - 1]).append((place, _ANAPHOR, type_, anaphor.span_id))
    # One (frozen) Mention per type that pins, not one per pin, made when first needed:
    # a Mention costs as much as a dozen edges.
    anaphor_mentions: dict[str, Mention] = {}
    pins: dict[str, Pin] = {}
    for binder in sorted(binders, key=order_of):
        binder_id = binder.span_id
        found = edges[binder_id]
        if len(found) == 1:
            _, how, name, user = found[0]
            user_ids = [user]
        else:
            sort_keyed(found, None, _edge_text)
            _, how, name, _ = found[0]
            user_ids = list(dict.fromkeys([edge[3] for edge in found]))
        if how == _KEY:
            mention = Mention(key=name, type=_type_held(spans[binder_id], name))
        else:
            assert isinstance(name, str)  # an anaphor's edge names its type
            mention = anaphor_mentions.get(name) or anaphor_mentions.setdefault(
                name, Mention(type=name)
            )
        pins[binder_id] = Pin(user_ids, mention, [user_ids[0], binder_id])
    return pins


def _type_held(span: SpanState, key: StoredKey) -> str:
    # The type ``span`` holds ``key`` under (its first holding of the key).
    holds = span.holds
    at = 0
    while at < len(holds):  # its pairs in place (see ``Holds``)
        if holds[at] == key:
            type_: str = holds[at + 1]
            return type_
        at += 2
    raise KeyError(key)


def _select(session: SessionState, policy: EvictionPolicy | None, query: str | None) -> list[str]:
    """The policy's selection, ranked only on bound scores (lowest first)."""
    assert policy is not None
    ranked = [
        ranking for q, ranking in session.scores.items() if query is None or q in (None, query)
    ]
    protected = session.protected
    if policy.threshold is not None:
        limit = policy.threshold
        below = [islice(r, 0, bisect_left(r, limit, key=bound_score)) for r in ranked]
        return [span.span_id for span in _merged(below) if span.span_id not in protected]
    assert policy.keep_top_k is not None
    # keep_top_k neither ranks nor counts a protected span (1.2).
    shielded = sum(_protected_in(session, r) for r in ranked)
    excess = sum(len(r) for r in ranked) - shielded - policy.keep_top_k
    if excess <= 0:
        return []
    selectable = _merged(ranked)
    if protected:
        selectable = (span for span in selectable if span.span_id not in protected)
    return [span.span_id for span in islice(selectable, excess)]


def _protected_in(session: SessionState, ranking: list[SpanState]) -> int:
    """How many of the ranking's spans are protected (few: looked up one by one)."""
    found = 0
    for span_id in session.protected:
        span = session.spans[span_id]
        if not span.scored:
            continue
        at = rank_place(ranking, span)
        if at < len(ranking) and ranking[at] is span:
            found += 1
    return found


def _merged(rankings: Sequence[Iterable[SpanState]]) -> Iterable[SpanState]:
    # Without a query there is one ranking: no merge to pay per selected span.
    return rankings[0] if len(rankings) == 1 else heapq.merge(*rankings, key=rank_key)


def _eligible(
    session: SessionState,
    event: EvictionRequested,
    live: list[str],
    ranked: bool,
    pins: dict[str, Pin],
    refused: list[tuple[str, RefusalReason]],
) -> list[str]:
    """The candidates no rule of their own keeps: not protected, not pinned, not
    poisoned (those leave with ``dropped``) and, for ``basis: score``, scored."""
    # ``ranked``: ``live`` is a policy's selection from the bound-score rankings, so
    # each span is scored for the query, none is poisoned and none is protected
    # (none would rank): only the pins can refuse one.
    if ranked:
        if not pins:
            return live
        refused += [(span_id, _PINNED) for span_id in live if span_id in pins]
        return [span_id for span_id in live if span_id not in pins]
    eligible: list[str] = []
    spans = session.spans
    protected = session.protected
    needs_score = event.basis == "score"
    for span_id in live:
        if span_id in protected:
            refused.append((span_id, _PROTECTED))
        elif span_id in pins:
            refused.append((span_id, _PINNED))
        elif span_id in session.poisoned_pending:
            continue  # leaves with the decision's `dropped`
        elif needs_score and not _scored_for(spans[span_id], event.query_sha256):
            refused.append((span_id, _UNSCORED))
        else:
            eligible.append(span_id)
    return eligible


def _scored_for(span: SpanState, query: str | None) -> bool:
    if not span.scored:
        return False
    if query is None:
        return True
    bound_query = span.bound_query
    return bound_query is None or bound_query == query


def _check_orphans(
    session: SessionState,
    event: EvictionRequested,
    committed: list[str],
    dropped: list[str],
    emission: Emission,
) -> None:
    children = session.children
    if not children or not any(span_id in children for span_id in committed):
        return
    leaving = set(committed) | set(dropped)
    orphans: dict[str, list[str]] = {}
    for span_id in committed:
        staying = sorted(kid for kid in session.children_of(span_id) if kid not in leaving)
        if staying:
            orphans[span_id] = staying
    if orphans:
        emission.fault(
            FaultKind.ORPHANED_PARENT,
            list(orphans),
            {"request_id": event.request_id, "cited_by": orphans},
        )


def _emit_pins(
    session: SessionState, event: EvictionRequested, pins: dict[str, Pin], emission: Emission
) -> None:
    surfaces = emission.settings.emit_surfaces
    # Pins through the same Mention object (an anaphor's type, say) and surface share
    # one output model: outputs are never changed once built. Keyed by identity: every
    # Mention is alive in ``pins`` while this runs.
    models: dict[tuple[int, str | None], PinMention] = {}
    for span_id, pin in pins.items():
        used = pin.mention
        surface = _surface(session, pin) if surfaces else None
        mention = models.get((id(used), surface))
        if mention is None:
            mention = models[(id(used), surface)] = assemble(
                PinMention,
                {
                    "key": None if used.key is None else key_text(used.key),
                    "type": used.type,
                    "surface": surface,
                },
            )
        emission.pin(span_id, event.request_id, pin.pinned_for, mention, pin.path)


def _surface(session: SessionState, pin: Pin) -> str | None:
    """How the first span the pin is for wrote the mention that caused it: the
    repeated key as it stands in that span's text, or the anaphor's phrase."""
    used = pin.mention
    if used.surface is not None:
        return used.surface
    user = session.spans.get(pin.pinned_for[0])
    if user is None:
        return None
    if used.key is not None:
        for key, surface in user.surfaces:
            if key == used.key:
                return surface
    for mention in user.mentions:
        if mention.key == used.key and (used.key is not None or mention.type == used.type):
            return mention.surface
    return None


def _request_recompute(session: SessionState, dropped: set[str], emission: Emission) -> str:
    # A span the same decision drops is never named (contract 1.1, gate step 5):
    # neighbours are taken among the spans that stay live.
    spans = session.spans
    wanted: set[str] = set()
    for span_id in session.stale:
        wanted.add(span_id)
        wanted.update(session.neighbours(spans[span_id], dropped))
    ordered = session.in_order(wanted)
    reason = (
        f"FREEZE: {len(session.stale)} live span(s) rewritten since their last bound score; "
        "recompute them and their one-hop neighbours"
    )
    return emission.recompute(ordered, reason)


def _action(frozen: bool, committed: list[str], refused: list[tuple[str, RefusalReason]]) -> Action:
    if frozen:
        return _FREEZE
    if not refused:
        return _COMMIT
    return _PARTIAL if committed else _REJECT
