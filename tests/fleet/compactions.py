"""Compactions for the fleet tests: ``context.rewritten`` records with the outputs the
engine gives them under contract 1.2 (its faults, then one ``context.compacted``),
built as models so the fleet is tested before (and independently of) the engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import orjson

from spanguard.schemas import (
    DEFAULT_SEVERITY,
    ContextCompacted,
    FaultKind,
    IntegrityFault,
    OutputEvent,
    Severity,
)
from spanguard.streams.fleet.combiner import Partial
from spanguard.streams.fleet.metrics import FleetMetrics
from spanguard.streams.fleet.recent import RecentRecords
from tests.fleet.traces import Worker, iso

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()


def outcome_of(severities: Sequence[Severity]) -> Literal["clean", "warning", "critical"]:
    """The contract's outcome of a compaction whose faults have these severities."""
    if Severity.CRITICAL in severities:
        return "critical"
    if Severity.WARNING in severities:
        return "warning"
    return "clean"


@dataclass
class Compaction:
    """One rewrite of a session and what the engine produced for it."""

    tenant: str
    session_id: str
    seq: int
    ts: float
    kinds: list[FaultKind] = field(default_factory=list)
    tokens: tuple[int, int] = (1200, 500)
    keys: tuple[int, int] = (9, 9)
    spans: tuple[int, int] = (6, 3)
    strategy: str | None = "summarize"
    trigger: str | None = "threshold"
    modified: list[str] = field(default_factory=lambda: ["sys"])
    created: list[str] = field(default_factory=lambda: ["sum1"])
    merged: list[str] = field(default_factory=lambda: ["u1", "a1", "t1"])
    removed: list[str] = field(default_factory=list)

    @property
    def event_id(self) -> str:
        return f"{self.session_id}-e{self.seq}"

    @property
    def rewrite_id(self) -> str:
        return f"{self.session_id}-rw{self.seq}"

    def record(self) -> bytes:
        """The ``context.rewritten`` input (what the combiner parses)."""
        return orjson.dumps(
            {
                "type": "context.rewritten",
                "schema_version": 1,
                "event_id": self.event_id,
                "session_id": self.session_id,
                "tenant": self.tenant,
                "seq": self.seq,
                "turn": self.seq,
                "ts": iso(self.ts),
                "rewrite_id": self.rewrite_id,
                "context": [{"span_id": "sum1", "text_sha256": "0" * 64, "tokens": 10}],
                "strategy": self.strategy,
                "trigger": self.trigger,
                "agent_name": "planner",
            }
        )

    def faults(self) -> list[IntegrityFault]:
        """The rewrite's faults, in order, at their default severities."""
        return [
            IntegrityFault(
                session_id=self.session_id,
                tenant=self.tenant,
                caused_by=self.event_id,
                ts=datetime.fromtimestamp(self.ts, UTC),
                fault_id=f"{self.event_id}-f{n}",
                kind=kind,
                severity=DEFAULT_SEVERITY[kind],
                span_ids=["u1"] if kind is not FaultKind.COMPACTION_THRASHING else [],
                evidence={"rewrite_id": self.rewrite_id},
            )
            for n, kind in enumerate(self.kinds)
        ]

    def outputs(self) -> list[OutputEvent]:
        """The faults, then the ``context.compacted`` that lists them."""
        faults = self.faults()
        before, after = self.tokens
        compacted = ContextCompacted(
            session_id=self.session_id,
            tenant=self.tenant,
            caused_by=self.event_id,
            ts=datetime.fromtimestamp(self.ts, UTC),
            compaction_id=f"{self.event_id}-c",
            rewrite_id=self.rewrite_id,
            tokens_before=before,
            tokens_after=after,
            spans_before=self.spans[0],
            spans_after=self.spans[1],
            modified=self.modified,
            created=self.created,
            merged=self.merged,
            removed=self.removed,
            keys_before=self.keys[0],
            keys_after=self.keys[1],
            faults=[f.fault_id for f in faults],
            outcome=outcome_of([f.severity for f in faults]),
            strategy=self.strategy,
            trigger=self.trigger,
            tokens_by_role_before={"system": 100, "user": before // 2, "tool": before // 2 - 100},
            tokens_by_role_after={"system": 100, "assistant": after - 100},
        )
        return [*faults, compacted]


def clean(tenant: str, session: str, seq: int, ts: float) -> Compaction:
    """A healthy summary: shrinks the context, keeps its keys, no fault."""
    return Compaction(tenant, session, seq, ts)


def split_pair(tenant: str, session: str, seq: int, ts: float) -> Compaction:
    """A trimmer that dropped a tool call and left its result: critical."""
    return Compaction(
        tenant,
        session,
        seq,
        ts,
        kinds=[FaultKind.TOOL_PAIR_SPLIT, FaultKind.UNGATED_EVICTION],
        tokens=(3000, 2100),
        keys=(12, 10),
        strategy="sliding_window",
        trigger="overflow",
        modified=[],
        created=[],
        merged=[],
        removed=["a3"],
    )


def lost_keys(tenant: str, session: str, seq: int, ts: float) -> Compaction:
    """A summary that kept none of its parents' identifiers: a warning."""
    return Compaction(tenant, session, seq, ts, kinds=[FaultKind.SUMMARY_LOST_KEYS], keys=(14, 3))


def thrashing(tenant: str, session: str, seq: int, ts: float) -> Compaction:
    """The third thin rewrite in a row: COMPACTION_THRASHING (critical)."""
    return Compaction(
        tenant,
        session,
        seq,
        ts,
        kinds=[FaultKind.COMPACTION_THRASHING],
        tokens=(5000, 4900),
        keys=(20, 20),
        strategy="summarize",
        trigger="threshold",
    )


def fleet_trace() -> list[Compaction]:
    """Two tenants in one minute: ``acme`` compacts cleanly (one summary loses keys),
    ``broke`` keeps splitting tool pairs and one of its sessions thrashes."""
    made: list[Compaction] = []
    for n in range(4):
        made.append(clean("acme", f"a{n}", 10, T0 + n))
    made.append(lost_keys("acme", "a0", 11, T0 + 5))
    for n in range(3):
        made.append(split_pair("broke", f"b{n}", 10, T0 + 10 + n))
    made.append(clean("broke", "b3", 10, T0 + 20))
    for seq in (11, 12, 13):
        made.append(thrashing("broke", "b3", seq, T0 + 20 + seq))
    return made


def combine(trace: list[Compaction]) -> tuple[FleetMetrics, RecentRecords, list[Partial]]:
    """Feed the trace to the worker's combiner (one partition, a checkpoint per record)."""
    worker = Worker(max_tenants=10)
    partials = [p for c in trace for p in worker.observe(c.record(), c.outputs())]
    return worker.metrics, worker.recent, partials
