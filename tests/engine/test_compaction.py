"""Contract 1.2's compaction failures, one scenario each with its healthy counterpart,
through the engine: tool pairs and protected spans at the gate and in rewrites,
summaries that lose the keys, thrashing, and the ``context.compacted`` record."""

from __future__ import annotations

import pytest

from spanguard.schemas import Action, FaultKind, RefusalReason, Severity
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript
from tests.engine.test_persist import run_split, run_whole


def agent_session() -> SessionScript:
    """A protected system prompt and task, a tool call with its result, more turns."""
    s = SessionScript()
    s.add("sys", "You are a support agent.", role="system", protected=True)
    s.add("u1", "Refund order 55012 please.", role="user", protected=True)
    s.add("a1", "Looking it up.", role="assistant", tool_call_ids=["call-1"])
    s.add("t1", '{"order_id": "55012", "status": "paid"}', role="tool", tool_call_id="call-1")
    s.add("a2", "It is paid; refunding now.", role="assistant")
    s.add("u2", "thanks", role="user")
    return s


def run(s: SessionScript) -> EngineDriver:
    driver = EngineDriver(clear_keys=True)
    driver.pipe(s)
    return driver


def refusals(driver: EngineDriver) -> list[tuple[str, RefusalReason, str | None]]:
    (decision,) = driver.decisions()
    return [(r.span_id, r.reason, r.held_by) for r in decision.refused]


# --- the gate -----------------------------------------------------------------------------


def test_a_protected_span_is_refused_whatever_the_basis() -> None:
    for basis in ("score", "recency"):
        s = agent_session()
        s.score(*((span, 0.1) for span in ("sys", "u1", "a1", "t1", "a2", "u2")))
        s.evict(["sys", "u2"], basis=basis)
        driver = run(s)
        assert refusals(driver) == [("sys", RefusalReason.PROTECTED, None)]
        assert driver.decisions()[0].committed == ["u2"]


def test_policies_never_select_rank_or_count_a_protected_span() -> None:
    s = agent_session()
    s.score(("sys", 0.01), ("u1", 0.02), ("a1", 0.5), ("t1", 0.6), ("a2", 0.3), ("u2", 0.9))
    s.evict(keep_top_k=2)
    (decision,) = run(s).decisions()
    # Four unprotected spans ranked, two kept: a2 (0.3) and the pair's call a1 (0.5)
    # leave; a1's result t1 is kept by the policy, so a1 is refused for its pair.
    assert decision.committed == ["a2"]
    assert [(r.span_id, r.reason, r.held_by) for r in decision.refused] == [
        ("a1", RefusalReason.TOOL_PAIR, "t1")
    ]


def test_half_of_a_pair_is_refused_and_names_what_holds_it() -> None:
    s = agent_session()
    s.evict(["a1"], basis="recency")
    driver = run(s)
    assert refusals(driver) == [("a1", RefusalReason.TOOL_PAIR, "t1")]
    assert driver.decisions()[0].action is Action.REJECT


def test_a_whole_pair_leaves_together() -> None:
    s = agent_session()
    s.evict(["t1", "a1"], basis="recency")
    (decision,) = run(s).decisions()
    assert decision.committed == ["t1", "a1"] and decision.action is Action.COMMIT


def test_a_pair_with_a_pinned_half_stays_whole() -> None:
    s = agent_session()
    s.add("u3", "is that order refunded yet?", role="user")
    s.evict(["a1", "t1", "u2"], basis="recency")
    driver = run(s)
    # u3 refers to the order t1 was the last to hold: t1 is pinned, a1 stays with it.
    assert refusals(driver) == [
        ("t1", RefusalReason.PINNED, None),
        ("a1", RefusalReason.TOOL_PAIR, "t1"),
    ]


def test_a_call_with_two_results_is_one_group() -> None:
    s = SessionScript()
    s.add("a1", "two lookups", tool_call_ids=["c1", "c2"])
    s.add("t1", "first result", tool_call_id="c1")
    s.add("t2", "second result", tool_call_id="c2")
    s.evict(["a1", "t1"], basis="recency")
    assert refusals(run(s)) == [
        ("a1", RefusalReason.TOOL_PAIR, "t2"),
        ("t1", RefusalReason.TOOL_PAIR, "t2"),
    ]


def test_a_protected_candidate_counts_as_retained_for_pins() -> None:
    s = SessionScript()
    s.add("t1", "ticket INC-4411 was opened")
    s.add("sys", "Always follow up on ticket INC-4411.", protected=True)
    s.evict(["t1", "sys"], basis="recency")
    driver = run(s)
    assert [p.span_id for p in driver.pins()] == ["t1"]
    assert refusals(driver) == [
        ("t1", RefusalReason.PINNED, None),
        ("sys", RefusalReason.PROTECTED, None),
    ]


