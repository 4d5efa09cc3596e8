"""scores.computed: hash binding, provenance gaps, stale scores."""

from spanguard.schemas import FaultKind, text_sha256
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript


def test_matching_hash_binds_and_resets_counter() -> None:
    s = SessionScript()
    s.add("a", "alpha text")
    s.add("sum", "summary of alpha", derived_from=["a"])
    s.score(("a", 0.4), ("sum", 0.7))
    d = EngineDriver()
    d.pipe(s)
    state = d.engine.session("acme", "s1")
    assert state is not None
    assert state.spans["sum"].stale_rewrites == 0
    assert state.spans["a"].bound is not None and state.spans["a"].bound.score == 0.4
    assert state.mean_bound() == (0.4 + 0.7) / 2
    assert d.faults() == []


def test_missing_hash_is_a_provenance_gap_and_binds_nothing() -> None:
    s = SessionScript()
    s.add("a", "alpha")
    s.score(("a", 0.4), no_hash=["a"])
    d = EngineDriver()
    d.pipe(s)
    [fault] = d.faults()
    assert fault.kind == FaultKind.SCORE_PROVENANCE_GAP
    assert fault.severity == "warning"
    assert fault.span_ids == ["a"]
    state = d.engine.session("acme", "s1")
    assert state is not None and state.spans["a"].bound is None


def test_score_against_other_text_is_stale_with_both_hashes() -> None:
    s = SessionScript()
    s.add("a", "alpha")
    s.score(("a", 0.4), against={"a": "older alpha"})
    d = EngineDriver()
    d.pipe(s)
    [fault] = d.faults()
    assert fault.kind == FaultKind.STALE_SCORE
    [item] = fault.evidence["scores"]
    assert item["expected_sha256"] == text_sha256("alpha")
    assert item["actual_sha256"] == text_sha256("older alpha")


def test_latest_matching_score_wins_and_unknown_span_binds_nothing() -> None:
    s = SessionScript()
    s.add("a", "alpha")
    s.score(("a", 0.4), ("ghost", 0.9))
    s.score(("a", 0.6))
    d = EngineDriver()
    d.pipe(s)
    state = d.engine.session("acme", "s1")
    assert state is not None
    bound = state.spans["a"].bound
    assert bound is not None and bound.score == 0.6 and bound.score_id == s.score_id(2, 0, "a")
    assert state.bound_count == 1
    assert d.faults() == []


def test_severity_is_configurable() -> None:
    s = SessionScript()
    s.add("a", "alpha")
    s.score(("a", 0.4), no_hash=["a"])
    d = EngineDriver(severities={FaultKind.SCORE_PROVENANCE_GAP: "critical"})
    d.pipe(s)
    assert d.faults()[0].severity == "critical"
