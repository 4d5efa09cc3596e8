"""OpenAI-style lists: plain Chat Completions messages, and the OpenAI Agents SDK.

The Agents SDK test runs ``Runner.run`` (its real agent loop, tool calls
included) with a scripted ``Model`` (no network, tracing off) on a
``SQLiteSession`` wrapped by ``SpanguardAgentsSession``; the runner calls the
wrapper's ``run_compaction`` after each turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import Session, SpanguardClient, SpanguardFaultError
from spanguard.streams.sdk.adapters.openai_chat import ChatGuard, SpanguardAgentsSession, item_text

Compactor = Callable[[list[Any]], list[Any] | None]


@function_tool
def lookup_account(account: str) -> str:
    """Look an account up."""
    return f"Account {account}: two charges of 40 EUR for order 55012."


class ScriptedModel(Model):
    """Answers from a script: a tool call first, then numbered replies."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        n = self.calls
        output: list[Any]
        if n == 1:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id="fc_1",
                    call_id="call_1",
                    name="lookup_account",
                    arguments='{"account": "8841-C"}',
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text=f"Noted ({n}).", annotations=[])
            output = [
                ResponseOutputMessage(
                    type="message",
                    id=f"msg_{n}",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=f"resp_{n}")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests do not stream")


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)  # tracing would export to the network


def _summariser(summary: str, at: int) -> Compactor:
    def compact(items: list[Any]) -> list[Any] | None:
        if len(items) < at:
            return None
        return [{"role": "user", "content": summary}, *items[-2:]]

    return compact


async def _run(session: SpanguardAgentsSession, scenario: dict[str, Any]) -> list[Any]:
    agent = Agent(name="support", model=ScriptedModel(), tools=[lookup_account])
    for text in [scenario["account"], *scenario["chatter"], scenario["referring"]]:
        await Runner.run(agent, text, session=session)
    return await session.get_items()


async def test_agents_summary_that_drops_the_referred_account_keeps_it_pinned(
    scenario: dict[str, Any],
) -> None:
    guard_session = SpanguardClient.offline().session("oa-pin")
    session = SpanguardAgentsSession(
        SQLiteSession("oa-pin"), guard_session, _summariser("Summary: small talk.", at=12)
    )
    items = await _run(session, scenario)

    [outcome] = session.guard.outcomes
    # The summarised items are merged, not evicted: the SDK's pin check kept them.
    assert outcome.applied and outcome.pinned
    record = outcome.compaction
    assert record is not None and record.merged and record.tokens_before > record.tokens_after
    texts = [item_text(i) for i in items]
    # The user's first message (the task) is protected: it stays ahead of the summary.
    assert texts[:2] == [scenario["account"], "Summary: small talk."]
    assert any("Account 8841-C: two charges" in t for t in texts)
    assert any(i.get("type") == "function_call" for i in items)  # the call kept its output
    assert scenario["chatter"][0] not in texts


async def test_agents_empty_summary_is_vetoed_and_raised(scenario: dict[str, Any]) -> None:
    guard_session = SpanguardClient.offline().session("oa-empty")
    session = SpanguardAgentsSession(
        SQLiteSession("oa-empty"),
        guard_session,
        _summariser("", at=12),
        raise_on={FaultKind.EMPTY_SUMMARY},
    )
    with pytest.raises(SpanguardFaultError) as raised:
        await _run(session, scenario)
    assert raised.value.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)
    items = await session.get_items()
    texts = [item_text(i) for i in items]
    assert scenario["account"] in texts and scenario["chatter"][0] in texts
    assert not any(i.get("role") == "user" and not item_text(i) for i in items)


def _scoring_condenser(guard_session: Session, scored: set[str]) -> Callable[[list[Any]], Any]:
    async def compact(items: list[Any]) -> list[Any] | None:
        fresh = {span_id: 0.5 for span_id in guard_session.live if span_id not in scored}
        if fresh:  # the harness scores what it has not scored yet
            await guard_session.score(fresh, scorer="r-v1")
            scored.update(fresh)
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        if not outputs or "order" not in str(outputs[0]["output"]):
            return None
        return [
            {**i, "output": "8841-C: charged twice."}
            if i.get("type") == "function_call_output"
            else i
            for i in items
        ]

    return compact


