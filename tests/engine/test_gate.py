"""The eviction gate, step by step in the contract's order."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.schemas import Action, FaultKind
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.gate import pinned_set
from spanguard.streams.engine.trace import SessionScript
from tests.engine.scripts import actions, build

ACCOUNT = [{"key": "8841-C", "type": "account"}]


def refused(decision) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {r.span_id: r.reason.value for r in decision.refused}


def test_commit_candidates_with_bound_scores() -> None:
    s = SessionScript()
    s.add("a")
    s.add("b")
    s.score(("a", 0.1), ("b", 0.9))
    s.evict(["a"])
    d = EngineDriver()
    d.pipe(s)
    [dec] = d.decisions()
    assert dec.action == Action.COMMIT and dec.committed == ["a"] and dec.refused == []
    assert dec.basis == "score" and dec.recompute_id is None
    assert "a" not in d.engine.session("acme", "s1").spans  # type: ignore[union-attr]


def test_unknown_evicted_and_unscored_are_refused() -> None:
    s = SessionScript()
    s.add("a")
    s.add("b")
    s.add("u")
    s.score(("a", 0.1), ("b", 0.2))
    s.evict(["a"])
    s.evict(["a", "zzz", "u", "b"])
    d = EngineDriver()
    d.pipe(s)
    second = d.decisions()[1]
    assert refused(second) == {"a": "ALREADY_EVICTED", "zzz": "UNKNOWN_SPAN", "u": "UNSCORED"}
    assert second.committed == ["b"] and second.action == Action.PARTIAL


def test_nothing_committed_is_reject() -> None:
    s = SessionScript()
    s.add("u")
    s.evict(["u"])
    d = EngineDriver()
    d.pipe(s)
    assert d.decisions()[0].action == Action.REJECT


def test_recency_basis_needs_no_scores() -> None:
    s = SessionScript()
    s.add("u")
    s.add("v")
    s.rewrite([{"span_id": "u", "text": "changed"}, {"span_id": "v"}], declared_modified=["u"])
    s.evict(["v"], basis="recency")
    d = EngineDriver()
    d.pipe(s)
    [dec] = d.decisions()
    assert dec.action == Action.COMMIT and dec.committed == ["v"] and dec.basis == "recency"


def test_seed_001_threshold_eviction_pins_the_antecedent() -> None:
    s = SessionScript()
    s.add("t12", "intro", introduces=ACCOUNT)
    s.add("t13", "filler one")
    s.add("t19", "did that account clear KYC?", mentions=[{"type": "account"}])
    s.score(("t12", 0.11), ("t13", 0.05), ("t19", 0.9))
    s.evict(threshold=0.15)
    d = EngineDriver()
    d.pipe(s)
    [pin] = d.pins()
    assert pin.span_id == "t12" and pin.pinned_for == ["t19"] and pin.path == ["t19", "t12"]
    assert pin.mention.type == "account" and pin.mention.key is None
    [dec] = d.decisions()
    assert dec.committed == ["t13"]
    assert refused(dec) == {"t12": "PINNED"}
    assert dec.pins == [pin.pin_id]
    assert dec.action == Action.PARTIAL


def test_key_mention_pins_the_earliest_holder_with_hashed_key() -> None:
    s = SessionScript()
    s.add("a", "intro", introduces=ACCOUNT)
    s.add("b", "ask", mentions=[{"key": "8841-C"}])
    s.score(("a", 0.1), ("b", 0.9))
    s.evict(["a"])
    d = EngineDriver()
    d.pipe(s)
    [pin] = d.pins()
    assert pin.mention.key is not None and pin.mention.key.startswith("hmac-sha256:")
    assert "8841" not in pin.model_dump_json()


def test_pins_close_transitively() -> None:
    s = SessionScript()
    s.add("a", "intro", introduces=[{"key": "T-1", "type": "ticket"}])
    s.add(
        "b",
        "bridge",
        introduces=[{"key": "ACC-9", "type": "account"}],
        mentions=[{"type": "ticket"}],
    )
    s.add("c", "ask", mentions=[{"type": "account"}])
    s.score(("a", 0.1), ("b", 0.1), ("c", 0.9))
    s.evict(["a", "b"])
    d = EngineDriver()
    d.pipe(s)
    pins = {p.span_id: p for p in d.pins()}
    assert set(pins) == {"a", "b"}
    assert pins["b"].path == ["c", "b"]
    assert pins["a"].path == ["c", "b", "a"] and pins["a"].pinned_for == ["b"]
    assert d.decisions()[0].action == Action.REJECT


def test_anaphor_binds_latest_holder_before_it() -> None:
    s = SessionScript()
    s.add("old", "intro 1", introduces=[{"key": "A-1", "type": "account"}])
    s.add("new", "intro 2", introduces=[{"key": "A-2", "type": "account"}])
    s.add("ask", "that account?", mentions=[{"type": "account"}])
    s.score(("old", 0.1), ("new", 0.1), ("ask", 0.9))
    s.evict(["old", "new"])
    d = EngineDriver()
    d.pipe(s)
    assert [p.span_id for p in d.pins()] == ["new"]
    assert d.decisions()[0].committed == ["old"]


def test_freeze_on_stale_span_requests_recompute_of_neighbours() -> None:
    s = SessionScript()
    for name in "abcde":
        s.add(name)
    s.score(*[(n, 0.5) for n in "abcde"])
    s.rewrite(
        [{"span_id": n, "text": "new c"} if n == "c" else {"span_id": n} for n in "abcde"],
        declared_modified=["c"],
        scores_invalidated=[s.score_id(1, 2, "c")],
    )
    s.evict(["a", "c"])
    d = EngineDriver()
    d.pipe(s)
    [dec] = d.decisions()
    assert dec.action == Action.FREEZE and dec.committed == []
    assert refused(dec) == {"a": "FROZEN", "c": "STALE_SCORE"}
    [rc] = d.recomputes()
    assert rc.span_ids == ["b", "c", "d"] and dec.recompute_id == rc.recompute_id
    state = d.engine.session("acme", "s1")
    assert state is not None and "a" in state.spans


def test_pruning_stalled_at_n_and_2n_and_reset() -> None:
    s = SessionScript()
    s.add("a")
    s.rewrite([{"span_id": "a", "text": "changed"}], declared_modified=["a"])
    for _ in range(6):
        s.evict(["a"])
    d = EngineDriver()
    d.pipe(s)
    stalled = d.faults(FaultKind.PRUNING_STALLED)
    assert len(stalled) == 2
    assert [f.evidence["consecutive_freezes"] for f in stalled] == [3, 6]
    third = d.decisions()[2]
    assert stalled[0].fault_id in third.faults


def test_keep_top_k_ranks_only_bound_scores() -> None:
    s = SessionScript()
    for name, value in [("a", 0.9), ("b", 0.1), ("c", 0.5), ("d", 0.3)]:
        s.add(name)
        s.score((name, value))
    s.add("unscored")
    s.evict(keep_top_k=2)
    d = EngineDriver()
    d.pipe(s)
    [dec] = d.decisions()
    assert dec.committed == ["b", "d"]
    assert "unscored" in d.engine.session("acme", "s1").spans  # type: ignore[union-attr]


def test_query_mismatch_counts_as_absent() -> None:
    q1, q2 = "1" * 64, "2" * 64
    s = SessionScript()
    s.add("a")
    s.add("b")
    s.score(("a", 0.1), query_sha256=q1)
    s.score(("b", 0.1), query_sha256=q2)
    s.evict(threshold=0.5, query_sha256=q1)
    s.evict(["b"], query_sha256=q1)
    d = EngineDriver()
    d.pipe(s)
    first, second = d.decisions()
    assert first.committed == ["a"]
    assert refused(second) == {"b": "UNSCORED"}


def poisoned_next_to_stale(tail: list[str]) -> EngineDriver:
    """p is poisoned (three unscored rewrites), x scored; then the spans of ``tail``
    are added, p placed between x and them, the first of them made stale, and x's
    eviction requested (a FREEZE that drops p)."""
    s = SessionScript()
    s.add("p", "v0")
    s.add("x", "other")
    for i in range(1, 4):
        s.rewrite([{"span_id": "p", "text": f"v{i}"}, {"span_id": "x"}], declared_modified=["p"])
    s.score(("x", 0.5))
    for name in tail:
        s.add(name)
    changed = [{"span_id": tail[0], "text": f"{tail[0]} changed"}]
    rest = [{"span_id": name} for name in tail[1:]]
    s.rewrite([{"span_id": "x"}, {"span_id": "p"}, *changed, *rest], declared_modified=[tail[0]])
    s.evict(["x"])
    d = EngineDriver()
    d.pipe(s)
    return d


def test_poisoned_span_is_dropped_with_next_decision_even_freeze() -> None:
    d = poisoned_next_to_stale(["y"])
    [dec] = d.decisions()
    assert dec.action == Action.FREEZE and dec.dropped == ["p"]
    assert "p" not in d.engine.session("acme", "s1").spans  # type: ignore[union-attr]


def test_span_dropped_by_a_freeze_is_not_named_in_its_recompute_request() -> None:
    # p is poisoned and sits between x and the stale y: the FREEZE drops p, so the
    # recompute request names y and its neighbours among the spans that stay (x),
    # never p (contract 1.1, gate step 5).
    d = poisoned_next_to_stale(["y", "z"])
    [dec] = d.decisions()
    assert dec.action == Action.FREEZE and dec.dropped == ["p"]
    [rc] = d.recomputes()
    assert dec.recompute_id == rc.recompute_id
    assert rc.span_ids == ["x", "y", "z"]


def test_pinned_poisoned_span_stays_with_critical_fault() -> None:
    s = SessionScript()
    s.add("p", "v0", introduces=ACCOUNT)
    for i in range(1, 4):
        s.rewrite(
            [{"span_id": "p", "text": f"v{i}", "introduces": ACCOUNT}], declared_modified=["p"]
        )
    s.add("ask", "that one", mentions=[{"type": "account"}])
    s.add("z", "old chatter")
    s.evict(["z"], basis="recency")
    d = EngineDriver()
    d.pipe(s)
    [dec] = d.decisions()
    assert dec.dropped == [] and dec.committed == ["z"]
    assert refused(dec) == {"p": "PINNED"}
    poisoned = d.faults(FaultKind.POISONED_SPAN)
    assert len(poisoned) == 2 and poisoned[1].evidence["pinned"] is True
    assert poisoned[1].fault_id in dec.faults


def test_flag_mode_keeps_poisoned_span_as_stale() -> None:
    s = SessionScript()
    s.add("p", "v0")
    for i in range(1, 4):
        s.rewrite([{"span_id": "p", "text": f"v{i}"}], declared_modified=["p"])
    s.evict(["p"])
    d = EngineDriver(poisoned="flag")
    d.pipe(s)
    [dec] = d.decisions()
    assert dec.action == Action.FREEZE and dec.dropped == []


@pytest.mark.parametrize("protect", [False, True])
def test_lineage_protection_or_orphan_fault(protect: bool) -> None:
    s = SessionScript()
    s.add("parent", "long text")
    s.add("summary", "short", derived_from=["parent"])
    s.score(("parent", 0.1), ("summary", 0.9))
    s.evict(["parent"])
    d = EngineDriver(protect_lineage=protect)
    d.pipe(s)
    [dec] = d.decisions()
    if protect:
        assert refused(dec) == {"parent": "LINEAGE"} and d.faults() == []
    else:
        assert dec.committed == ["parent"]
        [orphan] = d.faults(FaultKind.ORPHANED_PARENT)
        assert orphan.evidence["cited_by"] == {"parent": ["summary"]}
        assert orphan.fault_id in dec.faults


@settings(max_examples=120, deadline=None)
@given(actions(), st.data())
def test_one_pass_pinned_set_equals_the_per_candidate_walk(
    script_actions: list,
    data: st.DataObject,  # type: ignore[type-arg]
) -> None:
    # The gate resolves a large removal set from the whole referent index at once; it
    # must give exactly the pins (order, users, mention, path) of the per-candidate walk.
    engine = Engine()
    for i, line in enumerate(build(script_actions).lines()):
        engine.process_raw(line, Source("t", 0, i))
        state = engine.session("acme", "s1")
        if state is None or not state.spans:
            continue
        removal = data.draw(st.sets(st.sampled_from(sorted(state.spans))))
        walked = pinned_set(state, removal, bulk=False)
        assert pinned_set(state, removal, bulk=True) == walked
        assert list(pinned_set(state, removal, bulk=True)) == list(walked)


def test_one_pass_pinned_set_picks_the_same_mention_among_several() -> None:
    s = SessionScript()
    two = [{"key": "Z-9", "type": "ticket"}, {"key": "A-1", "type": "account"}]
    s.add("a", "holds both", introduces=two)
    s.add("t", "a ticket holder", introduces=[{"key": "T-5", "type": "ticket"}])
    s.add("b", "repeats both", introduces=list(reversed(two)), mentions=[{"type": "ticket"}])
    engine = Engine()
    for i, line in enumerate(s.lines()):
        engine.process_raw(line, Source("t", 0, i))
    state = engine.session("acme", "s1")
    assert state is not None
    for removal in ({"a"}, {"a", "t"}, {"t"}):
        walked = pinned_set(state, removal, bulk=False)
        assert walked and pinned_set(state, removal, bulk=True) == walked


def test_a_key_held_twice_pins_under_its_first_type_before_any_anaphor() -> None:
    # "a" binds K-1 (held under two types) and is the latest "ticket" before "u": the
    # walk meets the key before the anaphor, and the key under its first type.
    s = SessionScript()
    twice = [{"key": "K-1", "type": "account"}, {"key": "K-1", "type": "ticket"}]
    s.add("a", "first", introduces=twice)
    s.add(
        "u",
        "second",
        introduces=[{"key": "K-1", "type": "ticket"}],
        mentions=[{"type": "ticket"}],
    )
    s.add("w", "third", mentions=[{"type": "ticket"}])
    s.add("v", "fourth", mentions=[{"key": "K-1", "type": "ticket"}])
    engine = Engine()
    for i, line in enumerate(s.lines()):
        engine.process_raw(line, Source("t", 0, i))
    state = engine.session("acme", "s1")
    assert state is not None
    for bulk in (False, True):
        pins = pinned_set(state, {"a"}, bulk=bulk)
        assert list(pins) == ["a"]
        assert pins["a"].pinned_for == ["u", "v"]
        assert pins["a"].path == ["u", "a"]
        assert pins["a"].mention.type == "account" and pins["a"].mention.key is not None
        # "w"'s anaphor binds "u" (the latest ticket before it), candidate or not.
        pins = pinned_set(state, {"a", "u"}, bulk=bulk)
        assert list(pins) == ["a", "u"]
        assert pins["a"].pinned_for == ["v"] and pins["a"].mention.type == "account"
        assert pins["u"].pinned_for == ["w"]
        assert pins["u"].mention.type == "ticket" and pins["u"].mention.key is None


@pytest.mark.parametrize("hash_types", [False, True])
def test_anaphor_from_text_pins_its_antecedent_with_types_hashed_or_not(hash_types: bool) -> None:
    # The extractor finds "that account" in the text only when "account" is a known
    # type of the session, whether types are stored in clear or keyed-hashed.
    s = SessionScript()
    s.add("t12", "It is account 8841-C, the one flagged last week.")
    s.add("t13", "filler one")
    s.add("t19", "did that account clear KYC?")
    s.score(("t12", 0.11), ("t13", 0.05), ("t19", 0.9))
    s.evict(threshold=0.15)
    d = EngineDriver(hash_types=hash_types)
    d.pipe(s)
    [pin] = d.pins()
    assert pin.span_id == "t12" and pin.pinned_for == ["t19"]
    assert pin.mention.type is not None
    assert pin.mention.type.startswith("hmac-sha256:") is hash_types
