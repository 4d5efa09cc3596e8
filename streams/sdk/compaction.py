"""Gating a framework's compaction step (summarise, trim): the flow every adapter shares.

A compactor proposes a new context (``after``) for the current one
(``before``). :func:`gate_compaction`:

1. reports ``before`` (messages not tracked yet are added, with their tool calls
   and protection);
2. works out what the SDK keeps whatever happens: a protected message the
   compactor left out (a summary's default lineage never absorbs one), and both
   halves of a tool pair the compactor dropped only half of (a trimmer's cut
   between a call and its result);
3. checks the proposal with those kept, first from the tracker's own knowledge
   (:meth:`~spanguard.streams.sdk.tracker.SpanTracker.violations`) and then on a copy of the
   local engine's state, and vetoes it when it would raise a fault of ``veto_on``:
   an empty summary, a summary bigger than what it replaces, a protected message
   rewritten (modified, or absorbed by a summary that declares it), a tool pair
   split (a summary that absorbs one half while the other stays). The original
   messages stay and the outcome says why;
4. splits what the compactor removed: a message a new message (a summary)
   names in its ``derived_from`` is **merged** by the rewrite; only a message that
   disappears with no successor is **evicted**, through the gate
   (``eviction.requested``, ``basis: recency``: a budget compactor, no relevance
   scores needed; with no decision in time the original messages stay, the safe
   default). Without a local engine (``mirror=False``) everything removed goes
   through the gate, as before 1.2's compaction records;
5. puts back every message the gate refused (pinned: a retained message refers
   to it; protected; half of a pair), with its whole tool-pair group, and removes
   the poisoned spans the decision dropped; applies the gate's rules to the
   merged messages itself (they never reach the gate): a merged message that a
   retained message still refers to (the gate's pinned set, computed on the local
   engine's state without changing it), that is protected, or whose tool pair
   stays, is put back verbatim;
6. reports the resulting context as a ``context.rewritten`` (with the
   compactor's ``strategy`` and ``trigger``) and returns it with every fault the
   rewrite caused and the engine's ``context.compacted`` record, whose
   ``tokens_before`` counts the merged messages and whose ``merged`` names them
   (what the gate evicted in step 4 left before it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

from spanguard.schemas import ContextCompacted, FaultKind, IntegrityFault
from spanguard.streams.sdk.bridge import AnySession, unwrap
from spanguard.streams.sdk.client import Session
from spanguard.streams.sdk.decision import Decision, Pin
from spanguard.streams.sdk.messages import Message, Protect, TokenCounter, check_policy
from spanguard.streams.sdk.tracker import SpanTracker, Violation

DEFAULT_VETO: frozenset[FaultKind] = frozenset(
    {
        FaultKind.EMPTY_SUMMARY,
        FaultKind.SUMMARY_BALLOONING,
        FaultKind.PROTECTED_SPAN_REWRITTEN,
        FaultKind.TOOL_PAIR_SPLIT,
    }
)
"""Fault kinds that make an adapter keep the original messages instead of compacting."""


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What to do with a proposed compaction.

    ``messages`` is the context to use (the original one when ``applied`` is
    False). ``kept`` are the removed messages that were put back (the gate
    refused them, or the SDK keeps them: protected, half of a tool pair);
    ``faults`` those of the check (when vetoed) or of the rewrite.
    ``vetoed_by`` are the fault kinds that vetoed it and ``violations`` what the
    tracker found itself (which protected message, which tool call): the
    reasons, also summed up in ``note``. ``compaction`` is the local engine's
    ``context.compacted`` record of the applied rewrite (None when vetoed).
    ``decision`` is the gate's, for the removed messages no summary replaces (None
    when there were none). ``refused`` says why each removed message that was put
    back stayed (``PINNED``, ``PROTECTED``, ``TOOL_PAIR``..., from the gate or from
    the SDK's own check of the merged ones), ``held_by`` which member of its group
    held a ``TOOL_PAIR`` back, ``pins`` which retained message needs each pinned one.
    """

    messages: list[Message]
    applied: bool
    decision: Decision | None = None
    faults: tuple[IntegrityFault, ...] = ()
    vetoed_by: tuple[FaultKind, ...] = ()
    kept: tuple[str, ...] = ()
    note: str = ""
    removed: tuple[str, ...] = field(default=())
    violations: tuple[Violation, ...] = ()
    compaction: ContextCompacted | None = None
    refused: Mapping[str, str] = field(default_factory=dict)
    held_by: Mapping[str, str] = field(default_factory=dict)
    pins: tuple[Pin, ...] = ()

    @property
    def pinned(self) -> tuple[str, ...]:
        """The removed messages kept because a retained message refers to them."""
        return tuple(s for s, reason in self.refused.items() if reason == "PINNED")

    @property
    def fault_kinds(self) -> list[FaultKind]:
        """The kinds of :attr:`faults`, in order."""
        return [f.kind for f in self.faults]


