"""Building fleet traces and running them through the engine for the fleet tests."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from schemas import FleetAlert, OutputEvent
from streams.engine.engine import Engine, Source
from streams.fleet.combiner import FleetCombiner, Partial, partition_cycles
from streams.fleet.evaluator import FleetEvaluator
from streams.fleet.metrics import FleetMetrics, engine_figures
from streams.fleet.recent import RecentRecords

SCRIPT_START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()
"""Where :class:`~streams.engine.trace.SessionScript` starts its clock."""


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
    """A trace processed by an engine with the fleet's combiner attached (one
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
    """Process ``lines`` in order, calling the combiner as the runtime does."""
    engine = Engine()
    metrics = FleetMetrics(max_tenants, engine_figures(lambda: [engine]))
    recent = RecentRecords(64, 1000)
    combiner = FleetCombiner(
        window_seconds, metrics, recent, partition_cycles(lambda _partition: engine)
    )
    result = Run(engine, metrics, recent)
    for offset, line in enumerate(lines):
        outputs = engine.process_raw(line, Source("events", 0, offset))
        combiner.observe(0, line, outputs)
        combiner.batch(1, 0.002)
        for _, value in combiner.partials(0):
            partial = Partial.from_bytes(value)
            assert partial is not None
            result.partials.append(partial)
        result.outputs.extend(outputs)
    return result
