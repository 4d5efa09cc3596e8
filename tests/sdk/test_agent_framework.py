"""Microsoft Agent Framework: a real ``Agent`` loop (tool calls included) with a scripted
chat client (no network), the framework's own compaction strategies wrapped by
``SpanguardCompaction`` on an offline client (the engine in process).

The guard runs as the agent's ``compaction_strategy`` (before every model call) and
as a ``ContextProvider`` (the faults of each run land in the session's state).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

import pytest
from agent_framework import (
    EXCLUDED_KEY,
    GROUP_ANNOTATION_KEY,
    SUMMARY_OF_MESSAGE_IDS_KEY,
    Agent,
    AgentSession,
    BaseChatClient,
    ChatResponse,
    CompactionProvider,
    CompactionStrategy,
    Content,
    FunctionInvocationLayer,
    InMemoryHistoryProvider,
    Message,
    SummarizationStrategy,
    included_messages,
    tool,
)

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import SpanguardClient, SpanguardFaultError
from spanguard.streams.sdk.adapters.agent_framework import SpanguardCompaction

SUMMARY = "The user chatted about pets, weather and books."
SYSTEM_PROMPT = "You are the billing agent. Never close an account without consent."


class ScriptedClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Answers from a script (a call of the account tool, then texts); records every
    request it gets (the messages the model would see)."""

    def __init__(self, script: Sequence[Message | str] = (), default: str = "Noted.") -> None:
        super().__init__()
        self.script = list(script)
        self.default = default
        self.requests: list[list[Message]] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Awaitable[ChatResponse[Any]]:
        async def answer() -> ChatResponse[Any]:
            self.requests.append(list(messages))
            step = self.script.pop(0) if self.script else self.default
            if isinstance(step, str):
                step = Message(role="assistant", contents=[step])
            return ChatResponse(messages=[step])

        return answer()


@tool
def lookup_account(account: str) -> str:
    """Look an account up."""
    return f"Account {account}: two charges of 40 EUR for order 55012."


def _call() -> Message:
    call = Content.from_function_call(
        call_id="call-1", name="lookup_account", arguments={"account": "8841-C"}
    )
    return Message(role="assistant", contents=[call])


def _summariser(summary: str, threshold: int = 7) -> SummarizationStrategy:
    """The framework's summarisation (a scripted summary model): at more than ``2 +
    threshold`` included messages, the oldest are summarised and about 2 are kept (by
    default first at the scenario's last model call, the turn that says "that
    account")."""
    return SummarizationStrategy(
        client=ScriptedClient(default=summary), target_count=2, threshold=threshold
    )


def _agent(model: ScriptedClient, guard: CompactionStrategy, *providers: Any) -> Agent[Any]:
    return Agent(
        client=model,
        tools=[lookup_account],
        compaction_strategy=guard,
        context_providers=[InMemoryHistoryProvider(), *providers],
    )


async def _play(agent: Agent[Any], turns: Sequence[str]) -> AgentSession:
    thread = agent.create_session()
    for text in turns:
        await agent.run(text, session=thread)
    return thread


def _turns(scenario: dict[str, Any]) -> list[str]:
    return [scenario["account"], *scenario["chatter"], scenario["referring"]]


def _texts(messages: Sequence[Message]) -> str:
    return "\n".join(f"{m.role}: {m.text} {[c.result for c in m.contents]}" for m in messages)


def _orphans(messages: Sequence[Message]) -> set[str]:
    calls = {c.call_id for m in messages for c in m.contents if c.type == "function_call"}
    results = {c.call_id for m in messages for c in m.contents if c.type == "function_result"}
    return {str(c) for c in calls ^ results}


