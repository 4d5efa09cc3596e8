"""context.rewritten: the hash diff and every fault it proves."""

from spanguard.schemas import FaultKind
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript


def scored_session() -> SessionScript:
    s = SessionScript()
    s.add("a", "the customer asked about a refund")
    s.add("b", "the agent looked up the order")
    s.add("c", "the order was shipped yesterday")
    s.score(("a", 0.5), ("b", 0.4), ("c", 0.6))
    return s


def state_of(d: EngineDriver):  # type: ignore[no-untyped-def]
    state = d.engine.session("acme", "s1")
    assert state is not None
    return state


def test_modified_without_invalidation_and_undeclared() -> None:
    s = scored_session()
    s.rewrite([{"span_id": "a", "text": "refund asked"}, {"span_id": "b"}, {"span_id": "c"}])
    d = EngineDriver()
    d.pipe(s)
    kinds = d.fault_kinds()
    assert kinds == [FaultKind.UNDECLARED_MODIFICATION, FaultKind.REWRITE_WITHOUT_INVALIDATION]
    rwi = d.faults(FaultKind.REWRITE_WITHOUT_INVALIDATION)[0]
    assert rwi.severity == "critical" and rwi.span_ids == ["a"]
    assert rwi.evidence["spans"][0]["score_id"] == s.score_id(1, 0, "a")
    span = state_of(d).spans["a"]
    assert span.stale_rewrites == 1 and span.bound is None


def test_declared_and_invalidated_rewrite_is_clean() -> None:
    s = scored_session()
    s.rewrite(
        [{"span_id": "a", "text": "refund asked"}, {"span_id": "b"}, {"span_id": "c"}],
        declared_modified=["a"],
        scores_invalidated=[s.score_id(1, 0, "a")],
    )
    d = EngineDriver()
    d.pipe(s)
    assert d.faults() == []


def test_merge_is_not_ungated_but_needs_invalidation() -> None:
    s = scored_session()
    s.rewrite(
        [
            {"span_id": "m", "text": "refund for a shipped order", "derived_from": ["a", "b"]},
            {"span_id": "c"},
        ]
    )
    d = EngineDriver()
    d.pipe(s)
    assert FaultKind.UNGATED_EVICTION not in d.fault_kinds()
    rwi = d.faults(FaultKind.REWRITE_WITHOUT_INVALIDATION)[0]
    assert rwi.span_ids == ["a", "b"]
    state = state_of(d)
    assert set(state.spans) == {"m", "c"}
    assert state.spans["m"].stale_rewrites == 1
    assert state.spans["m"].position == 0 and state.spans["c"].position == 1


def test_vanished_span_without_successor_is_ungated() -> None:
    s = scored_session()
    s.rewrite([{"span_id": "a"}, {"span_id": "c"}])
    d = EngineDriver()
    d.pipe(s)
    [fault] = d.faults()
    assert fault.kind == FaultKind.UNGATED_EVICTION and fault.span_ids == ["b"]
    assert "b" not in state_of(d).spans


def test_counter_reaches_two_then_three() -> None:
    s = SessionScript()
    s.add("a", "v0")
    for i in range(1, 4):
        for _ in range(3):  # turns apart: no compaction thrashing (1.2) in this test
            s.next_turn()
        s.rewrite([{"span_id": "a", "text": f"v{i}"}], declared_modified=["a"])
    d = EngineDriver()
    d.pipe(s)
    assert d.fault_kinds() == [FaultKind.REWRITE_OF_REWRITE, FaultKind.POISONED_SPAN]
    state = state_of(d)
    assert state.spans["a"].stale_rewrites == 3
    assert state.poisoned_pending == {"a"}
    assert state.stale == set()  # a poisoned span no longer holds the gate


def test_created_span_inherits_parent_counter_even_when_parent_is_gone() -> None:
    s = SessionScript()
    s.add("a", "v0")
    s.rewrite([{"span_id": "a", "text": "v1"}], declared_modified=["a"])
    s.rewrite([{"span_id": "s1", "text": "summary", "derived_from": ["a"]}])
    d = EngineDriver()
    d.pipe(s)
    assert state_of(d).spans["s1"].stale_rewrites == 2
    assert FaultKind.REWRITE_OF_REWRITE in d.fault_kinds()


def test_snapshot_scores_never_bind() -> None:
    s = scored_session()
    s.rewrite(
        [
            {
                "span_id": "m",
                "text": "merged",
                "derived_from": ["a", "b"],
                "score": {"score_id": "inh", "score": 0.9},
            },
            {"span_id": "c", "score": {"score_id": "x", "score": 0.2, "text_sha256": "0" * 64}},
        ],
        scores_invalidated=[s.score_id(1, 0, "a"), s.score_id(1, 1, "b")],
    )
    d = EngineDriver()
    d.pipe(s)
    kinds = d.fault_kinds()
    assert FaultKind.SCORE_PROVENANCE_GAP in kinds and FaultKind.STALE_SCORE in kinds
    state = state_of(d)
    assert state.spans["m"].bound is None
    assert state.spans["c"].bound is not None and state.spans["c"].bound.score == 0.6


def test_base_seq_keeps_later_spans_and_later_evictions() -> None:
    s = scored_session()
    base = s.seq - 1
    s.add("late", "a late tool result")
    s.evict(["c"])
    s.rewrite([{"span_id": "a"}, {"span_id": "b"}, {"span_id": "c"}], base_seq=base)
    d = EngineDriver()
    d.pipe(s)
    state = state_of(d)
    assert set(state.spans) == {"a", "b", "late"}
    assert state.spans["late"].position == 3
    assert FaultKind.UNGATED_EVICTION not in d.fault_kinds()


def test_referent_dropped_by_rewrite() -> None:
    s = SessionScript()
    s.add("t12", "intro", introduces=[{"key": "8841-C", "type": "account"}])
    s.add("t13", "filler")
    s.add("t19", "did it clear", mentions=[{"type": "account"}])
    s.rewrite([{"span_id": "t13"}, {"span_id": "t19"}])
    d = EngineDriver()
    d.pipe(s)
    dropped = d.faults(FaultKind.REFERENT_DROPPED)
    assert len(dropped) == 1
    assert dropped[0].span_ids == ["t19"]
    assert dropped[0].evidence["mentions"][0]["was_bound_by"] == "t12"


def test_repeated_key_keeps_the_referent_held() -> None:
    s = SessionScript()
    s.add("t12", "intro", introduces=[{"key": "8841-C", "type": "account"}])
    s.add("t15", "again", introduces=[{"key": "8841-C", "type": "account"}])
    s.add("t19", "did it clear", mentions=[{"key": "8841-C"}])
    s.rewrite([{"span_id": "t15"}, {"span_id": "t19"}])
    d = EngineDriver()
    d.pipe(s)
    assert d.faults(FaultKind.REFERENT_DROPPED) == []
