"""Contract 1.2 in the SDK: tool pairs and protected messages, from the tracker's own
knowledge and with the local engine (offline; the real agent loops are in the
adapters' tests)."""

from __future__ import annotations

from typing import Any

import pytest

from spanguard.schemas import Action, FaultKind
from spanguard.streams.sdk import Decision, Message, SpanguardClient, gate_compaction
from spanguard.streams.sdk.adapters.openai_chat import ChatGuard, item_tool_ids
from spanguard.streams.sdk.client import Session
from spanguard.streams.sdk.tracker import SpanTracker

SYSTEM = Message("sys", "You are a support agent. Never refund twice.", role="system")
TASK = Message("task", "Refund order 55012 for account 8841-C.", role="user")
CALL = Message(
    "call", '[{"name": "lookup", "args": {"order": "55012"}}]', role="ai", tool_call_ids=("c1",)
)
RESULT = Message("result", "Order 55012: paid twice.", role="tool", tool_call_id="c1")
REPLY = Message("reply", "I see two payments.", role="ai")
LATER = Message("later", "Unrelated: what is a good name for a cat? " * 4, role="user")
CONTEXT = [SYSTEM, TASK, CALL, RESULT, REPLY, LATER]


async def _session(name: str, **options: Any) -> Session:
    session = SpanguardClient.offline().session(name, **options)
    await session.observe(CONTEXT)
    return session


def test_span_added_carries_tool_ids_and_default_protection() -> None:
    tracker = SpanTracker("t", "s")
    events = [tracker.added(m) for m in [*CONTEXT, Message("u2", "Another question.", "user")]]
    assert [e.protected for e in events] == [True, True, False, False, False, False, False]
    assert events[2].tool_call_ids == ["c1"] and events[2].tool_call_id is None
    assert events[3].tool_call_id == "c1" and events[3].tool_call_ids is None
    assert tracker.protected_ids() == ["sys", "task"]
    assert tracker.tool_groups() == {"call": ("call", "result"), "result": ("call", "result")}


