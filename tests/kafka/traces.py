"""The trace the Kafka tests feed the workers: every scenario of the suite (the
compaction failures of contract 1.2 and their healthy counterparts included),
interleaved (the pipeline helper is tests/pipeline.py)."""

from __future__ import annotations

from collections.abc import Iterator

from spanguard.streams.engine.trace import SessionScript, interleave
from spanguard.streams.sim.compactions import SCENARIOS
from spanguard.streams.sim.scenarios import broken, demo_fleet, healthy
from tests.engine.scripts import build


def scenario_traces() -> list[bytes]:
    """Every scenario of the suite in one interleaved fleet (distinct session ids)."""
    scripts: list[SessionScript] = [healthy(), broken()]
    scripts += [build_scenario() for build_scenario in SCENARIOS.values()]
    for i, actions in enumerate(_random_action_lists()):
        script = build(actions)
        for event in script.raw:
            event["session_id"] = f"prop-{i}"
            event["event_id"] = f"prop-{i}-{event['seq']}"
        scripts.append(script)
    lines = interleave(scripts) + demo_fleet(24)
    return lines


def _random_action_lists() -> Iterator[list[tuple]]:  # type: ignore[type-arg]
    from hypothesis import HealthCheck, given, settings

    from tests.engine.scripts import actions

    found: list[list[tuple]] = []  # type: ignore[type-arg]

    @settings(
        max_examples=12, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(actions())
    def collect(value: list[tuple]) -> None:  # type: ignore[type-arg]
        found.append(value)

    collect()
    return iter(found)


def expiring_traces(sessions: int = 16) -> list[bytes]:
    """Sessions spread over three days of event time, on every partition: most go quiet
    for more than a day and come back (expired), some stay busy (contract 1.2)."""
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    scripts = {i: SessionScript(session_id=f"idle-{i:02d}") for i in range(sessions)}
    lines: list[bytes] = []
    for hour in range(0, 72, 4):
        for i, script in scripts.items():
            quiet = i % 3 == 0 and 8 <= hour < 40  # a third of them: 32 h without events
            if quiet or (i % 2 and hour % 8):
                continue
            event = script.add(f"h{hour}", f"turn at hour {hour}")
            event["ts"] = (start + timedelta(hours=hour, minutes=i)).isoformat()
            lines.append(script.lines()[-1])
    return lines
