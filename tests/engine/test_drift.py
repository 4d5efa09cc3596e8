"""MONOTONIC_DRIFT, measured per rewrite."""

import pytest

from spanguard.schemas import FaultKind
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript


def compaction_cycle(s: SessionScript, n: int, mean: float, base_texts: list[str]) -> None:
    """Rewrite the session to ``n`` shorter spans, then score them all at ``mean``."""
    ids = [f"r{s.seq}-{i}" for i in range(n)]
    s.rewrite(
        [
            {"span_id": sid, "text": " ".join(base_texts[: n - i]), "derived_from": []}
            for i, sid in enumerate(ids)
        ]
    )
    s.score(*[(sid, mean) for sid in ids])


WORDS = [f"w{i}" for i in range(40)]


def scored_session() -> SessionScript:
    """Eight long spans, all bound at a mean relevance of 0.4."""
    s = SessionScript()
    for i in range(8):
        s.add(f"a{i}", " ".join(WORDS))
    s.score(*[(f"a{i}", 0.4) for i in range(8)])
    return s


def test_two_consecutive_drifting_rewrites_raise_monotonic_drift() -> None:
    words = WORDS
    s = scored_session()
    compaction_cycle(s, 6, 0.5, words)
    compaction_cycle(s, 4, 0.6, words)
    compaction_cycle(s, 3, 0.7, words)
    d = EngineDriver()
    d.pipe(s)
    drift = d.faults(FaultKind.MONOTONIC_DRIFT)
    assert [f.evidence["consecutive"] for f in drift] == [2, 3]
    series = drift[0].evidence["series"]
    assert series[0]["mean_before"] == pytest.approx(0.4)
    assert series[0]["mean_after"] == pytest.approx(0.5)
    assert drift[0].severity == "critical"


def test_flat_relevance_is_healthy_and_counted() -> None:
    words = WORDS
    s = scored_session()
    compaction_cycle(s, 6, 0.41, words)
    compaction_cycle(s, 4, 0.40, words)
    d = EngineDriver()
    d.pipe(s)
    assert d.faults(FaultKind.MONOTONIC_DRIFT) == []
    assert d.engine.stats.cycles_closed == 2
    assert d.engine.stats.cycles_healthy == 0  # the rewrites lost spans without successors


def test_declared_merge_with_flat_relevance_is_healthy() -> None:
    s = SessionScript()
    for i in range(4):
        s.add(f"a{i}", f"long original turn number {i} with many words in it")
    s.score(*[(f"a{i}", 0.5) for i in range(4)])
    s.rewrite(
        [
            {"span_id": "a0"},
            {"span_id": "a1"},
            {"span_id": "m", "text": "short merge", "derived_from": ["a2", "a3"]},
        ],
        scores_invalidated=[s.score_id(1, 2, "a2"), s.score_id(1, 3, "a3")],
    )
    s.score(("m", 0.51))
    d = EngineDriver()
    d.pipe(s)
    assert d.faults() == []
    assert (d.engine.stats.cycles_closed, d.engine.stats.cycles_healthy) == (1, 1)


def test_eviction_between_rewrites_is_outside_the_window() -> None:
    s = SessionScript()
    for i in range(6):
        s.add(f"a{i}", f"text {i} " * 5)
    s.score(*[(f"a{i}", 0.1 * (i + 1)) for i in range(6)])
    s.rewrite([{"span_id": f"a{i}"} for i in range(6)])
    s.evict(threshold=0.35)
    d = EngineDriver()
    d.pipe(s)
    assert d.faults(FaultKind.MONOTONIC_DRIFT) == []


def test_a_long_streak_counts_whole_keeps_its_last_points_and_restores_identically() -> None:
    # Issue 22: the count is the whole streak's, the series its last points, and a restore
    # in the middle of the streak gives the same faults as replay (same ids, same counts).
    from tests.engine.test_persist import run_split, run_whole

    s = SessionScript()
    for i in range(60):
        s.add(f"a{i}", " ".join(WORDS))
    s.score(*[(f"a{i}", 0.01) for i in range(60)])
    for round_ in range(25):
        compaction_cycle(s, 58 - 2 * round_, 0.01 * 1.2 ** (round_ + 1), WORDS)
    d = EngineDriver(drift_series_points=5)
    d.pipe(s)
    drift = d.faults(FaultKind.MONOTONIC_DRIFT)
    assert [f.evidence["consecutive"] for f in drift] == list(range(2, 26))
    assert [len(f.evidence["series"]) for f in drift][-3:] == [5, 5, 5]
    lines = s.lines()
    expected = run_whole(lines)
    for cut in range(len(lines) - 8, len(lines) + 1):
        assert run_split(lines, cut) == expected, f"cut at {cut}"
