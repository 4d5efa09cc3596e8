"""Contract 1.2 in the reference model, without the engine: tool pair groups and
protected spans at the gate, the rewrite's new faults and the compaction record."""

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.reference.model import ReferenceModel
from spanguard.streams.reference.outcome import Compacted, Decision, Fault, Outcome, Pin
from spanguard.streams.reference.sessions import SessionWriter, random_session, sha

KEYS = "Account 8841-C, incident INC-4411 and ops@example.com."


def run(writer: SessionWriter) -> list[list[Outcome]]:
    model = ReferenceModel()
    return [model.process(line) for line in writer.lines]


def decision(outcomes: list[Outcome]) -> Decision:
    (found,) = [o for o in outcomes if isinstance(o, Decision)]
    return found


def record(outcomes: list[Outcome]) -> Compacted:
    (found,) = [o for o in outcomes if isinstance(o, Compacted)]
    return found


def faults(outcomes: list[Outcome]) -> list[Fault]:
    return [o for o in outcomes if isinstance(o, Fault)]


def entry(span_id: str, text: str, tokens: int = 10, **extra: Any) -> dict[str, Any]:
    return {"span_id": span_id, "text": text, "tokens": tokens, **extra}


def paired() -> SessionWriter:
    """A system prompt, a task, a call with two results (one group) and a reply."""
    w = SessionWriter()
    w.add("sys", "You are a helpful agent.", 0, role="system", protected=True)
    w.add("task", "Refund order 55012.", 1, role="user", protected=True)
    w.add("call", "lookup", 2, role="assistant", tool_call_ids=["c1", "c2"])
    w.add("r1", '{"status": "shipped"}', 3, role="tool", tool_call_id="c1")
    w.add("r2", '{"refund": "allowed"}', 4, role="tool", tool_call_id="c2")
    w.add("reply", "Done.", 5, role="assistant")
    return w


def test_half_a_pair_is_refused_and_held_by_the_first_of_its_group_that_stays() -> None:
    w = paired()
    w.evict(candidates=["r1", "reply"], basis="recency")
    made = decision(run(w)[-1])
    assert made.committed == {"reply"}
    assert made.refused == {("r1", "TOOL_PAIR")}
    assert made.held_by == {("r1", "call")}
    assert made.action == "PARTIAL"


def test_a_whole_group_leaves_together() -> None:
    w = paired()
    w.evict(candidates=["call", "r1", "r2"], basis="recency")
    made = decision(run(w)[-1])
    assert made.committed == {"call", "r1", "r2"}
    assert made.action == "COMMIT"


def test_a_protected_span_is_refused_whatever_the_basis_and_never_ranked() -> None:
    w = paired()
    w.evict(candidates=["sys"], basis="recency")
    w.evict(candidates=["task"])
    outcomes = run(w)
    assert decision(outcomes[-2]).refused == {("sys", "PROTECTED")}
    assert decision(outcomes[-1]).refused == {("task", "PROTECTED")}


def test_policies_never_select_or_count_a_protected_span() -> None:
    w = SessionWriter()
    w.add("sys", "Be brief.", 0, protected=True)
    w.add("a", "one", 1)
    w.add("b", "two", 2)
    w.score(("sys", 0.0, sha("Be brief.")), ("a", 0.2, sha("one")), ("b", 0.9, sha("two")))
    w.evict(policy={"keep_top_k": 1})
    w.evict(policy={"threshold": 0.5})
    *_, top_k, threshold = run(w)
    assert decision(top_k).committed == {"a"}  # sys neither ranked nor counted
    assert decision(threshold).committed == set()


def test_a_protected_candidate_counts_as_retained_for_pins() -> None:
    w = SessionWriter()
    w.add("t1", "Customer says account 8841-C was charged twice.", 0)
    w.add("task", "Refund that account today.", 1, protected=True)
    w.evict(candidates=["t1", "task"], basis="recency")
    outcomes = run(w)[-1]
    assert Pin("t1", frozenset({"task"})) in outcomes
    assert decision(outcomes).refused == {("t1", "PINNED"), ("task", "PROTECTED")}


