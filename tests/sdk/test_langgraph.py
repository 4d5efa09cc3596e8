"""LangGraph with the spanguard pre-model hook: a real graph loop, a scripted model.

The graph is the classic agent loop (pre-model hook -> model -> tools -> ...)
built with ``StateGraph``, ``ToolNode`` and ``tools_condition``; the compactor
is a scripted summariser; the client is offline (the engine in process).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import SpanguardClient
from spanguard.streams.sdk.adapters.langgraph import (
    SpanguardMessagesState,
    spanguard_pre_model_hook,
)

Model = Callable[[Sequence[Any]], Any]
Compactor = Callable[[list[BaseMessage]], Sequence[BaseMessage] | None]
Play = Callable[..., dict[str, Any]]
THREAD: Any = {"configurable": {"thread_id": "t-1"}}


@pytest.fixture
def graph(account_tool: Any) -> Callable[..., Any]:
    """The classic agent loop (hook -> model -> tools -> hook ...) around ``model``, with
    ``hook`` as its pre-model node; the model node is async when ``asynchronous``."""

    def build(model: Any, hook: Any, *, asynchronous: bool = False) -> Any:
        def agent(state: SpanguardMessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        async def aagent(state: SpanguardMessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        built = StateGraph(SpanguardMessagesState)
        built.add_node("pre_model_hook", hook)
        built.add_node("agent", aagent if asynchronous else agent)
        built.add_node("tools", ToolNode([account_tool]))
        built.add_edge(START, "pre_model_hook")
        built.add_edge("pre_model_hook", "agent")
        built.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
        built.add_edge("tools", "pre_model_hook")
        return built.compile(checkpointer=InMemorySaver())

    return build


def _summariser(summary: str, at: int) -> Compactor:
    """Summarise everything but the last two messages once there are ``at`` of them."""

    def compact(messages: list[BaseMessage]) -> list[BaseMessage] | None:
        if len(messages) < at:
            return None
        return [HumanMessage(summary), *messages[-2:]]

    return compact


def _texts(state: dict[str, Any]) -> list[str]:
    return [str(m.text) for m in state["messages"]]


@pytest.fixture
def model(scripted_chat_model: Model, agent_script: Callable[[int], list[Any]]) -> Any:
    """The scripted model for six turns."""
    return scripted_chat_model(agent_script(6))


def test_summary_that_drops_the_referred_account_keeps_it_pinned(
    model: Any, graph: Callable[..., Any], play: Play, scenario: dict[str, Any]
) -> None:
    session = SpanguardClient.offline().session("lg-pin")
    hook = spanguard_pre_model_hook(session, _summariser("Summary: small talk.", at=11))
    result = play(graph(model, hook))

    [outcome] = hook.outcomes
    # The summarised messages are merged, not evicted: the SDK's pin check kept them.
    assert outcome.applied and outcome.pinned
    record = outcome.compaction
    assert record is not None and record.merged and record.tokens_before > record.tokens_after
    texts = _texts(result)
    # The user's first message (the task) is protected: it stays ahead of the summary.
    assert texts[:2] == [scenario["account"], "Summary: small talk."]
    assert any("Account 8841-C: two charges" in t for t in texts)
    assert scenario["chatter"][0] not in texts
    # A pre-model hook sees the model's last answer at the next turn.
    assert session.live == [m.id for m in result["messages"][:-1]]


def test_empty_summary_is_vetoed_and_the_messages_stay(
    model: Any, graph: Callable[..., Any], play: Play, scenario: dict[str, Any]
) -> None:
    session = SpanguardClient.offline().session("lg-empty")
    hook = spanguard_pre_model_hook(session, _summariser("", at=11))
    result = play(graph(model, hook))

    assert FaultKind.EMPTY_SUMMARY in [f["kind"] for f in result["spanguard_faults"]]
    texts = _texts(result)
    assert not any(isinstance(m, HumanMessage) and not m.text for m in result["messages"])
    assert scenario["account"] in texts and scenario["chatter"][0] in texts


def _condense_tool_results(messages: list[BaseMessage]) -> list[BaseMessage] | None:
    # A harness's own compaction: long tool results rewritten in place (same id).
    if not any(isinstance(m, ToolMessage) and "order" in m.text for m in messages):
        return None
    return [
        ToolMessage(content="8841-C: charged twice.", tool_call_id=m.tool_call_id, id=m.id)
        if isinstance(m, ToolMessage)
        else m
        for m in messages
    ]


@pytest.mark.parametrize("carry_scores", [True, False])
def test_rewrite_that_keeps_stale_scores_raises_the_fault(
    scripted_chat_model: Model,
    agent_script: Callable[[int], list[Any]],
    graph: Callable[..., Any],
    play: Play,
    carry_scores: bool,
) -> None:
    session = SpanguardClient.offline().session(f"lg-stale-{carry_scores}")
    scored: set[str] = set()

    def score_then_condense(messages: list[BaseMessage]) -> list[BaseMessage] | None:
        # The harness scores what it has not scored yet, then compacts.
        fresh = [m for m in messages if m.id in session.live and m.id not in scored]
        if fresh:
            from spanguard.streams.sdk.bridge import run_sync

            run_sync(session, session.score({str(m.id): 0.5 for m in fresh}, scorer="r-v1"))
            scored.update(str(m.id) for m in fresh)
        return _condense_tool_results(messages)

    reporter = spanguard_pre_model_hook(session)
    hook = spanguard_pre_model_hook(session, score_then_condense, carry_scores=carry_scores)

    def both(state: dict[str, Any]) -> dict[str, Any]:
        reporter(state)
        return hook(state)

    result = play(graph(scripted_chat_model(agent_script(3)), both), chatter=1)

    kinds = [f["kind"] for f in result.get("spanguard_faults", [])]
    if carry_scores:
        assert kinds.count(FaultKind.REWRITE_WITHOUT_INVALIDATION) == 1
    else:
        assert FaultKind.REWRITE_WITHOUT_INVALIDATION not in kinds
    assert "8841-C: charged twice." in _texts(result)


async def test_async_graph_gets_the_same_pins(
    model: Any,
    graph: Callable[..., Any],
    aplay: Callable[[Any], Awaitable[dict[str, Any]]],
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("lg-async")
    hook = spanguard_pre_model_hook(session, _summariser("Summary: small talk.", at=11))
    state = await aplay(graph(model, hook.ahook, asynchronous=True))
    [outcome] = hook.outcomes
    assert outcome.applied and outcome.kept
    assert scenario["account"] in _texts(state)


# -- contract 1.2: tool pairs and protected messages in the graph loop ---------------

SYSTEM_PROMPT = "You are the billing agent. Never close an account without the user's consent."


def _split_after_the_call(messages: list[BaseMessage]) -> list[BaseMessage] | None:
    """A naive summariser: everything up to the last tool result becomes a summary, the
    result and what follows stay (the call is summarised away, its result is not)."""
    cut = next(
        (i for i in range(len(messages) - 1, 0, -1) if isinstance(messages[i], ToolMessage)),
        None,
    )
    return None if cut is None else [HumanMessage("Summary: a lookup."), *messages[cut:]]


def _condense_system_prompt(messages: list[BaseMessage]) -> list[BaseMessage] | None:
    """Shortens the system prompt in place (same id, new text)."""
    if not any(isinstance(m, SystemMessage) and m.text == SYSTEM_PROMPT for m in messages):
        return None
    return [
        SystemMessage("Billing agent.", id=m.id) if isinstance(m, SystemMessage) else m
        for m in messages
    ]


@pytest.mark.parametrize(
    ("compactor", "kind"),
    [
        (_split_after_the_call, FaultKind.TOOL_PAIR_SPLIT),
        (_condense_system_prompt, FaultKind.PROTECTED_SPAN_REWRITTEN),
    ],
)
def test_a_split_pair_or_a_rewritten_system_prompt_is_vetoed(
    model: Any,
    graph: Callable[..., Any],
    scenario: dict[str, Any],
    compactor: Compactor,
    kind: FaultKind,
) -> None:
    session = SpanguardClient.offline().session(f"lg-veto-{kind}")
    hook = spanguard_pre_model_hook(session, compactor)
    loop = graph(model, hook)
    first = [SystemMessage(SYSTEM_PROMPT), HumanMessage(scenario["account"])]
    result = loop.invoke({"messages": first}, THREAD)
    result = loop.invoke({"messages": [HumanMessage(scenario["referring"])]}, THREAD)

    assert hook.outcomes and {o.vetoed_by for o in hook.outcomes} == {(kind,)}
    assert {f["kind"] for f in result["spanguard_faults"]} == {kind}
    messages = result["messages"]
    assert messages[0].text == SYSTEM_PROMPT
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    assert calls == {m.tool_call_id for m in messages if isinstance(m, ToolMessage)} == {"call-1"}


def test_a_summary_of_the_whole_pair_is_applied(
    model: Any, graph: Callable[..., Any], scenario: dict[str, Any]
) -> None:
    session = SpanguardClient.offline().session("lg-whole")
    summary = "Summary: lookup_account found two charges on account 8841-C for order 55012."
    hook = spanguard_pre_model_hook(session, _summariser(summary, at=8))
    loop = graph(model, hook)
    result = loop.invoke({"messages": [HumanMessage(scenario["account"])]}, THREAD)
    for text in scenario["chatter"]:
        result = loop.invoke({"messages": [HumanMessage(text)]}, THREAD)

    [outcome] = hook.outcomes
    assert outcome.applied and outcome.fault_kinds == []
    texts = _texts(result)
    assert texts[:2] == [scenario["account"], summary]
    assert not any(isinstance(m, ToolMessage) for m in result["messages"])
