"""How an SDK compaction reaches the engine: what a summary replaces is merged by the
``context.rewritten`` (the ``context.compacted`` record counts it), only what disappears
with no successor goes through the gate first; the gate's pin check for the merged
messages is made locally; the adapters advance the session's ``turn``.

The real worker's view of the same flow is in :func:`test_a_real_worker_records_merges`
(Kafka); the rest runs offline (the engine in process) and in real agent loops.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import Message, Session, SpanguardClient, gate_compaction
from spanguard.streams.sdk.adapters.langchain import SpanguardMiddleware
from spanguard.streams.sdk.adapters.langgraph import (
    SpanguardMessagesState,
    spanguard_pre_model_hook,
)
from spanguard.streams.sdk.adapters.openai_chat import ChatGuard
from spanguard.streams.sdk.bridge import run_sync
from tests.pipeline import Pipeline

TASK = Message("task", "Help me plan a quiet weekend away.", role="user")
CHATTER = "we talked about the weather, the trains and which books to pack. "


def _round(n: int) -> list[Message]:
    """Round ``n`` of a conversation: four long turns with no identifiers."""
    return [
        Message(f"r{n}-{i}", f"Round {n}, turn {i}: {CHATTER * 3}", role="user") for i in range(4)
    ]


async def _four_summaries(session: Session) -> list[Any]:
    """Four successive healthy compactions: each round's turns but the last are
    summarised in a few words (the repro of the SDK's former false thrashing)."""
    context = [TASK]
    outcomes = []
    for n in range(4):
        turns = _round(n)
        summary = Message(f"sum-{n}", f"Summary {n}: small talk.")
        outcome = await gate_compaction(
            session, [*context, *turns], [*context, summary, turns[-1]], strategy="summarize"
        )
        outcomes.append(outcome)
        context = list(outcome.messages)
    return outcomes


async def test_four_successive_summaries_are_merged_and_do_not_thrash() -> None:
    session = SpanguardClient.offline().session("four-summaries")

    outcomes = await _four_summaries(session)

    assert session.tracker.turn == 0  # no turn passed: the repro's worst case
    for n, outcome in enumerate(outcomes):
        assert outcome.applied and outcome.fault_kinds == []
        # Nothing disappeared without a successor: the gate was not asked.
        assert outcome.decision is None and outcome.kept == ()
        record = outcome.compaction
        assert record is not None and record.outcome == "clean" and record.faults == []
        assert record.merged == [f"r{n}-{i}" for i in range(3)] and record.removed == []
        assert record.created == [f"sum-{n}"]
        assert record.tokens_before > record.tokens_after
        assert record.spans_before == record.spans_after + 2
    kinds = {f.kind for f in session.faults()}
    assert FaultKind.COMPACTION_THRASHING not in kinds and not kinds


async def test_only_what_no_summary_replaces_goes_through_the_gate() -> None:
    session = SpanguardClient.offline().session("mixed")
    turns = _round(0)
    # The summary replaces turns 1 and 2; turn 0 is trimmed with no successor.
    summary = Message("sum", "Summary: small talk.", derived_from=("r0-1", "r0-2"))
    outcome = await gate_compaction(session, [TASK, *turns], [TASK, summary, turns[3]])

    assert outcome.applied and outcome.fault_kinds == []
    assert outcome.decision is not None and outcome.decision.candidates == ("r0-0",)
    assert outcome.decision.committed == ("r0-0",)
    record = outcome.compaction
    assert record is not None and record.merged == ["r0-1", "r0-2"] and record.removed == []
    assert [m.id for m in outcome.messages] == ["task", "sum", "r0-3"]


ACCOUNT = Message("acct", "My account 8841-C was charged twice.", role="user")
REFERRING = Message("ask", "Please close that account today.", role="user")


async def test_a_summarised_message_a_later_one_refers_to_is_kept_word_for_word() -> None:
    session = SpanguardClient.offline().session("pinned-merge")
    chatter = _round(0)[:2]
    before = [TASK, ACCOUNT, *chatter, REFERRING]
    # A summary that loses the account: "that account" would have nothing to refer to.
    summary = Message("sum", "Summary: small talk.")
    outcome = await gate_compaction(session, before, [TASK, summary, REFERRING])

    assert outcome.applied and outcome.decision is None
    assert outcome.refused == {"acct": "PINNED"} and outcome.pinned == ("acct",)
    [pin] = outcome.pins
    assert pin.span_id == "acct" and pin.pinned_for == ("ask",) and pin.path == ("ask", "acct")
    kept = next(m for m in outcome.messages if m.id == "acct")
    assert kept == ACCOUNT  # restored word for word
    assert [m.id for m in outcome.messages] == ["task", "sum", "acct", "ask"]
    record = outcome.compaction
    assert record is not None and record.merged == ["r0-0", "r0-1"]
    assert FaultKind.REFERENT_DROPPED not in outcome.fault_kinds
    assert outcome.fault_kinds == []


async def test_the_local_pin_check_leaves_the_engine_state_unchanged() -> None:
    client = SpanguardClient.offline()
    session = client.session("pins-pure")
    await session.observe([TASK, ACCOUNT, *_round(0)[:2], REFERRING])
    assert client.engine is not None
    state = client.engine.session("default", "pins-pure")
    snapshot = pickle.dumps(state)

    pins = session.pins_for(["acct", "r0-0", "r0-1", "nobody"])

    assert pins is not None and [p.span_id for p in pins] == ["acct"]
    assert pickle.dumps(state) == snapshot
    # The gate, asked afterwards, pins the same message.
    decision = await session.request_eviction(["acct", "r0-0", "r0-1"], basis="recency")
    assert decision.pinned == ("acct",)


# -- turns in a real loop -------------------------------------------------------------


class _Model:
    """A scripted model: ``turns`` plain answers."""

    def __init__(self) -> None:
        self.calls = 0

    def invoke(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self.calls += 1
        return AIMessage(f"Noted ({self.calls}): {CHATTER}")


def _graph(model: _Model, hook: Any) -> Any:
    def agent(state: SpanguardMessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    built = StateGraph(SpanguardMessagesState)
    built.add_node("pre_model_hook", hook)
    built.add_node("agent", agent)
    built.add_edge(START, "pre_model_hook")
    built.add_edge("pre_model_hook", "agent")
    built.add_edge("agent", END)
    return built.compile(checkpointer=InMemorySaver())


def _thin_compactor(every: int) -> Callable[[list[BaseMessage]], list[BaseMessage] | None]:
    """A compactor that does not compact: at every ``every``-th call, once there are
    three messages after the task, it replaces the oldest two with a summary
    almost as long as they are."""
    calls = 0

    def thin(messages: list[BaseMessage]) -> list[BaseMessage] | None:
        nonlocal calls
        calls += 1
        if calls % every or len(messages) < 4:
            return None
        first, second = messages[1], messages[2]
        words = f"{first.text} {second.text}"
        return [messages[0], HumanMessage(words[: len(words) * 9 // 10]), *messages[3:]]

    return thin


def _play(every: int, name: str) -> tuple[Session, _Model]:
    session = SpanguardClient.offline().session(name)
    model = _Model()
    hook = spanguard_pre_model_hook(session, _thin_compactor(every), faults_key=None)
    loop = _graph(model, hook)
    thread: Any = {"configurable": {"thread_id": name}}
    loop.invoke({"messages": [HumanMessage(TASK.text)]}, thread)
    for n in range(11):
        loop.invoke({"messages": [HumanMessage(f"Turn {n}: {CHATTER}")]}, thread)
    return session, model


def test_the_hook_advances_the_turn_once_per_model_call() -> None:
    session, model = _play(every=1, name="thin-every-turn")
    assert model.calls == 12 and session.tracker.turn == model.calls
    # Thin compactions at every model call are the thrashing the fault is for.
    kinds = [f.kind for f in session.faults()]
    assert FaultKind.COMPACTION_THRASHING in kinds


def test_thin_compactions_turns_apart_do_not_thrash() -> None:
    # The same compactor every third model call: the turns between them now count.
    session, model = _play(every=3, name="thin-every-third")
    assert session.tracker.turn == model.calls == 12
    assert FaultKind.COMPACTION_THRASHING not in [f.kind for f in session.faults()]


class _NoCompaction(AgentMiddleware[Any, Any]):
    """A compactor that never compacts (the guard then only reports)."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


class _CountCalls(AgentMiddleware[Any, Any]):
    """Counts the agent's model calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.calls += 1
        return handler(request)


def test_two_langchain_guards_advance_the_turn_once_per_model_call(
    scripted_chat_model: Callable[[Sequence[Any]], Any],
    agent_script: Callable[[int], list[Any]],
    account_tool: Any,
    play: Callable[..., dict[str, Any]],
) -> None:
    session = SpanguardClient.offline().session("lc-turns")
    reporter = SpanguardMiddleware(session)
    guard = SpanguardMiddleware(session, compactor=_NoCompaction())
    counter = _CountCalls()
    agent = create_agent(
        scripted_chat_model(agent_script(6)),
        [account_tool],
        middleware=[reporter, guard, counter],
        checkpointer=InMemorySaver(),
    )
    play(agent)
    # Both guards wrap every model call; the session's turn counts each call once.
    assert counter.calls > 3 and session.tracker.turn == counter.calls


async def test_chat_guard_turns_follow_observe_not_compact() -> None:
    session = SpanguardClient.offline().session("chat-turns")
    guard = ChatGuard(session)
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK.text}]
    for n in range(3):
        await guard.observe(items)  # before each model call
        items.append({"role": "assistant", "content": f"Answer {n}: {CHATTER}"})
    assert session.tracker.turn == 3
    await guard.compact(items, [items[0], {"role": "user", "content": "Summary."}])
    assert session.tracker.turn == 3
    manual = ChatGuard(SpanguardClient.offline().session("manual"), advance_turn=False)
    await manual.observe(items)
    assert manual.session.tracker.turn == 0


# -- the worker's own records ------------------------------------------------------------


@pytest.mark.kafka
def test_a_real_worker_records_merges(pipeline: Pipeline) -> None:
    from spanguard.streams.sdk import SyncSpanguardClient

    worker = pipeline.start_worker("w1")
    worker.wait_ready()
    with (
        SyncSpanguardClient.kafka(pipeline.bootstrap, pipeline.prefix, timeout=60) as client,
        SyncSpanguardClient.kafka(
            pipeline.bootstrap, pipeline.prefix, timeout=60, mirror=False
        ) as blind,
    ):
        mirrored = client.session("merged-1").session
        outcomes = run_sync(mirrored, _four_summaries(mirrored))
        # Without a mirror the SDK cannot check a merge: the gate evicts first.
        fallback = blind.session("gated-1").session
        [first, *_] = run_sync(fallback, _four_summaries(fallback))
    assert all(o.applied and o.decision is None for o in outcomes)
    assert first.applied and first.decision is not None
    assert first.decision.committed == ("r0-0", "r0-1", "r0-2")

    def records(raw: list[bytes]) -> list[dict[str, Any]]:
        return [orjson.loads(r) for r in raw]

    def done(raw: list[bytes]) -> bool:
        compacted = [r for r in records(raw) if r["type"] == "context.compacted"]
        return len(compacted) == 8

    topics = [pipeline.topic("compactions"), pipeline.topic("faults")]
    got = records(pipeline.read_topics(topics, done))
    compacted = {
        s: [r for r in got if r["type"] == "context.compacted" and r["session_id"] == s]
        for s in ("merged-1", "gated-1")
    }
    for n, record in enumerate(compacted["merged-1"]):
        assert record["merged"] == [f"r{n}-{i}" for i in range(3)] and record["removed"] == []
        assert record["tokens_before"] > record["tokens_after"]
        assert record["faults"] == [] and record["outcome"] == "clean"
    thrashing = [r for r in got if r["type"] == "integrity.fault"]
    assert [r["session_id"] for r in thrashing if r["kind"] == "COMPACTION_THRASHING"] == [
        "gated-1"
    ]
    # The fallback's records: the summaries look like growth (the documented limit).
    assert all(r["merged"] == [] for r in compacted["gated-1"])
    assert all(r["tokens_after"] > r["tokens_before"] for r in compacted["gated-1"])