def test_a_pinned_half_holds_its_pair() -> None:
    w = SessionWriter()
    w.add("call", "lookup account 8841-C", 0, tool_call_ids=["c1"])
    w.add("res", "ok", 1, tool_call_id="c1")
    w.add("u", "Refund that account.", 2)
    w.evict(candidates=["call", "res"], basis="recency")
    made = decision(run(w)[-1])
    assert made.refused == {("call", "PINNED"), ("res", "TOOL_PAIR")}
    assert made.held_by == {("res", "call")}


def test_a_poisoned_span_whose_group_stays_stays_refused() -> None:
    w = SessionWriter()
    w.add("call", "v0", 0, tool_call_ids=["c1"])
    w.add("res", "result", 1, tool_call_id="c1")
    for turn, version in enumerate(("v1", "v2", "v3")):
        w.seq = 10 * (turn + 1)
        w.rewrite([entry("call", version), entry("res", "result")], declared_modified=["call"])
    w.evict(candidates=["call"], basis="recency")
    outcomes = run(w)[-1]
    assert Fault("POISONED_SPAN", frozenset({"call"})) in outcomes
    made = decision(outcomes)
    assert made.dropped == set()
    assert made.refused == {("call", "TOOL_PAIR")}
    assert made.held_by == {("call", "res")}


def test_a_summary_of_both_halves_is_healthy_one_half_is_a_split() -> None:
    whole = paired()
    whole.rewrite(
        [
            entry("sys", "You are a helpful agent."),
            entry("task", "Refund order 55012."),
            entry(
                "sum", "Order 55012 shipped; refund allowed.", 8, derived_from=["call", "r1", "r2"]
            ),
            entry("reply", "Done."),
        ],
        strategy="summarize",
        trigger="threshold",
    )
    outcomes = run(whole)[-1]
    assert faults(outcomes) == []
    made = record(outcomes)
    assert (made.merged, made.created, made.outcome) == (("call", "r1", "r2"), ("sum",), "clean")
    assert (made.strategy, made.trigger) == ("summarize", "threshold")
    assert (made.tokens_before, made.tokens_after, made.spans_before, made.spans_after) == (
        60,
        38,
        6,
        4,
    )
    assert made.tokens_by_role_before == (
        ("assistant", 20),
        ("system", 10),
        ("tool", 20),
        ("user", 10),
    )
    assert made.tokens_by_role_after == (
        ("assistant", 10),
        ("system", 10),
        ("unknown", 8),
        ("user", 10),
    )

    half = paired()
    half.rewrite(
        [
            entry("sys", "You are a helpful agent."),
            entry("task", "Refund order 55012."),
            entry("call", "lookup"),
            entry("r2", '{"refund": "allowed"}'),
            entry("sum", "It shipped.", 3, derived_from=["r1"]),
            entry("reply", "Done."),
        ]
    )
    outcomes = run(half)[-1]
    assert faults(outcomes) == [Fault("TOOL_PAIR_SPLIT", frozenset({"call"}), (("c1", "call"),))]
    assert record(outcomes).outcome == "critical"
    assert record(outcomes).faults == {"TOOL_PAIR_SPLIT"}


def test_a_protected_span_rewritten_or_dropped() -> None:
    w = paired()
    w.rewrite(
        [
            entry("sys", "You are a terse agent."),
            entry("call", "lookup"),
            entry("r1", '{"status": "shipped"}'),
            entry("r2", '{"refund": "allowed"}'),
            entry("reply", "Done."),
        ],
        declared_modified=["sys"],
    )
    outcomes = run(w)[-1]
    kinds = {(f.kind, span) for f in faults(outcomes) for span in f.span_ids}
    assert kinds == {
        ("PROTECTED_SPAN_REWRITTEN", "sys"),
        ("PROTECTED_SPAN_REWRITTEN", "task"),
        ("UNGATED_EVICTION", "task"),
    }
    assert record(outcomes).removed == ("task",)
    assert record(outcomes).modified == ("sys",)


