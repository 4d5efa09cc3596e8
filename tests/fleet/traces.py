"""Building fleet traces and running them through the engine for the fleet tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from spanguard.schemas import FleetAlert, OutputEvent
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
        alerts: list[FleetAlert] = []
        for partial in self.partials:
            for start, counts in sorted(partial.windows.items()):
                alerts.extend(evaluator.merge(partial.tenant, start, counts, now).alerts)
        return alerts


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