@pytest.mark.parametrize("carry_scores", [True, False])
async def test_agents_rewrite_that_keeps_stale_scores_raises_the_fault(
    scenario: dict[str, Any], carry_scores: bool
) -> None:
    guard_session = SpanguardClient.offline().session(f"oa-stale-{carry_scores}")
    session = SpanguardAgentsSession(
        SQLiteSession("oa-stale"),
        guard_session,
        _scoring_condenser(guard_session, set()),
        carry_scores=carry_scores,
        raise_on={FaultKind.REWRITE_WITHOUT_INVALIDATION},
    )
    short = {**scenario, "chatter": scenario["chatter"][:1]}
    if carry_scores:
        with pytest.raises(SpanguardFaultError) as raised:
            await _run(session, short)
        assert raised.value.outcome.fault_kinds == [FaultKind.REWRITE_WITHOUT_INVALIDATION]
    else:
        await _run(session, short)
        assert FaultKind.REWRITE_WITHOUT_INVALIDATION not in [f.kind for f in session.faults]
    texts = [item_text(i) for i in await session.get_items()]
    assert "8841-C: charged twice." in texts


async def test_chat_completions_list_keeps_the_referred_message(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("oa-chat")
    guard = ChatGuard(session)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for text in [scenario["account"], *scenario["chatter"], scenario["referring"]]:
        messages.append({"role": "user", "content": text})
        await guard.observe(messages)
        messages.append({"role": "assistant", "content": f"Noted ({len(messages)})."})
    compacted = [messages[0], {"role": "user", "content": "Summary: small talk."}, *messages[-2:]]

    result, outcome = await guard.compact(messages, compacted)

    assert outcome.applied and outcome.decision is not None
    contents = [m["content"] for m in result]
    # The system prompt and the user's first message are protected: both stay in place.
    assert contents[:3] == ["You are helpful.", scenario["account"], "Summary: small talk."]
    assert outcome.decision.refused[outcome.kept[0]] == "PROTECTED"
    assert scenario["chatter"][0] not in contents
    assert all("spanguard" not in key for m in result for key in m)  # items are not modified


# -- contract 1.2: tool pairs and protected items in the Agents SDK loop ---------------


def _split_after_the_call(items: list[Any]) -> list[Any] | None:
    """A naive summariser: everything before the last tool output becomes a summary, the
    output and what follows stay (the ``function_call`` is summarised away)."""
    cut = next(
        (i for i in range(len(items) - 1, 0, -1) if items[i].get("type") == "function_call_output"),
        None,
    )
    return (
        None if cut is None else [{"role": "user", "content": "Summary: a lookup."}, *items[cut:]]
    )


def _orphans(items: list[Any]) -> set[str]:
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    return calls ^ outputs


async def test_agents_summary_that_splits_a_tool_pair_is_vetoed(scenario: dict[str, Any]) -> None:
    guard_session = SpanguardClient.offline().session("oa-split")
    session = SpanguardAgentsSession(
        SQLiteSession("oa-split"),
        guard_session,
        _split_after_the_call,
        raise_on={FaultKind.TOOL_PAIR_SPLIT},
    )
    agent = Agent(name="support", model=ScriptedModel(), tools=[lookup_account])
    with pytest.raises(SpanguardFaultError) as raised:
        await Runner.run(agent, scenario["account"], session=session)

    outcome = raised.value.outcome
    assert not outcome.applied and outcome.vetoed_by == (FaultKind.TOOL_PAIR_SPLIT,)
    assert "tool call 'call_1' split" in outcome.note
    [fault] = outcome.faults
    assert fault.evidence["tool_call_id"] == "call_1"
    items = await session.get_items()
    assert _orphans(items) == set() and [i.get("type") for i in items].count("function_call") == 1
    # The tracker read the pair from the Responses items themselves.
    assert guard_session.tracker.pairs()["call_1"] == (["fc_1"], ["out-call_1"])


async def test_agents_rolling_summary_of_the_whole_pair_is_applied(
    scenario: dict[str, Any],
) -> None:
    guard_session = SpanguardClient.offline().session("oa-whole")
    summary = "Summary: lookup_account found two charges on account 8841-C for order 55012."
    session = SpanguardAgentsSession(
        SQLiteSession("oa-whole"), guard_session, _summariser(summary, at=8)
    )
    agent = Agent(name="support", model=ScriptedModel(), tools=[lookup_account])
    for text in [scenario["account"], *scenario["chatter"][:2]]:
        await Runner.run(agent, text, session=session)

    [outcome] = session.guard.outcomes
    assert outcome.applied and outcome.fault_kinds == [] and session.faults == []
    items = await session.get_items()
    texts = [item_text(i) for i in items]
    assert texts[:2] == [scenario["account"], summary]  # the task stays, verbatim
    assert not any(i.get("type", "").startswith("function_call") for i in items)
    assert outcome.compaction is not None and outcome.compaction.strategy == "compact"
