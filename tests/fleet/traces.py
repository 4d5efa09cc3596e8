"""Building fleet traces and running them through the engine for the fleet tests, and
partials made as a worker makes them from hand-made records."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from spanguard.schemas import (
    DEFAULT_SEVERITY,
    FaultKind,
    FleetAlert,
    IntegrityFault,
    OutputEvent,
    Severity,
)
from spanguard.schemas.codec import decode_output
from spanguard.streams.engine.engine import Engine
from spanguard.streams.fleet.combiner import (
    FleetCombiner,
    Partial,
    partition_cycles,
    partition_expiries,
)
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.metrics import FleetMetrics, engine_figures
from spanguard.streams.fleet.recent import RecentRecords
from spanguard.streams.runtime.memory import MemoryTransport
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.runtime.testing import RuntimeTestDriver

SCRIPT_START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()
"""Where :class:`~spanguard.streams.engine.trace.SessionScript` starts its clock."""


def shifted(lines: Iterable[bytes], start: float) -> list[bytes]:
    """The same trace with every ``ts`` moved so that the scripts' clock starts at ``start``."""
    out = []
    for line in lines:
        event = orjson.loads(line)
        moment = datetime.fromisoformat(event["ts"]).timestamp() - SCRIPT_START + start
        event["ts"] = datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")
        out.append(orjson.dumps(event))
    return out


@dataclass
class Run:
    """A trace processed by the runtime with the fleet's combiner attached (one
    partition, a checkpoint after every record)."""

    engine: Engine
    metrics: FleetMetrics
    recent: RecentRecords
    outputs: list[OutputEvent] = field(default_factory=list)
    partials: list[Partial] = field(default_factory=list)
    """What the runtime would write to ``<prefix>.fleet``, in order."""

    def feed(self, evaluator: FleetEvaluator, now: float = 0.0) -> list[FleetAlert]:
        """Merge every partial into ``evaluator`` as the aggregator does; the alerts."""
        return merge(evaluator, self.partials, now)


def merge(
    evaluator: FleetEvaluator, partials: Iterable[Partial], now: float = 0.0
) -> list[FleetAlert]:
    """Merge ``partials`` into ``evaluator`` in order, as the aggregator does; the alerts."""
    alerts: list[FleetAlert] = []
    for partial in partials:
        for start, counts in sorted(partial.windows.items()):
            alerts.extend(evaluator.merge(partial.tenant, start, counts, now).alerts)
    return alerts


@dataclass(frozen=True)
class Record:
    """A hand-made input record of one session, the outputs the engine gave it and the
    rewrite cycles it closed (``healthy`` of them healthy)."""

    tenant: str
    ts: float
    session: str = "s"
    outputs: tuple[OutputEvent, ...] = ()
    cycles: int = 0
    healthy: int = 0

    def value(self) -> bytes:
        """The input record's value (what the combiner parses: tenant, session, ts)."""
        return orjson.dumps(
            {
                "type": "span.added",
                "tenant": self.tenant,
                "session_id": self.session,
                "ts": iso(self.ts),
            }
        )


def iso(ts: float) -> str:
    """RFC 3339 UTC text of ``ts``."""
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def fault(
    tenant: str,
    ts: float,
    session: str = "s",
    kind: FaultKind = FaultKind.UNGATED_EVICTION,
    severity: Severity | None = None,
    n: int = 0,
) -> IntegrityFault:
    """One ``integrity.fault`` of ``kind`` (at its default severity unless given)."""
    return IntegrityFault(
        session_id=session,
        tenant=tenant,
        caused_by=f"{session}-e{n}",
        ts=datetime.fromtimestamp(ts, UTC),
        fault_id=f"flt-{tenant}-{ts}-{n}",
        kind=kind,
        severity=severity or DEFAULT_SEVERITY[kind],
        span_ids=["u1"],
        evidence={},
    )