class SpanguardFaultError(RuntimeError):
    """A fault of a kind an adapter was told to raise on.

    ``outcome`` has the details; ``items`` the framework's messages in force
    (the compacted ones when the compaction was applied, else the originals).
    """

    def __init__(self, outcome: CompactionOutcome, items: list[Any] | None = None) -> None:
        kinds = ", ".join(dict.fromkeys([*outcome.vetoed_by, *outcome.fault_kinds]))
        super().__init__(f"spanguard: {kinds} ({outcome.note or 'compaction'})")
        self.outcome = outcome
        self.items = items


def default_lineage(
    before: Sequence[Message], after: Sequence[Message], keep: Collection[str] = ()
) -> list[Message]:
    """``after`` where every new message without declared lineage derives from every
    message the compactor removed (what a summary of the removed turns is), except
    the ids of ``keep`` (protected messages: the SDK puts them back verbatim, so no
    summary replaces them)."""
    kept_ids = {m.id for m in after}
    known = {m.id for m in before}
    removed = tuple(m.id for m in before if m.id not in kept_ids and m.id not in keep)
    return [
        replace(m, derived_from=removed)
        if m.id not in known and not m.derived_from and removed
        else m
        for m in after
    ]


Groups = Mapping[str, Sequence[str]]


def _with_groups(
    groups: Groups,
    ids: set[str],
    removed: Collection[str],
    partners: Mapping[str, Sequence[str]] | None,
) -> set[str]:
    """``ids`` and, transitively, every removed member of their tool-pair groups."""
    result = set(ids)
    todo = list(ids)
    while todo:
        span_id = todo.pop()
        for other in (*groups.get(span_id, ()), *(partners or {}).get(span_id, ())):
            if other in removed and other not in result:
                result.add(other)
                todo.append(other)
    return result


def must_keep(
    tracker: SpanTracker,
    proposed: Sequence[Message],
    removed: Collection[str],
    partners: Mapping[str, Sequence[str]] | None = None,
) -> set[str]:
    """The removed messages the SDK keeps whatever the gate decides: protected
    messages no proposed message names as its lineage, and the removed halves of
    every tool-pair group a member of which stays (the pair leaves whole or not at
    all), closed over the groups."""
    successors = {p for m in proposed if m.id not in tracker.live for p in m.derived_from}
    staying = {m.id for m in proposed}
    live = tracker.live
    keep = {s for s in removed if s in live and live[s].protected and s not in successors}
    groups = tracker.tool_groups()
    for span_id in removed:
        if span_id in successors:
            continue  # absorbed by a summary: a split by merge is vetoed, not repaired
        links = (*groups.get(span_id, ()), *(partners or {}).get(span_id, ()))
        if any(other in staying for other in links):
            keep.add(span_id)
    return _with_groups(groups, keep, [s for s in removed if s not in successors], partners)