# --- rewrites -------------------------------------------------------------------------------


def compact(s: SessionScript, keep: list[str], summary: dict[str, object] | None = None) -> None:
    entries: list[dict[str, object]] = [{"span_id": span_id} for span_id in keep]
    if summary is not None:
        entries.append(summary)
    s.rewrite(entries, strategy="summarize", trigger="threshold")


def test_a_summary_that_replaces_one_half_of_a_pair_splits_it() -> None:
    s = agent_session()
    compact(
        s,
        ["sys", "u1", "a1", "a2", "u2"],
        {"span_id": "sum", "text": "order 55012 is paid", "derived_from": ["t1"]},
    )
    driver = run(s)
    (split,) = driver.faults(FaultKind.TOOL_PAIR_SPLIT)
    assert split.span_ids == ["a1"] and split.evidence["tool_call_id"] == "call-1"
    assert split.severity is Severity.CRITICAL


def test_a_rolling_summary_that_absorbs_both_halves_is_healthy() -> None:
    s = agent_session()
    compact(
        s,
        ["sys", "u1", "a2", "u2"],
        {"span_id": "sum", "text": "order 55012 was looked up: paid", "derived_from": ["a1", "t1"]},
    )
    driver = run(s)
    assert driver.fault_kinds() == []
    (record,) = driver.compactions()
    assert (record.merged, record.created, record.outcome) == (["a1", "t1"], ["sum"], "clean")


def test_a_rewritten_or_dropped_system_prompt() -> None:
    s = agent_session()
    compact(s, ["u1", "a1", "t1", "a2", "u2"])  # the system prompt left out, no successor
    driver = run(s)
    assert driver.fault_kinds() == [FaultKind.UNGATED_EVICTION, FaultKind.PROTECTED_SPAN_REWRITTEN]
    s = agent_session()
    s.rewrite([{"span_id": "sys", "text": "You are helpful."}], declared_modified=["sys"])
    driver = run(s)
    (fault,) = driver.faults(FaultKind.PROTECTED_SPAN_REWRITTEN)
    assert fault.evidence["spans"][0]["change"] == "modified"


def test_a_protected_span_merged_into_a_summary_is_no_ungated_eviction() -> None:
    s = agent_session()
    compact(
        s,
        ["a1", "t1", "a2", "u2"],
        {"span_id": "sum", "text": "support agent; refund 55012", "derived_from": ["sys", "u1"]},
    )
    assert run(s).fault_kinds() == [FaultKind.PROTECTED_SPAN_REWRITTEN]


def keyed_session() -> SessionScript:
    s = SessionScript()
    s.add("a", "account 8841-C and ticket INC-4411")
    s.add("b", "order 55012 shipped to warehouse W-77")
    s.add("c", "latest turn")
    return s


def test_a_summary_that_keeps_none_of_the_keys_lost_them() -> None:
    s = keyed_session()
    compact(
        s,
        ["c"],
        {"span_id": "sum", "text": "some orders were discussed", "derived_from": ["a", "b"]},
    )
    driver = run(s)
    (lost,) = driver.faults(FaultKind.SUMMARY_LOST_KEYS)
    assert lost.span_ids == ["sum"]
    assert (lost.evidence["parent_keys"], lost.evidence["kept"]) == (4, 0)
    assert sorted(lost.evidence["lost"]) == ["55012", "8841-c", "inc-4411", "w-77"]


def test_a_summary_that_keeps_the_keys_is_healthy() -> None:
    s = keyed_session()
    text = "account 8841-C, ticket INC-4411 and order 55012"
    compact(s, ["c"], {"span_id": "sum", "text": text, "derived_from": ["a", "b"]})
    assert FaultKind.SUMMARY_LOST_KEYS not in run(s).fault_kinds()  # 3 of 4 kept


def test_parents_evicted_earlier_count_with_the_keys_they_held() -> None:
    s = keyed_session()
    s.evict(["a"], basis="recency")
    compact(s, ["c"], {"span_id": "sum", "text": "it shipped", "derived_from": ["a", "b"]})
    (lost,) = run(s).faults(FaultKind.SUMMARY_LOST_KEYS)
    assert lost.evidence["parent_keys"] == 4


