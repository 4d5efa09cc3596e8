"""bench.engine's size-scaling measures run on a small session (their figures are
timings, not asserted; what they measure must still be there to measure)."""

from __future__ import annotations

from bench.engine.sessions import build_scored_session, measure_rewrite, measure_size


def test_a_scored_session_is_measured_per_cycle_and_per_rewrite() -> None:
    built = build_scored_session(40, seed=11, session_id="small")
    assert len(built.state.spans) == 40
    assert measure_size(built, cycles=2, runs=1)["spans"] == 40
    rewrite = measure_rewrite(built, runs=1)
    # The snapshot merges two spans into one and keeps the others: one entry fewer.
    assert rewrite["snapshot_spans"] == 39