def _veto_note(kinds: Sequence[FaultKind], violations: Sequence[Violation]) -> str:
    reasons = "; ".join(v.detail for v in violations)
    why = f"{', '.join(kinds)}: {reasons}" if reasons else ", ".join(kinds)
    return f"compaction vetoed ({why}): the original messages stay"


async def gate_compaction(
    session: Session,
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    veto_on: Collection[FaultKind] = DEFAULT_VETO,
    carry_scores: bool = False,
    partners: Mapping[str, Sequence[str]] | None = None,
    timeout: float | None = None,
    strategy: str | None = None,
    trigger: str | None = None,
) -> CompactionOutcome:
    """Gate the compaction ``before`` -> ``after`` (see the module docstring).

    ``carry_scores``: the harness keeps its old relevance scores across the
    rewrite (they are not invalidated; the service reports
    ``REWRITE_WITHOUT_INVALIDATION`` for every modified scored span).
    ``partners``: span id -> span ids that must stay with it, besides the tool
    pairs the messages' own ``tool_call_ids`` / ``tool_call_id`` make.
    ``strategy`` / ``trigger``: the compactor's name and why it ran, sent with the
    rewrite (echoed in ``context.compacted``).
    """
    await session.observe(before)
    tracker = session.tracker
    base_seq = tracker.last_seq
    protected = set(tracker.protected_ids())
    proposed = default_lineage(before, after, keep=protected)
    invalidate = not carry_scores
    after_ids = {m.id for m in proposed}
    removed = tuple(m.id for m in before if m.id not in after_ids)

    # What the SDK keeps anyway, so that the check judges what would really be sent.
    groups = tracker.tool_groups()  # before the decision evicts anything
    keep = must_keep(tracker, proposed, removed, partners)
    checked_context = _insert_kept(before, proposed, [m for m in before if m.id in keep])
    violations = tuple(v for v in tracker.violations(checked_context) if v.kind in veto_on)
    checked: list[IntegrityFault] = []
    if veto_on and session.client.engine is not None:
        checked = session.check_rewrite(checked_context, invalidate_scores=invalidate)
    found = [*(v.kind for v in violations), *(f.kind for f in checked if f.kind in veto_on)]
    vetoes = tuple(dict.fromkeys(found))
    if vetoes:
        return CompactionOutcome(
            list(before),
            applied=False,
            faults=tuple(f for f in checked if f.kind in vetoes),
            vetoed_by=vetoes,
            note=_veto_note(vetoes, violations),
            removed=removed,
            violations=violations,
        )

    # What a summary replaces is merged by the rewrite itself (the worker sees it go
    # with its successor); only what disappears with no successor goes to the gate.
    # Without a local engine there is nothing to check a merge on: all of it goes to
    # the gate first (the compaction record then counts from after that eviction).
    local = session.client.engine is not None
    successors = _successors(tracker, proposed)
    summarised = [s for s in removed if local and s in successors and s not in keep]
    gated = tuple(s for s in removed if s not in summarised)

    decision: Decision | None = None
    evict: set[str] = set()
    refused: dict[str, str] = {}
    held_by: dict[str, str] = {}
    pins: list[Pin] = []
    if gated:
        decision = await session.request_eviction(gated, basis="recency", timeout=timeout)
        if decision.timed_out:
            return CompactionOutcome(
                list(before), applied=False, decision=decision, note=decision.note, removed=removed
            )
        evict = set(decision.evict)
        refused.update({s: decision.refused.get(s, "") for s in gated if s not in evict})
        held_by.update(decision.held_by)
        pins.extend(Pin.from_event(p) for p in decision.pins)
    merging = [s for s in summarised if s not in evict]  # a poisoned span the gate dropped
    check = _check_merge(session, merging, groups, partners, gone=evict)
    refused.update(check.refused)
    held_by.update(check.held_by)
    pins.extend(check.pins)

    live = tracker.live
    for span_id in sorted(keep - refused.keys(), key=removed.index):
        span = live.get(span_id)
        refused[span_id] = "PROTECTED" if span is not None and span.protected else "TOOL_PAIR"
    kept_ids = _with_groups(groups, set(refused) | keep, removed, partners)
    put_back = [m for m in before if m.id in kept_ids]
    final = _insert_kept(before, proposed, put_back)
    final = [m for m in final if m.id not in evict or m.id in kept_ids]
    report = await session.rewrite(
        final, invalidate_scores=invalidate, base_seq=base_seq, strategy=strategy, trigger=trigger
    )
    return CompactionOutcome(
        final,
        applied=True,
        decision=decision,
        faults=report.faults,
        kept=tuple(m.id for m in put_back),
        note=report.note,
        removed=removed,
        compaction=report.compaction,
        refused=refused,
        held_by=held_by,
        pins=tuple(pins),
    )


