"""Restoring from the compacted changelog at drain points changes no output byte,
on the simulated fleets (many interleaved sessions, every kind of event)."""

from __future__ import annotations

import pytest

from tests.golden.traces import golden_traces, read_outputs, replay_with_restores

TRACES = golden_traces()


@pytest.mark.parametrize(
    ("name", "cadence", "cuts"),
    [
        ("sim-summaries-40", 1, range(0, 2412, 97)),
        ("sim-summaries-40", 10, range(0, 2412, 290)),
        ("sim-200", 7, range(0, 12012, 1001)),
        ("scenarios-demo-fleet", 1, range(240)),
    ],
)
def test_restore_at_drain_points_keeps_golden_outputs(name: str, cadence: int, cuts: range) -> None:
    assert replay_with_restores(TRACES[name], cadence, cuts) == read_outputs(name)
