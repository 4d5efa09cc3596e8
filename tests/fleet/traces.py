"""Building fleet traces and running them through the engine for the fleet tests."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from schemas import OutputEvent
from streams.codec import encode_output
from streams.engine.engine import Engine, Source
from streams.fleet.activity import ActivityTracker
from streams.fleet.metrics import FleetMetrics
from streams.fleet.observations import Observation, observation_from_output
from streams.fleet.observer import RecordObserver, engine_cycles, engine_figures
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
    """A trace processed by an engine with the fleet's observer attached."""

    engine: Engine
    metrics: FleetMetrics
    activity: ActivityTracker
    recent: RecentRecords
    outputs: list[OutputEvent] = field(default_factory=list)

    def observations(self) -> list[Observation]:
        """What ``fleet-collect`` and the activity flush would put on ``<prefix>.fleet``:
        one observation per counted output (in order), then the activity batches."""
        found = [observation_from_output(encode_output(o)) for o in self.outputs]
        return [o for o in found if o is not None] + self.activity.flush()


def run(lines: Iterable[bytes], window_seconds: float = 60.0, max_tenants: int = 50) -> Run:
    """Process ``lines`` in order, calling the observer as the processor does."""
    engine = Engine()
    figures = engine_figures(lambda: [engine])
    metrics = FleetMetrics(max_tenants, figures)
    activity = ActivityTracker(window_seconds)
    recent = RecentRecords(64, 1000)
    observer = RecordObserver(metrics, activity, recent, engine_cycles(lambda: [engine]))
    result = Run(engine, metrics, activity, recent)
    for offset, line in enumerate(lines):
        outputs = engine.process_raw(line, Source("events", 0, offset))
        observer.record(line, outputs)
        observer.batch(1, 0.002)
        result.outputs.extend(outputs)
    return result
