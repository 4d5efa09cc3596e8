"""Pydantic AI: a real ``Agent`` loop (tool calls included) with a scripted ``FunctionModel``
(no network), the history compacted by a history processor or by ``pydantic-ai-harness``'s
own compaction, gated by ``SpanguardHistory`` on an offline client (the engine in process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.compaction import SlidingWindowCompaction, TieredCompaction

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import SpanguardClient, SpanguardFaultError
from spanguard.streams.sdk.adapters.pydantic_ai import (
    History,
    SpanguardHistory,
    message_span,
    spanguard_faults,
)

SUMMARY = "The user chatted about pets, weather and books."
SYSTEM_PROMPT = "You are the billing agent. Never close an account without consent."


class Scripted:
    """The model: a call of the account tool on the first request, then "Noted (n)."; it
    records every request's messages (what the model would see)."""

    def __init__(self) -> None:
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        if len(self.requests) == 1:
            call = ToolCallPart("lookup_account", {"account": "8841-C"}, tool_call_id="call-1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(f"Noted ({len(self.requests)}).")])


def lookup_account(account: str) -> str:
    """Look an account up."""
    return f"Account {account}: two charges of 40 EUR for order 55012."


def _agent(model: Scripted, *capabilities: Any, **options: Any) -> Agent[None, str]:
    return Agent(
        FunctionModel(model), tools=[lookup_account], capabilities=list(capabilities), **options
    )


async def _play(agent: Agent[None, str], turns: Sequence[str]) -> History:
    history: History = []
    for text in turns:
        result = await agent.run(text, message_history=history)
        history = result.all_messages()
    return history


def _turns(scenario: dict[str, Any]) -> list[str]:
    return [scenario["account"], *scenario["chatter"], scenario["referring"]]


def _texts(messages: Sequence[ModelMessage]) -> str:
    return "\n".join(message_span(m).text for m in messages)


def _summariser(summary: str, at: int = 11) -> Callable[[History], History]:
    """A history processor: from ``at`` messages on (by default the scenario's last request,
    the turn that says "that account"), a summary and the last two messages."""

    def summarise(messages: History) -> History:
        if len(messages) < at:
            return messages
        return [ModelRequest(parts=[UserPromptPart(summary)]), *messages[-2:]]

    return summarise


def _orphans(messages: Sequence[ModelMessage]) -> set[str]:
    spans = [message_span(m) for m in messages]
    return {c for s in spans for c in s.calls} ^ {a for s in spans for a in s.answers}


async def test_summary_that_drops_the_referred_account_keeps_it_pinned(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("pai-pin")
    guard = SpanguardHistory(session, _summariser(SUMMARY))
    model = Scripted()

    history = await _play(_agent(model, guard), _turns(scenario))

    [outcome] = guard.outcomes
    assert outcome.applied and outcome.pinned, outcome
    last = _texts(model.requests[-1])
    # The model's last request holds the summary, the account's tool call and result
    # (pinned: "that account"), and the task (protected), ahead of the summary.
    assert "Account 8841-C: two charges" in last and SUMMARY in last
    assert last.index(scenario["account"]) < last.index(SUMMARY)
    assert scenario["chatter"][0] not in last and _orphans(model.requests[-1]) == set()
    assert scenario["chatter"][0] not in _texts(history)  # the run's history is compacted
    record = outcome.compaction
    assert record is not None and record.merged and record.tokens_before > record.tokens_after
    assert record.strategy == "summarise"
    assert spanguard_faults(history) == []


async def test_without_the_guard_the_same_summary_loses_the_account(
    scenario: dict[str, Any],
) -> None:
    # The control: the same history processor alone drops the tool result.
    model = Scripted()
    await _play(_agent(model, ProcessHistory(_summariser(SUMMARY))), _turns(scenario))
    assert "Account 8841-C: two charges" not in _texts(model.requests[-1])


@pytest.mark.parametrize(
    ("summary", "kind"),
    [("", FaultKind.EMPTY_SUMMARY), ("A very long summary. " * 400, FaultKind.SUMMARY_BALLOONING)],
)
async def test_empty_or_ballooning_summary_is_vetoed_and_in_the_history(
    scenario: dict[str, Any], summary: str, kind: FaultKind
) -> None:
    session = SpanguardClient.offline().session(f"pai-{kind}")
    guard = SpanguardHistory(session, _summariser(summary, at=6))
    model = Scripted()

    history = await _play(_agent(model, guard), _turns(scenario))

    assert guard.outcomes and all(o.vetoed_by == (kind,) for o in guard.outcomes)
    assert {f["kind"] for f in spanguard_faults(history)} == {kind}
    assert len(spanguard_faults(history)) == len(guard.outcomes)
    last = _texts(model.requests[-1])
    assert scenario["chatter"][0] in last and "A very long summary" not in last


async def test_raise_on_stops_the_run_with_the_fault(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("pai-raise")
    guard = SpanguardHistory(session, _summariser("", at=6), raise_on={FaultKind.EMPTY_SUMMARY})
    with pytest.raises(SpanguardFaultError) as raised:
        await _play(_agent(Scripted(), guard), _turns(scenario))
    assert raised.value.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)


def _split_after_the_call(messages: History) -> History:
    """A naive processor: everything before the last tool return becomes a summary (the
    tool call is summarised away, its return stays)."""
    cut = next(
        (i for i in range(len(messages) - 1, 0, -1) if message_span(messages[i]).answers), None
    )
    if cut is None:
        return messages
    return [ModelRequest(parts=[UserPromptPart("Summary: a lookup.")]), *messages[cut:]]


async def test_a_summary_that_splits_a_tool_pair_is_vetoed(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("pai-split")
    guard = SpanguardHistory(session, _split_after_the_call)
    model = Scripted()

    history = await _play(_agent(model, guard), [scenario["account"]])

    assert guard.outcomes and {o.vetoed_by for o in guard.outcomes} == {
        (FaultKind.TOOL_PAIR_SPLIT,)
    }
    assert "tool call 'call-1' split" in guard.outcomes[0].note
    assert {f["evidence"]["tool_call_id"] for f in spanguard_faults(history)} == {"call-1"}
    assert all(_orphans(request) == set() for request in model.requests)


def _condense_system_prompt(messages: History) -> History:
    """A processor that shortens the system prompt (a copy of the first request: the same
    message, rewritten)."""
    first = messages[0]
    assert isinstance(first, ModelRequest)
    parts = [
        SystemPromptPart("Billing agent.") if p.part_kind == "system-prompt" else p
        for p in first.parts
    ]
    return [dataclasses.replace(first, parts=parts), *messages[1:]]


async def test_a_rewritten_system_prompt_is_vetoed(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("pai-system")
    guard = SpanguardHistory(session, _condense_system_prompt)
    model = Scripted()

    history = await _play(_agent(model, guard, system_prompt=SYSTEM_PROMPT), [scenario["account"]])

    assert guard.outcomes and {o.vetoed_by for o in guard.outcomes} == {
        (FaultKind.PROTECTED_SPAN_REWRITTEN,)
    }
    assert {f["kind"] for f in spanguard_faults(history)} == {FaultKind.PROTECTED_SPAN_REWRITTEN}
    assert all(SYSTEM_PROMPT in _texts(request) for request in model.requests)
    assert session.tracker.live[message_span(history[0]).id].protected


async def test_harness_sliding_window_keeps_the_referred_account(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("pai-harness")
    guard = SpanguardHistory(session)
    window = SlidingWindowCompaction(max_messages=100, keep_messages=2)
    tiers = TieredCompaction(tiers=[guard.gated(window)], target_tokens=320, tokenizer=_per_text)
    model = Scripted()

    history = await _play(_agent(model, guard, tiers), _turns(scenario))

    [outcome] = guard.outcomes
    assert outcome.applied and outcome.decision is not None and outcome.decision.pinned
    last = _texts(model.requests[-1])
    assert "Account 8841-C: two charges" in last and _orphans(model.requests[-1]) == set()
    assert scenario["chatter"][0] not in last
    assert outcome.compaction is not None and outcome.compaction.strategy == (
        "SlidingWindowCompaction"
    )
    assert spanguard_faults(history) == []


def _per_text(text: str) -> int:
    """TieredCompaction's tokenizer in the harness test: 100 tokens per text, so that its
    target (320) is first exceeded at the scenario's last request (the turn that says "that
    account"; the estimates run 100, 166, 180, 237, 300, 351 with the model's usage)."""
    return 100