def faulty(
    tenant: str,
    ts: float,
    session: str = "s",
    kind: FaultKind = FaultKind.UNGATED_EVICTION,
    n: int = 0,
) -> Record:
    """A record of ``session`` that raised one fault of ``kind`` (its default severity)."""
    return Record(tenant, ts, session, (fault(tenant, ts, session, kind, n=n),))


class Worker:
    """A worker's fleet combiner fed records by hand (one partition, a checkpoint after
    every record): the partials it writes to ``<prefix>.fleet``."""

    def __init__(self, window_seconds: float = 60.0, max_tenants: int = 50) -> None:
        self.metrics = FleetMetrics(max_tenants)
        self.recent = RecentRecords(64, 1000)
        self._cycles = (0, 0)
        """The partition's engine counters: rewrite cycles closed, healthy ones."""
        self.combiner = FleetCombiner(
            window_seconds, self.metrics, self.recent, lambda _partition: self._cycles
        )

    def observe(self, value: bytes, outputs: Sequence[OutputEvent] = ()) -> list[Partial]:
        """One input record and its outputs, then a checkpoint: the partials it wrote."""
        self.combiner.observe(0, value, outputs)
        partials = [Partial.from_bytes(raw) for _, raw in self.combiner.partials(0)]
        assert None not in partials
        return [p for p in partials if p is not None]

    def partials(self, records: Iterable[Record]) -> list[Partial]:
        """The partials of ``records``, in order."""
        made: list[Partial] = []
        for record in records:
            closed, healthy = self._cycles
            self._cycles = (closed + record.cycles, healthy + record.healthy)
            made.extend(self.observe(record.value(), record.outputs))
        return made


def feed(
    evaluator: FleetEvaluator, records: Iterable[Record], now: float = 0.0
) -> list[FleetAlert]:
    """``records`` through a fresh worker's combiner, its partials merged into
    ``evaluator`` as the aggregator does; the alerts."""
    return merge(evaluator, Worker(evaluator.settings.window_seconds).partials(records), now)


def run(lines: Iterable[bytes], window_seconds: float = 60.0, max_tenants: int = 50) -> Run:
    """Process ``lines`` with the real runtime (no broker; one partition, a checkpoint
    after every record) and the fleet's combiner wired as the worker wires it."""
    driver = _FleetDriver(window_seconds, max_tenants)
    driver.produce(lines)  # one partition: the records in the given order
    asyncio.run(driver.run())
    assert driver.engine is not None, "no record was processed"
    result = Run(driver.engine, driver.metrics, driver.recent)
    result.outputs = [decode_output(raw) for raw in driver.outputs()]
    for value in driver.broker.read_committed(driver.config.fleet_topic):
        partial = Partial.from_bytes(value)
        assert partial is not None
        result.partials.append(partial)
    return result


class _FleetDriver(RuntimeTestDriver):
    """The runtime test driver with the fleet's combiner, its metrics and its recent
    records; ``engine`` is the partition's engine once a record was processed."""

    def __init__(self, window_seconds: float, max_tenants: int) -> None:
        super().__init__(partitions=1, batch_size=1, commit_every=1)
        self.engine: Engine | None = None
        self.metrics = FleetMetrics(
            max_tenants, engine_figures(lambda: [] if self.engine is None else [self.engine])
        )
        self.recent = RecentRecords(64, 1000)
        self.combiner = FleetCombiner(window_seconds, self.metrics, self.recent)
        self.fleet = self.combiner

    def new_runtime(self) -> tuple[Runtime, MemoryTransport]:
        runtime, transport = super().new_runtime()
        self.combiner.cycles = partition_cycles(
            lambda p: runtime.parts[p].engine if p in runtime.parts else None
        )
        self.combiner.expiries = partition_expiries(
            lambda p: runtime.parts[p].engine if p in runtime.parts else None
        )

        def on_batch(records: int, seconds: float) -> None:
            # Reported once the batch's outputs are acknowledged (pipelined steps): the
            # partition may have been reset or given up by then.
            if 0 in runtime.parts:
                self.engine = runtime.parts[0].engine
            self.combiner.batch(records, seconds)

        runtime.on_batch = on_batch
        return runtime, transport
