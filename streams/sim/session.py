"""One simulated session: the agent loop, its injections, its records and its truth.

:class:`SessionGenerator` plays the loop (turns, compactions every two or three
turns, eviction requests every two or three turns), places the injections it
was given (entries of :data:`spanguard.streams.sim.injections.REGISTRY`) one turn apart,
and commits every step only when the planner's reference model confirms it
(:mod:`spanguard.streams.sim.plan`). What it commits becomes the session's records and
its truth: the faults of the injections (at the event that causes them, naming
the spans the reference names), the dead letters, and for every eviction
request what the contract prescribes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.sim.plan import (
    AddOp,
    CloseOp,
    EvictOp,
    Planner,
    Record,
    RedeliverOp,
    RewriteOp,
    SimState,
    Step,
    TextRecord,
)
from spanguard.streams.sim.steps import Steps
from spanguard.streams.sim.texts import Conversation, Domain
from spanguard.streams.sim.truth import EvictionTruth, FaultTruth, SessionTruth

if TYPE_CHECKING:
    from spanguard.streams.sim.injections import Injection, Lookalike

REDELIVERY_RATE = 0.08
"""Chance per turn that a recent event is delivered again (harmless noise)."""
REDELIVERY_REACH = 30
"""How far back a re-delivered event may come from (well inside the duplicate window)."""


class SessionGenerator(Steps):
    """Generates one session: its records, its truth and its texts."""

    ATTEMPTS = 6
    """Draws of a step before it is given up (an injection is then skipped)."""

    def __init__(
        self,
        rng: random.Random,
        session_id: str,
        tenant: str,
        domain: Domain,
        target_events: int,
        injections: Sequence[Injection],
        start: datetime,
        start_ms: int,
        step_ms: int,
        lookalikes: Sequence[Lookalike] = (),
    ) -> None:
        writer = SessionScript(
            session_id, tenant, start, timedelta(milliseconds=step_ms), record=False
        )
        super().__init__(
            rng, domain, SimState(writer, Conversation(domain, rng), start_ms, step_ms)
        )
        self.session_id = session_id
        self.target = target_events
        self.pending = list(injections)
        self.lookalikes = list(lookalikes)
        """Healthy look-alikes still to place (contract 1.2; they must raise nothing)."""
        self.records: list[Record] = []
        self.texts: list[TextRecord] = []
        self.truth = SessionTruth(
            session_id=session_id,
            tenant=tenant,
            profile=domain.name,
            referent_dense=domain.referent_dense,
        )

    def run(self) -> None:
        """Play the session to its target length, then close it."""
        turn = 0
        next_injection = 2
        compact_every = self.rng.randint(2, 3)
        evict_every = self.rng.randint(2, 3)
        while self.state.writer.seq < self.target - 2:
            turn += 1
            if not self._attempt(partial(self.turn, turn=turn), None):
                break  # the model refuses even a plain turn: end the session cleanly
            if self.pending and turn >= next_injection:
                injection = self.pending[0]
                if self._attempt(injection.build(self), injection):
                    self.pending.pop(0)
                    self.truth.injections.append(injection.name)
                    next_injection = turn + 1
                    continue
            if self.lookalikes and turn >= next_injection:
                lookalike = self.lookalikes[0]
                if self._attempt(lookalike.build(self), None):
                    self.lookalikes.pop(0)
                    self.truth.lookalikes.append(lookalike.name)
                    next_injection = turn + 1
                    continue
            if turn % compact_every == 0:
                self._attempt(self.compaction, None)
            if turn % evict_every == 0 and len(self.state.session.spans) >= 6:
                self._attempt(self.eviction, None)
            if self.rng.random() < REDELIVERY_RATE:
                self._attempt(self.redeliver, None)
        self._attempt(lambda p: p.run(CloseOp()) >= 0, None)
        if self.straggler:
            self._attempt(self.straggle, None)
        self.truth.events = len(self.records)
        self.truth.skipped = [injection.name for injection in self.pending]

    def redeliver(self, p: Planner) -> bool:
        """At-least-once delivery: one of the session's recent events arrives again,
        after later ones, inside the duplicate window (it must cause nothing)."""
        recent = [
            r.data
            for r in self.records[-REDELIVERY_REACH:]
            if isinstance(r.data, dict) and r.deadletter is None
        ]
        if not recent:
            return False
        p.run(RedeliverOp(self.rng.choice(recent)))
        return True

    def _attempt(self, build: Callable[[Planner], bool], injection: Injection | None) -> bool:
        for _ in range(self.ATTEMPTS):
            planner = Planner(self.state)
            if build(planner) and planner.ok():
                self._commit(planner, injection)
                return True
        return False

    def _commit(self, planner: Planner, injection: Injection | None) -> None:
        for index, step in enumerate(planner.steps):
            record = step.record
            if record is not None:
                self.records.append(record)
                if record.deadletter is not None:
                    self.truth.deadletters.append(record.deadletter)
            kinds = sorted(k for i, k in planner.intended if i == index and ":" not in k)
            if injection is not None:
                assert set(kinds) <= {k.value for k in injection.faults}, (injection.name, kinds)
                for kind in kinds:
                    self.truth.faults.append(self._fault(step, kind, injection.name))
            if step.eviction is not None:
                self.truth.evictions.append(self._eviction_truth(step))
            self._texts(step)
        self.state = planner.state

    def _fault(self, step: Step, kind: str, injection: str) -> FaultTruth:
        event_id = step.event_id
        assert event_id is not None
        return FaultTruth(
            session_id=self.session_id,
            tenant=self.truth.tenant,
            kind=kind,
            at_event_id=event_id,
            injection=injection,
            span_ids=step.faults(kind),
        )

    def _eviction_truth(self, step: Step) -> EvictionTruth:
        plan, op, record = step.eviction, step.op, step.record
        assert plan is not None and isinstance(op, EvictOp) and record is not None
        assert isinstance(record.data, dict)
        return EvictionTruth(
            session_id=self.session_id,
            tenant=self.truth.tenant,
            request_id=str(record.data["request_id"]),
            event_id=str(record.data["event_id"]),
            mode=op.mode,
            basis=op.basis,
            requested=plan.requested,
            needed=tuple(s for s in plan.requested if s in plan.pinned),
            expected_action=plan.action,
            expected_committed=plan.committed,
            expected_dropped=plan.dropped,
        )

    def _texts(self, step: Step) -> None:
        """Keep every text the generator wrote, with what it says the text holds."""
        op = step.op
        if isinstance(op, AddOp):
            self.texts.append(
                TextRecord(
                    self.session_id,
                    op.span_id,
                    op.text.text,
                    op.text.holds,
                    op.text.anaphors,
                    op.known,
                )
            )
        elif isinstance(op, RewriteOp):
            for entry in op.entries:
                if entry.known is not None:
                    self.texts.append(
                        TextRecord(
                            self.session_id,
                            entry.span_id,
                            entry.text.text,
                            entry.text.holds,
                            entry.text.anaphors,
                            entry.known,
                        )
                    )