def test_a_span_merged_into_an_entry_that_stays_gone_is_ungated() -> None:
    s = SessionScript()
    s.add("x", "first")
    s.add("y", "second")
    s.add("sum", "an earlier summary")
    base = s.seq - 1
    s.evict(["sum"], basis="recency")
    s.rewrite([{"span_id": "y"}, {"span_id": "sum", "derived_from": ["x"]}], base_seq=base)
    driver = run(s)
    (ungated,) = driver.faults(FaultKind.UNGATED_EVICTION)
    assert ungated.span_ids == ["x"]
    assert driver.compactions()[0].removed == ["x"]


def thin_rewrite(s: SessionScript, turns: int, keep: list[str]) -> None:
    for _ in range(turns):
        s.next_turn()
    s.rewrite([{"span_id": span_id} for span_id in keep])


def test_compactions_that_do_not_compact_thrash() -> None:
    s = SessionScript()
    for i in range(20):
        s.add(f"s{i}", f"turn {i} with ten words of content in it, more or less")
    live = [f"s{i}" for i in range(20)]
    for round_ in range(6):
        live = live[1:]  # one span of twenty: 5% each time
        thin_rewrite(s, 1 if round_ else 0, live)
    (first, second) = run(s).faults(FaultKind.COMPACTION_THRASHING)
    assert (first.evidence["consecutive"], second.evidence["consecutive"]) == (3, 6)


def test_a_rewrite_that_shrinks_resets_and_a_late_one_restarts_the_count() -> None:
    s = SessionScript()
    for i in range(20):
        s.add(f"s{i}", f"turn {i} with ten words of content in it, more or less")
    live = [f"s{i}" for i in range(20)]
    live = live[1:]
    thin_rewrite(s, 0, live)
    live = live[1:]
    thin_rewrite(s, 1, live)
    live = live[5:]  # shrinks by over a quarter
    thin_rewrite(s, 1, live)
    live = live[1:]
    thin_rewrite(s, 1, live)
    live = live[1:]
    thin_rewrite(s, 3, live)  # later than two turns: a new count of 1
    live = live[1:]
    thin_rewrite(s, 1, live)
    assert run(s).faults(FaultKind.COMPACTION_THRASHING) == []


# --- the record --------------------------------------------------------------------------------


def test_every_accepted_rewrite_has_one_record_after_its_faults() -> None:
    s = agent_session()
    compact(
        s,
        ["sys", "u1", "a1", "a2", "u2"],
        {"span_id": "sum", "text": "order 55012 is paid", "derived_from": ["t1"]},
    )
    driver = run(s)
    (record,) = driver.compactions()
    faults = driver.faults()
    assert driver.outputs.index(record) > max(driver.outputs.index(f) for f in faults)
    assert record.faults == [f.fault_id for f in faults]
    assert record.outcome == "critical"
    assert (record.strategy, record.trigger, record.rewrite_id) == (
        "summarize",
        "threshold",
        "rw-1",
    )
    assert (record.spans_before, record.spans_after) == (6, 6)
    assert record.created == ["sum"] and record.merged == ["t1"] and record.removed == []
    assert record.tokens_by_role_before["tool"] == 4
    assert "tool" not in record.tokens_by_role_after
    assert record.tokens_by_role_after["unknown"] == 4
    assert record.tokens_before == sum(record.tokens_by_role_before.values())
    assert record.tokens_after == sum(record.tokens_by_role_after.values())
    assert record.keys_before == record.keys_after == 1  # 55012, held by u1 and the summary


@pytest.mark.parametrize(
    ("severity", "outcome"),
    [(Severity.INFO, "clean"), (Severity.WARNING, "warning"), (Severity.CRITICAL, "critical")],
)
def test_the_outcome_is_the_worst_severity(severity: Severity, outcome: str) -> None:
    s = SessionScript()
    s.add("x", "first")
    s.rewrite([{"span_id": "x", "text": "changed"}])  # an undeclared modification
    driver = EngineDriver(severities={FaultKind.UNDECLARED_MODIFICATION: severity})
    driver.pipe(s)
    assert driver.compactions()[0].outcome == outcome


def test_pairs_protection_and_streaks_survive_a_restore_at_every_cut() -> None:
    s = agent_session()
    s.evict(["a1", "sys"], basis="recency")
    compact(
        s,
        ["sys", "u1", "a1", "a2", "u2"],
        {"span_id": "sum", "text": "order 55012 is paid", "derived_from": ["t1"]},
    )
    for _ in range(3):
        s.next_turn()
        s.rewrite([{"span_id": span_id} for span_id in ("sys", "u1", "a1", "a2", "u2", "sum")])
    lines = s.lines()
    expected = run_whole(lines)
    assert any(b"TOOL_PAIR" in line for line in expected)
    assert any(b"COMPACTION_THRASHING" in line for line in expected)
    for cut in range(len(lines) + 1):
        assert run_split(lines, cut) == expected, f"cut at {cut}"