def _successors(tracker: SpanTracker, proposed: Sequence[Message]) -> set[str]:
    """The span ids a new message of ``proposed`` (a summary) names in its lineage."""
    return {p for m in proposed if m.id not in tracker.live for p in m.derived_from}


@dataclass(frozen=True, slots=True)
class MergeCheck:
    """What :func:`_check_merge` keeps of the messages a summary would absorb, and why."""

    refused: dict[str, str]
    held_by: dict[str, str]
    pins: list[Pin]


def _check_merge(
    session: Session,
    merging: Sequence[str],
    groups: Groups,
    partners: Mapping[str, Sequence[str]] | None,
    gone: Collection[str],
) -> MergeCheck:
    """The gate's rules for the messages a summary absorbs, decided locally (they are
    merged by the rewrite, never sent to the gate): a protected one stays
    (``PROTECTED``), one a retained message still refers to stays (``PINNED``: the
    gate's pinned set on the local engine's state, :meth:`Session.pins_for`), and
    one whose tool-pair group (or ``partners``) keeps a member stays with it
    (``TOOL_PAIR``, ``held_by`` the first member that stays). A message kept is
    retained, so what it refers to, and its group, stay too: the rules run until
    nothing changes. ``gone``: spans that leave anyway (the gate evicted them)."""
    live = session.tracker.live
    refused = {s: "PROTECTED" for s in merging if s in live and live[s].protected}
    held_by: dict[str, str] = {}
    pins: list[Pin] = []
    changed = bool(merging)
    while changed:
        changed = False
        for pin in session.pins_for([s for s in merging if s not in refused]) or ():
            if pin.span_id not in refused:
                refused[pin.span_id] = "PINNED"
                pins.append(pin)
                changed = True
        leaving = {s for s in merging if s not in refused} | set(gone)
        for span_id in merging:
            if span_id in refused:
                continue
            links = (*groups.get(span_id, ()), *(partners or {}).get(span_id, ()))
            staying = [other for other in links if other != span_id and other not in leaving]
            if staying:
                refused[span_id] = "TOOL_PAIR"
                held_by[span_id] = staying[0]
                changed = True
    return MergeCheck(refused, held_by, pins)


class GuardOptions(TypedDict, total=False):
    """The keyword options every adapter takes (see :class:`CompactionGuard`)."""

    veto_on: Collection[FaultKind]
    """Fault kinds whose check vetoes a compaction (default :data:`DEFAULT_VETO`)."""
    carry_scores: bool
    """The harness keeps its scores across rewrites (see :func:`gate_compaction`)."""
    raise_on: Collection[FaultKind]
    """Fault kinds that raise :class:`SpanguardFaultError` (default: none)."""
    token_counter: TokenCounter | None
    """Counts a message's tokens (default: the session's counter)."""
    timeout: float | None
    """Seconds to wait for the gate's decision (default: the client's)."""
    protect: Protect
    """The session's protection policy (see :data:`~spanguard.streams.sdk.messages.Protect`;
    default: the client's or the session's, ``("system", "first_user")``). It is the
    session's: it applies to the messages reported from then on."""
    strategy: str | None
    """The compactor's name sent with each rewrite (default: the adapter's guess)."""
    trigger: str | None
    """Why the compactor ran (``threshold``, ``overflow``, ``manual``...; default none)."""
    advance_turn: bool
    """The adapter advances the session's ``turn`` once per model call / agent step
    (default True; see :meth:`~spanguard.streams.sdk.client.Session.advance_turn`). False for a
    harness that calls ``session.set_turn`` itself."""