async def test_summary_that_drops_the_referred_account_keeps_it_pinned(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("af-pin")
    guard = SpanguardCompaction(session, _summariser(SUMMARY))
    model = ScriptedClient([_call(), "I see two charges."])

    thread = await _play(_agent(model, guard, guard), _turns(scenario))

    last = _texts(model.requests[-1])
    # The last request (the turn that says "that account") still holds the account's
    # tool call and result: pinned, kept verbatim; the chatter went into the summary.
    assert "Account 8841-C: two charges" in last and SUMMARY in last
    assert scenario["chatter"][0] not in last
    assert _orphans(model.requests[-1]) == set()
    final = guard.outcomes[-1]
    assert final.applied and final.pinned, final
    assert {p.span_id for p in final.pins} == set(final.pinned)
    record = final.compaction
    assert record is not None and record.merged and record.tokens_before > record.tokens_after
    assert record.strategy == "SummarizationStrategy"
    # The task (the first user message) is protected: it stays, ahead of the summary.
    assert last.index(scenario["account"]) < last.index(SUMMARY)
    assert thread.state.get("spanguard_faults", []) == []


async def test_without_the_guard_the_same_summary_loses_the_account(
    scenario: dict[str, Any],
) -> None:
    # The control: the framework's summarisation alone drops the tool result.
    model = ScriptedClient([_call(), "I see two charges."])
    await _play(_agent(model, _summariser(SUMMARY)), _turns(scenario))
    assert "Account 8841-C: two charges" not in _texts(model.requests[-1])


async def test_ballooning_summary_is_vetoed_and_the_fault_is_in_the_session_state(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("af-balloon")
    guard = SpanguardCompaction(session, _summariser("A very long summary. " * 400, 2))
    model = ScriptedClient([_call(), "I see two charges."])

    thread = await _play(_agent(model, guard, guard), _turns(scenario))

    assert guard.outcomes and all(not o.applied for o in guard.outcomes)
    assert {o.vetoed_by for o in guard.outcomes} == {(FaultKind.SUMMARY_BALLOONING,)}
    kinds = {f["kind"] for f in thread.state["spanguard_faults"]}
    assert kinds == {FaultKind.SUMMARY_BALLOONING}
    # The model never saw the summary: every message stayed, included, unmarked.
    last = model.requests[-1]
    assert "A very long summary" not in _texts(last) and scenario["chatter"][0] in _texts(last)
    stored = thread.state["in_memory"]["messages"]
    assert not any(m.additional_properties.get(EXCLUDED_KEY) for m in stored)


class _EmptySummary:
    """A harness's own strategy: everything but the last two messages becomes an empty
    summary (the summariser failed)."""

    async def __call__(self, messages: list[Message]) -> bool:
        included = included_messages(messages)
        if len(included) < 6:
            return False
        old = included[:-2]
        for message in old:
            message.additional_properties[EXCLUDED_KEY] = True
        ids = [str(m.message_id) for m in old]
        summary = Message(
            role="assistant",
            contents=[""],
            message_id=f"summary-{len(messages)}",
            additional_properties={GROUP_ANNOTATION_KEY: {SUMMARY_OF_MESSAGE_IDS_KEY: ids}},
        )
        messages.insert(messages.index(old[0]), summary)
        return True


async def test_empty_summary_is_vetoed_and_raised_out_of_the_run(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("af-empty")
    guard = SpanguardCompaction(session, _EmptySummary(), raise_on={FaultKind.EMPTY_SUMMARY})
    model = ScriptedClient([_call(), "I see two charges."])
    agent = _agent(model, guard, guard)
    thread = agent.create_session()

    with pytest.raises(SpanguardFaultError) as raised:
        for text in _turns(scenario):
            await agent.run(text, session=thread)

    outcome = raised.value.outcome
    assert not outcome.applied and outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)
    # Undone before the error left: no summary in the list, nothing excluded.
    stored = thread.state["in_memory"]["messages"]
    assert not any(m.additional_properties.get(EXCLUDED_KEY) for m in stored)
    assert scenario["account"] in _texts(stored)


class _SplitAfterTheCall:
    """A naive strategy: excludes everything before the last tool result (its call
    included), keeping the result onwards."""

    async def __call__(self, messages: list[Message]) -> bool:
        included = included_messages(messages)
        cut = next((i for i in range(len(included) - 1, 0, -1) if included[i].role == "tool"), 0)
        if cut == 0:
            return False
        for message in included[:cut]:
            message.additional_properties[EXCLUDED_KEY] = True
        ids = [str(m.message_id) for m in included[:cut]]
        summary = Message(
            role="assistant",
            contents=["Summary: a lookup."],
            additional_properties={GROUP_ANNOTATION_KEY: {SUMMARY_OF_MESSAGE_IDS_KEY: ids}},
        )
        messages.insert(messages.index(included[0]), summary)
        return True


async def test_a_summary_that_splits_a_tool_pair_is_vetoed(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("af-split")
    guard = SpanguardCompaction(session, _SplitAfterTheCall())
    model = ScriptedClient([_call(), "I see two charges."])

    response_thread = await _play(_agent(model, guard, guard), [scenario["account"]])

    assert guard.outcomes and {o.vetoed_by for o in guard.outcomes} == {
        (FaultKind.TOOL_PAIR_SPLIT,)
    }
    assert "tool call 'call-1' split" in guard.outcomes[0].note
    faults = response_thread.state["spanguard_faults"]
    assert {f["evidence"]["tool_call_id"] for f in faults} == {"call-1"}
    # The model never got half a pair.
    assert all(_orphans(request) == set() for request in model.requests)
    assert any(m.role == "tool" for m in model.requests[-1])


class _CondenseSystemPrompt:
    """A strategy that shortens the system prompt in place (same message, new text)."""

    async def __call__(self, messages: list[Message]) -> bool:
        system = next((m for m in messages if m.role == "system"), None)
        if system is None or system.text != SYSTEM_PROMPT:
            return False
        system.contents[:] = [Content.from_text("Billing agent.")]
        return True


async def test_a_rewritten_system_prompt_is_vetoed_and_restored(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("af-system")
    guard = SpanguardCompaction(session, _CondenseSystemPrompt())
    model = ScriptedClient()
    agent = _agent(model, guard, guard)
    thread = agent.create_session()

    response = await agent.run(
        [Message(role="system", contents=[SYSTEM_PROMPT]), scenario["account"]], session=thread
    )

    [outcome] = guard.outcomes
    assert outcome.vetoed_by == (FaultKind.PROTECTED_SPAN_REWRITTEN,)
    assert "protected message" in outcome.note
    kinds = {f["kind"] for f in response.additional_properties["spanguard_faults"]}
    assert kinds == {FaultKind.PROTECTED_SPAN_REWRITTEN}
    [system] = [m for m in model.requests[-1] if m.role == "system"]
    assert system.text == SYSTEM_PROMPT
    assert session.tracker.live[str(system.message_id)].protected


async def test_inside_a_compaction_provider_the_stored_history_keeps_the_pin(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("af-provider")
    guard = SpanguardCompaction(session, _summariser(SUMMARY, threshold=8))  # after the last run
    history = InMemoryHistoryProvider()
    compaction = CompactionProvider(after_strategy=guard, history_source_id=history.source_id)
    model = ScriptedClient([_call(), "I see two charges."])
    # Providers' after_run go in reverse order: the history is stored, then compacted,
    # then the guard writes the faults.
    agent = Agent(
        client=model, tools=[lookup_account], context_providers=[guard, compaction, history]
    )

    thread = await _play(agent, _turns(scenario))

    assert any(o.applied and o.pinned for o in guard.outcomes)
    stored = thread.state[history.source_id]["messages"]
    kept = _texts([m for m in stored if not m.additional_properties.get(EXCLUDED_KEY)])
    assert "Account 8841-C: two charges" in kept and SUMMARY in kept
    assert scenario["chatter"][0] not in kept
