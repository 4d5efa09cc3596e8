"""Activity batches: distinct sessions and rewrite cycles per tenant and window."""

from __future__ import annotations

from streams.engine.trace import interleave
from streams.fleet.activity import ActivityTracker
from streams.sim.scenarios import broken, healthy
from tests.fleet.traces import run, shifted

T0 = 1_796_000_040.0


def test_activity_counts_sessions_once_per_window_and_cycles_per_tenant() -> None:
    lines = shifted(interleave([broken("b1", "t1"), healthy("h1", "t2"), healthy("h2", "t2")]), T0)
    result = run(lines)
    batches = {(o.tenant, o.ts // 60): o for o in result.activity.flush()}
    assert set(batches) == {("t1", T0 // 60), ("t2", T0 // 60)}
    t1, t2 = batches[("t1", T0 // 60)], batches[("t2", T0 // 60)]
    assert (t1.sessions, t2.sessions) == (1, 2)
    assert t1.events + t2.events == len(lines)
    assert t1.cycles + t2.cycles == result.engine.stats.cycles_closed
    assert t1.healthy + t2.healthy == result.engine.stats.cycles_healthy
    assert t2.cycles == 2  # one rewrite cycle per healthy session
    assert result.activity.flush() == [], "a flush empties the batch"


def test_a_session_is_new_again_in_the_next_window_only() -> None:
    tracker = ActivityTracker(60)
    tracker.record("t", "s", T0 + 1)
    tracker.record("t", "s", T0 + 2)
    [first] = tracker.flush()
    assert (first.sessions, first.events) == (1, 2)
    tracker.record("t", "s", T0 + 3)  # same window, after a flush: not new
    tracker.record("t", "s", T0 + 61)  # next window: new there
    by_window = {o.ts // 60: o for o in tracker.flush()}
    assert by_window[(T0 + 3) // 60].sessions == 0
    assert by_window[(T0 + 61) // 60].sessions == 1


def test_unhealthy_sessions_are_sampled() -> None:
    tracker = ActivityTracker(60, sample_size=2)
    for i in range(4):
        tracker.record("t", f"s{i}", T0, cycles=1, healthy=0)
    tracker.record("t", "ok", T0, cycles=1, healthy=1)
    [batch] = tracker.flush()
    assert batch.unhealthy_sessions == ["s0", "s1"]
    assert (batch.cycles, batch.healthy) == (5, 1)