class CompactionGuard:
    """A session and how its compactions are gated: the base of every adapter.

    ``outcomes`` keeps every gated compaction, in order (for inspection).

    Raises:
        TypeError: For an option :class:`GuardOptions` does not name.
    """

    def __init__(self, session: AnySession, **options: Unpack[GuardOptions]) -> None:
        unknown = options.keys() - GuardOptions.__optional_keys__
        if unknown:  # as a misspelt keyword argument would
            raise TypeError(f"unexpected options: {', '.join(sorted(unknown))}")
        self.session: Session = unwrap(session)
        self.veto_on = frozenset(options.get("veto_on", DEFAULT_VETO))
        self.carry_scores = options.get("carry_scores", False)
        self.raise_on = frozenset(options.get("raise_on", ()))
        self.token_counter = options.get("token_counter")
        self.timeout = options.get("timeout")
        if "protect" in options:
            self.session.tracker.protect = check_policy(options["protect"])
        self.strategy = options.get("strategy")
        self.trigger = options.get("trigger")
        self.advance_turn = options.get("advance_turn", True)
        self.outcomes: list[CompactionOutcome] = []

    def next_turn(self) -> None:
        """One model call / agent step happened: advance the session's ``turn`` (unless
        ``advance_turn`` is False), so that the engine's ``thrash_within_turns`` counts
        the agent's turns. Adapters call it from the framework's per-call hook."""
        if self.advance_turn:
            self.session.advance_turn()

    async def gate(
        self,
        before: Sequence[Message],
        after: Sequence[Message],
        partners: Mapping[str, Sequence[str]] | None = None,
        *,
        strategy: str | None = None,
    ) -> CompactionOutcome:
        """:func:`gate_compaction` with this guard's options; the outcome is recorded.

        ``strategy``: the adapter's name for the compactor, used when the guard was
        not given one."""
        outcome = await gate_compaction(
            self.session,
            before,
            after,
            veto_on=self.veto_on,
            carry_scores=self.carry_scores,
            partners=partners,
            timeout=self.timeout,
            strategy=self.strategy or strategy,
            trigger=self.trigger,
        )
        self.outcomes.append(outcome)
        return outcome

    def check_raise(self, outcome: CompactionOutcome, items: list[Any] | None = None) -> None:
        """Raise :class:`SpanguardFaultError` (with ``items``, the messages in force) when
        ``outcome`` has a fault of ``raise_on`` (or was vetoed by one)."""
        if any(kind in self.raise_on for kind in (*outcome.vetoed_by, *outcome.fault_kinds)):
            raise SpanguardFaultError(outcome, items)


def _insert_kept(
    before: Sequence[Message], after: Sequence[Message], put_back: Sequence[Message]
) -> list[Message]:
    """``after`` with each of ``put_back`` placed back where it stood: just before the
    first message of ``after`` that came after it in ``before``, a new message (a
    summary) standing where its earliest source stood (so the system prompt and the
    task stay ahead of a summary of what followed them); else at the end."""
    index = {m.id: i for i, m in enumerate(before)}

    def place(message: Message) -> int | None:
        if message.id in index:
            return index[message.id]
        sources = [index[p] for p in message.derived_from if p in index]
        return min(sources) if sources else None

    result = list(after)
    for message in sorted(put_back, key=lambda m: index[m.id]):
        mine = index[message.id]
        at = next(
            (j for j, m in enumerate(result) if (p := place(m)) is not None and p > mine),
            len(result),
        )
        result.insert(at, message)
    return result
