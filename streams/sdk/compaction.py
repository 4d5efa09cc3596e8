"""Gating a framework's compaction step (summarise, trim): the flow every adapter shares.

A compactor proposes a new context (``after``) for the current one
(``before``). :func:`gate_compaction`:

1. reports ``before`` (messages not tracked yet are added);
2. checks the proposed rewrite on a copy of the local engine's state and
   vetoes it when it would raise a fault of ``veto_on`` (an empty summary,
   a summary bigger than what it replaces): the original messages stay;
3. asks the gate to evict what the compactor removed (``basis: recency``:
   a budget compactor, no relevance scores needed); with no decision in time
   the original messages stay (the safe default);
4. puts back every message the gate refused (pinned: a retained message
   refers to it), with the tool-call partners it needs, and removes the
   poisoned spans the decision dropped;
5. reports the resulting context as a ``context.rewritten`` and returns it
   with every fault the rewrite caused.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

from schemas import FaultKind, IntegrityFault
from streams.sdk.bridge import AnySession, unwrap
from streams.sdk.client import Session
from streams.sdk.decision import Decision
from streams.sdk.messages import Message, TokenCounter

DEFAULT_VETO: frozenset[FaultKind] = frozenset(
    {FaultKind.EMPTY_SUMMARY, FaultKind.SUMMARY_BALLOONING}
)
"""Fault kinds that make an adapter keep the original messages instead of compacting."""


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What to do with a proposed compaction.

    ``messages`` is the context to use (the original one when ``applied`` is
    False). ``kept`` are the removed messages the gate refused to evict and that
    were put back; ``faults`` those of the check (when vetoed) or of the rewrite.
    """

    messages: list[Message]
    applied: bool
    decision: Decision | None = None
    faults: tuple[IntegrityFault, ...] = ()
    vetoed_by: tuple[FaultKind, ...] = ()
    kept: tuple[str, ...] = ()
    note: str = ""
    removed: tuple[str, ...] = field(default=())

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
        kinds = ", ".join(outcome.fault_kinds)
        super().__init__(f"spanguard: {kinds} ({outcome.note or 'compaction'})")
        self.outcome = outcome
        self.items = items


def default_lineage(before: Sequence[Message], after: Sequence[Message]) -> list[Message]:
    """``after`` where every new message without declared lineage derives from every
    message the compactor removed (what a summary of the removed turns is)."""
    kept_ids = {m.id for m in after}
    known = {m.id for m in before}
    removed = tuple(m.id for m in before if m.id not in kept_ids)
    return [
        replace(m, derived_from=removed)
        if m.id not in known and not m.derived_from and removed
        else m
        for m in after
    ]


async def gate_compaction(
    session: Session,
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    veto_on: Collection[FaultKind] = DEFAULT_VETO,
    carry_scores: bool = False,
    partners: Mapping[str, Sequence[str]] | None = None,
    timeout: float | None = None,
) -> CompactionOutcome:
    """Gate the compaction ``before`` -> ``after`` (see the module docstring).

    ``carry_scores``: the harness keeps its old relevance scores across the
    rewrite (they are not invalidated; the service reports
    ``REWRITE_WITHOUT_INVALIDATION`` for every modified scored span).
    ``partners``: span id -> span ids that must stay with it (a tool result and
    the call that asked for it).
    """
    await session.observe(before)
    base_seq = session.tracker.last_seq
    proposed = default_lineage(before, after)
    invalidate = not carry_scores
    after_ids = {m.id for m in proposed}
    removed = tuple(m.id for m in before if m.id not in after_ids)

    if veto_on and session.client.engine is not None:
        checked = session.check_rewrite(proposed, invalidate_scores=invalidate)
        vetoes = tuple(dict.fromkeys(f.kind for f in checked if f.kind in veto_on))
        if vetoes:
            return CompactionOutcome(
                list(before),
                applied=False,
                faults=tuple(f for f in checked if f.kind in vetoes),
                vetoed_by=vetoes,
                note=f"compaction vetoed ({', '.join(vetoes)}): the original messages stay",
                removed=removed,
            )

    decision: Decision | None = None
    evict: set[str] = set()
    if removed:
        decision = await session.request_eviction(removed, basis="recency", timeout=timeout)
        if decision.timed_out:
            return CompactionOutcome(
                list(before), applied=False, decision=decision, note=decision.note, removed=removed
            )
        evict = set(decision.evict)

    refused = [m for m in before if m.id in removed and m.id not in evict]
    kept_ids = {m.id for m in refused}
    for span_id in list(kept_ids):
        kept_ids.update(p for p in (partners or {}).get(span_id, ()) if p in removed)
    put_back = [m for m in before if m.id in kept_ids]
    final = _insert_kept(before, proposed, put_back)
    final = [m for m in final if m.id not in evict or m.id in kept_ids]
    report = await session.rewrite(final, invalidate_scores=invalidate, base_seq=base_seq)
    return CompactionOutcome(
        final,
        applied=True,
        decision=decision,
        faults=report.faults,
        kept=tuple(m.id for m in put_back),
        note=report.note,
        removed=removed,
    )


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
        self.outcomes: list[CompactionOutcome] = []

    async def gate(
        self,
        before: Sequence[Message],
        after: Sequence[Message],
        partners: Mapping[str, Sequence[str]] | None = None,
    ) -> CompactionOutcome:
        """:func:`gate_compaction` with this guard's options; the outcome is recorded."""
        outcome = await gate_compaction(
            self.session,
            before,
            after,
            veto_on=self.veto_on,
            carry_scores=self.carry_scores,
            partners=partners,
            timeout=self.timeout,
        )
        self.outcomes.append(outcome)
        return outcome

    def check_raise(self, outcome: CompactionOutcome, items: list[Any] | None = None) -> None:
        """Raise :class:`SpanguardFaultError` (with ``items``, the messages in force) when
        ``outcome`` has a fault of ``raise_on``."""
        if any(kind in self.raise_on for kind in outcome.fault_kinds):
            raise SpanguardFaultError(outcome, items)


def _insert_kept(
    before: Sequence[Message], after: Sequence[Message], put_back: Sequence[Message]
) -> list[Message]:
    """``after`` with each of ``put_back`` placed just before the first message ``after``
    kept from ``before`` that came after it there (else at the end): original order
    among old messages, new ones (a summary) where the compactor put them."""
    index = {m.id: i for i, m in enumerate(before)}
    result = list(after)
    for message in sorted(put_back, key=lambda m: index[m.id]):
        at = next(
            (j for j, m in enumerate(result) if m.id in index and index[m.id] > index[message.id]),
            len(result),
        )
        result.insert(at, message)
    return result