def test_protection_is_configurable() -> None:
    nothing = SpanTracker("t", "s", protect=())
    assert not any(nothing.added(m).protected for m in CONTEXT)
    own = SpanTracker("t", "s", protect=("system", lambda m: "Never" in m.text))
    assert [own.added(m).protected for m in CONTEXT[:3]] == [True, False, False]
    # The message's own flag wins over the policy, both ways.
    explicit = SpanTracker("t", "s")
    assert not explicit.added(Message("a", "x", "system", protected=False)).protected
    assert explicit.added(Message("b", "y", "ai", protected=True)).protected
    with pytest.raises(ValueError, match="unknown protection rule 'sytem'"):
        SpanTracker("t", "s", protect=("sytem",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="collection of rules"):
        SpanTracker("t", "s", protect="system")  # type: ignore[arg-type]


def test_violations_follow_the_engines_rules() -> None:
    tracker = SpanTracker("t", "s")
    for message in CONTEXT:
        tracker.added(message)
    summary = Message("sum", "Two payments found.", derived_from=("call", "result"))
    # A summary that replaces both halves of the pair is healthy.
    assert tracker.violations([SYSTEM, TASK, summary, REPLY, LATER]) == []
    # One that absorbs the call and keeps the result splits the pair.
    half = Message("sum", "Looked the order up.", derived_from=("call",))
    [split] = tracker.violations([SYSTEM, TASK, half, RESULT, REPLY, LATER])
    assert split.kind is FaultKind.TOOL_PAIR_SPLIT and split.call_id == "c1"
    assert split.span_ids == ("result",) and "'call'" in split.detail
    # The system prompt modified, the task merged into a summary.
    shorter = Message("sys", "Support agent.", role="system")
    task_gone = Message("sum", "Refund requested.", derived_from=("task",))
    found = tracker.violations([shorter, task_gone, CALL, RESULT, REPLY, LATER])
    assert [(v.kind, v.span_ids) for v in found] == [
        (FaultKind.PROTECTED_SPAN_REWRITTEN, ("sys",)),
        (FaultKind.PROTECTED_SPAN_REWRITTEN, ("task",)),
    ]
    assert "modified" in found[0].detail and "merged into 'sum'" in found[1].detail


async def test_a_summary_that_absorbs_half_a_pair_is_vetoed() -> None:
    session = await _session("pair-veto")
    half = Message("sum", "The agent looked order 55012 up.")
    outcome = await gate_compaction(session, CONTEXT, [SYSTEM, TASK, half, RESULT, REPLY, LATER])
    assert not outcome.applied and outcome.vetoed_by == (FaultKind.TOOL_PAIR_SPLIT,)
    assert [m.id for m in outcome.messages] == [m.id for m in CONTEXT]
    assert "tool call 'c1' split" in outcome.note
    # The local engine agrees with the tracker: the same fault, the same span.
    [fault] = outcome.faults
    assert fault.kind is FaultKind.TOOL_PAIR_SPLIT and fault.span_ids == ["result"]
    assert fault.evidence["tool_call_id"] == "c1"
    assert session.live == [m.id for m in CONTEXT]  # nothing was evicted or rewritten


async def test_a_summary_that_declares_a_protected_parent_is_vetoed() -> None:
    session = await _session("declared")
    summary = Message("sum", "Refund of order 55012 asked.", derived_from=("task",))
    outcome = await gate_compaction(session, CONTEXT, [SYSTEM, summary, *CONTEXT[2:]])
    assert outcome.vetoed_by == (FaultKind.PROTECTED_SPAN_REWRITTEN,)
    assert "protected message 'task' merged into 'sum'" in outcome.note
    [fault] = outcome.faults
    assert fault.span_ids == ["task"]


async def test_the_tracker_vetoes_without_an_engine() -> None:
    session = await _session("pair-veto-no-engine")
    session.client.engine = None  # no mirror: the tracker's own knowledge decides
    system = Message("sys", "Support agent.", role="system")
    outcome = await gate_compaction(session, CONTEXT, [system, *CONTEXT[1:]])
    assert outcome.vetoed_by == (FaultKind.PROTECTED_SPAN_REWRITTEN,)
    assert outcome.faults == () and outcome.violations[0].span_ids == ("sys",)
    assert "protected message 'sys' modified" in outcome.note


async def test_forced_through_the_local_engine_reports_what_was_broken() -> None:
    session = await _session("forced")
    system = Message("sys", "Support agent.", role="system")
    half = Message("sum", "The agent looked order 55012 up.")
    after = [system, TASK, half, RESULT, REPLY, LATER]
    # With no veto, the rewrite of the system prompt goes through and is reported; the
    # split does not: the summary would merge the call, and the SDK keeps it with its
    # result (the gate's rule, applied to what a summary absorbs).
    outcome = await gate_compaction(session, CONTEXT, after, veto_on=frozenset())
    assert outcome.applied and outcome.fault_kinds == [FaultKind.PROTECTED_SPAN_REWRITTEN]
    assert outcome.decision is None  # nothing left without a summary: the gate was not asked
    assert outcome.refused == {"call": "TOOL_PAIR"} and outcome.held_by == {"call": "result"}
    expected = ["sys", "task", "sum", "call", "result", "reply", "later"]
    assert [m.id for m in outcome.messages] == expected
    record = outcome.compaction
    assert record is not None and record.outcome == "critical"
    assert [f.fault_id for f in outcome.faults] == record.faults
    assert record.modified == ["sys"] and record.created == ["sum"]


async def test_a_rewrite_past_the_gate_reports_the_split_pair() -> None:
    session = await _session("past-the-gate")
    half = Message("sum", "The agent looked order 55012 up.", derived_from=("call",))
    after = [SYSTEM, TASK, half, RESULT, REPLY, LATER]
    assert [v.kind for v in session.tracker.violations(after)] == [FaultKind.TOOL_PAIR_SPLIT]
    report = await session.rewrite(after)  # no gate: the harness rewrote on its own
    [fault] = report.faults
    assert fault.kind is FaultKind.TOOL_PAIR_SPLIT and fault.span_ids == ["result"]
    assert report.compaction is not None and report.compaction.faults == [fault.fault_id]


async def test_a_healthy_summary_of_both_halves_is_applied() -> None:
    session = await _session("healthy")
    summary = Message("sum", "Order 55012 was paid twice; the agent saw it.")
    outcome = await gate_compaction(
        session, CONTEXT, [SYSTEM, TASK, summary, LATER], strategy="summarize", trigger="manual"
    )
    assert outcome.applied and outcome.vetoed_by == ()
    assert FaultKind.TOOL_PAIR_SPLIT not in outcome.fault_kinds
    assert [m.id for m in outcome.messages] == ["sys", "task", "sum", "later"]
    assert session.live == ["sys", "task", "sum", "later"]
    record = outcome.compaction
    assert record is not None and (record.strategy, record.trigger) == ("summarize", "manual")


async def test_a_trim_that_drops_half_a_pair_keeps_the_pair() -> None:
    session = await _session("trim-half")
    # A sliding window that cuts between the call and its result.
    outcome = await gate_compaction(session, CONTEXT, [RESULT, REPLY, LATER])
    assert outcome.applied
    decision = outcome.decision
    assert decision is not None
    # The gate refuses the call (its result stays) and the protected messages.
    assert decision.refused == {"sys": "PROTECTED", "task": "PROTECTED", "call": "TOOL_PAIR"}
    assert decision.held_by == {"call": "result"}
    assert [m.id for m in outcome.messages] == ["sys", "task", "call", "result", "reply", "later"]
    assert outcome.fault_kinds == []


async def test_a_trim_that_drops_a_whole_pair_evicts_it() -> None:
    session = await _session("trim-whole")
    outcome = await gate_compaction(session, CONTEXT, [REPLY, LATER])
    assert outcome.applied and outcome.decision is not None
    assert outcome.decision.committed == ("call", "result")
    assert [m.id for m in outcome.messages] == ["sys", "task", "reply", "later"]
    assert outcome.fault_kinds == []


async def test_eviction_decisions_never_leave_half_a_pair() -> None:
    session = await _session("gate-half")
    decision = await session.request_eviction(["result"], basis="recency")
    assert decision.action is Action.REJECT and decision.refused == {"result": "TOOL_PAIR"}
    assert "result" in session.live
    # A decision that would evict half a pair or a protected span (a worker older
    # than 1.2) is corrected by the SDK before the harness sees it.
    old_worker = Decision(
        "req-x", ("call", "sys", "reply"), Action.COMMIT, ("call", "sys", "reply")
    )
    kept = session._keep_whole(old_worker)
    assert kept.evict == ("reply",)
    assert kept.refused == {"call": "TOOL_PAIR", "sys": "PROTECTED"}
    assert session.disagreements and "kept" in kept.note


async def test_chat_completions_pairs_and_system_prompt() -> None:
    session = SpanguardClient.offline().session("chat-pairs")
    guard = ChatGuard(session)
    items: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Refund order 55012."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "Order 55012: paid twice."},
        {"role": "assistant", "content": "Two payments."},
    ]
    await guard.observe(items)
    assert session.tracker.tool_groups()["out-call_9"] == (session.live[2], "out-call_9")

    # The system prompt rewritten (a changed system item is the same span, modified).
    rewritten = [{"role": "system", "content": "Agent."}, *items[1:]]
    result, outcome = await guard.compact(items, rewritten)
    assert result == items and outcome.vetoed_by == (FaultKind.PROTECTED_SPAN_REWRITTEN,)

    # A trim that keeps the tool message but not the call: both stay, in order.
    result, outcome = await guard.compact(items, [items[0], items[3], items[4]])
    assert outcome.applied and result == items


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"type": "function_call", "call_id": "c", "name": "f"}, (("c",), None)),
        ({"type": "function_call_output", "call_id": "c", "output": "x"}, ((), "c")),
        ({"type": "custom_tool_call", "call_id": "c"}, (("c",), None)),
        ({"type": "custom_tool_call_output", "call_id": "c"}, ((), "c")),
        ({"type": "computer_call", "call_id": "c"}, (("c",), None)),
        ({"type": "computer_call_output", "call_id": "c"}, ((), "c")),
        ({"type": "shell_call", "call_id": "c"}, (("c",), None)),
        ({"type": "local_shell_call_output", "call_id": "c"}, ((), "c")),
        ({"type": "apply_patch_call_output", "call_id": "c"}, ((), "c")),
        ({"type": "mcp_approval_request", "id": "a"}, (("a",), None)),
        ({"type": "mcp_approval_response", "approval_request_id": "a"}, ((), "a")),
        ({"role": "assistant", "tool_calls": [{"id": "x"}, {"id": "y"}]}, (("x", "y"), None)),
        ({"role": "tool", "tool_call_id": "x", "content": "ok"}, ((), "x")),
        ({"role": "user", "content": "hi"}, ((), None)),
        ({"type": "mcp_call", "id": "m"}, ((), None)),
    ],
)
def test_item_tool_ids(item: dict[str, Any], expected: tuple[tuple[str, ...], str | None]) -> None:
    assert item_tool_ids(item) == expected