def test_a_summary_that_keeps_none_of_the_keys_loses_them() -> None:
    for text, lost in (("A refund was discussed.", True), (KEYS, False)):
        w = SessionWriter()
        w.add("a", "Account 8841-C is blocked.", 0)
        w.add("b", "Incident INC-4411 was opened by ops@example.com.", 1)
        w.add("c", "Thanks.", 2)
        w.evict(candidates=["a"], basis="recency")  # a parent gone earlier still counts
        w.rewrite([entry("sum", text, 5, derived_from=["a", "b"]), entry("c", "Thanks.")])
        outcomes = run(w)[-1]
        found = [f for f in faults(outcomes) if f.kind == "SUMMARY_LOST_KEYS"]
        if lost:
            assert found == [Fault("SUMMARY_LOST_KEYS", frozenset({"sum"}), (("sum", 3, 0, 3),))]
            assert record(outcomes).keys_before == 2
            assert record(outcomes).keys_after == 0
        else:
            assert found == []


def test_thin_compactions_turn_after_turn_thrash_at_n_and_2n() -> None:
    w = SessionWriter()
    w.add("a", "one", 0, tokens=100)
    raised = []
    for turn in range(7):
        w.seq = 3 * turn + 1  # turn = seq // 3: one rewrite per turn
        w.rewrite([entry("a", f"one v{turn}", 98 - turn)], declared_modified=["a"])
    outcomes = run(w)
    for index, found in enumerate(outcomes[1:]):
        if any(f.kind == "COMPACTION_THRASHING" for f in faults(found)):
            raised.append(index)
    assert raised == [2, 5]


def test_a_rewrite_that_shrinks_or_comes_late_resets_the_run() -> None:
    w = SessionWriter()
    w.add("a", "one", 0, tokens=100)
    tokens = 100
    for at, shrink in ((1, False), (4, False), (7, True), (10, False), (13, False), (40, False)):
        w.seq = at
        tokens = tokens // 2 if shrink else tokens
        w.rewrite([entry("a", f"one {at}", tokens)], declared_modified=["a"])
    outcomes = run(w)
    assert not any(f.kind == "COMPACTION_THRASHING" for o in outcomes for f in faults(o))


def test_a_span_merged_into_an_entry_that_stays_gone_is_ungated() -> None:
    w = SessionWriter()
    w.add("a", "one", 0)
    w.add("b", "two", 1)
    w.add("c", "three", 2)
    w.evict(candidates=["b"], basis="recency")  # seq 3: after the rewriter's base_seq
    w.rewrite([entry("b", "one and two", derived_from=["a"]), entry("c", "three")], base_seq=2)
    outcomes = run(w)[-1]
    assert {(f.kind, s) for f in faults(outcomes) for s in f.span_ids} == {
        ("UNGATED_EVICTION", "a")
    }
    assert record(outcomes).removed == ("a",)
    assert record(outcomes).merged == ()


def test_the_record_lists_every_fault_of_its_event_and_comes_last() -> None:
    w = SessionWriter()
    w.add("a", "one", 0)
    w.seq += 3  # a gap: its fault is the rewrite event's too
    w.rewrite([entry("a", "one")])
    outcomes = run(w)[-1]
    assert isinstance(outcomes[-1], Compacted)
    assert outcomes[-1].faults == {"SEQUENCE_GAP"}
    assert outcomes[-1].outcome == "warning"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_invariants_of_decisions_and_records(seed: int) -> None:
    # One session per trace: whatever it holds, a decision never lets a protected span
    # or part of a live group leave, every TOOL_PAIR refusal names its holder, and each
    # rewrite's record comes last, listing every fault kind of its event.
    model = ReferenceModel()
    for line in random_session(random.Random(seed), f"h{seed}", 50):
        before = [session.clone() for session in model.sessions.values()]
        outcomes = model.process(line)
        records = [o for o in outcomes if isinstance(o, Compacted)]
        assert len(records) <= 1
        if records:
            assert outcomes[-1] is records[0]
            assert records[0].faults == {f.kind for f in faults(outcomes)}
            assert sum(t for _, t in records[0].tokens_by_role_after) == records[0].tokens_after
        for made in (o for o in outcomes if isinstance(o, Decision)):
            (session,) = before
            leaving = made.committed | made.dropped
            for span_id in leaving:
                assert not session.spans[span_id].protected
                assert {s.span_id for s in session.group(span_id)} <= leaving
            assert {s for s, r in made.refused if r == "TOOL_PAIR"} == {s for s, _ in made.held_by}
