"""Google ADK: a real ``Runner`` over an ``App`` (an ``LlmAgent`` with a tool, its event
compaction on) with a scripted LLM (no network), ADK's own ``LlmEventSummarizer``
(a scripted summary model) wrapped by ``SpanguardSummarizer`` on an offline client.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import SpanguardClient, SpanguardFaultError
from spanguard.streams.sdk.adapters.adk import (
    SpanguardSummarizer,
    context_events,
    event_span,
)

SUMMARY = "The user chatted about pets, weather and books."


class ScriptedLlm(BaseLlm):
    """Answers from a script: a call of the account tool first (for the agent), then
    ``default``; records every request's contents (what the model would see)."""

    model: str = "scripted"
    calls: bool = True
    default: str = "Noted."
    requests: list[list[types.Content]]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(list(llm_request.contents))
        if self.calls and len(self.requests) == 1:
            call = types.FunctionCall(
                id="call-1", name="lookup_account", args={"account": "8841-C"}
            )
            part = types.Part(function_call=call)
        else:
            part = types.Part(text=self.default)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def lookup_account(account: str) -> str:
    """Look an account up."""
    return f"Account {account}: two charges of 40 EUR for order 55012."


def _texts(contents: Sequence[types.Content]) -> str:
    lines = []
    for content in contents:
        for part in content.parts or ():
            if part.text:
                lines.append(part.text)
            if part.function_response is not None:
                lines.append(str(part.function_response.response))
    return "\n".join(lines)


def _orphans(contents: Sequence[types.Content]) -> set[str]:
    parts = [p for c in contents for p in c.parts or ()]
    calls = {p.function_call.id for p in parts if p.function_call is not None}
    answers = {p.function_response.id for p in parts if p.function_response is not None}
    return {str(i) for i in calls ^ answers}


def _summariser(summary: str) -> LlmEventSummarizer:
    return LlmEventSummarizer(llm=ScriptedLlm(calls=False, default=summary, requests=[]))


def _turns(scenario: dict[str, Any]) -> list[str]:
    return [scenario["account"], *scenario["chatter"], scenario["referring"]]


Played = tuple[ScriptedLlm, Any]


async def _play(
    guard: SpanguardSummarizer | None,
    summarizer: BaseEventsSummarizer,
    turns: Sequence[str],
    **compaction: Any,
) -> Played:
    """Run ``turns`` through a Runner; returns the model and the ADK session at the end."""
    model = ScriptedLlm(requests=[])
    agent = LlmAgent(name="support", model=model, tools=[lookup_account])
    config = EventsCompactionConfig(summarizer=guard or summarizer, **compaction)
    app = App(
        name="support",
        root_agent=agent,
        plugins=[guard] if guard is not None else [],
        events_compaction_config=config,
    )
    service = InMemorySessionService()
    session = await service.create_session(app_name="support", user_id="u1")
    runner = Runner(app=app, session_service=service)
    for text in turns:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            pass
    final = await service.get_session(app_name="support", user_id="u1", session_id=session.id)
    return model, final


TOKEN_THRESHOLD = {"token_threshold": 370, "event_retention_size": 2}
"""ADK's token-threshold compaction (checked before each model call and after each run),
first reached after the run of the scenario's last user turn ("that account"): ADK
estimates 363 tokens after the run before, 375 after it (~4 characters a token, the
agent's turns quoted as context). The two events retained are that turn and its answer."""

NEXT_TURN = "Is it done?"
"""A turn after the compaction: its model request shows what the model sees now."""


async def test_summary_that_drops_the_referred_account_keeps_it_pinned(
    scenario: dict[str, Any],
) -> None:
    session = SpanguardClient.offline().session("adk-pin")
    guard = SpanguardSummarizer(session, _summariser(SUMMARY))
    turns = [*_turns(scenario), NEXT_TURN]

    model, final = await _play(guard, guard.summarizer, turns, **TOKEN_THRESHOLD)

    [outcome] = guard.outcomes
    # The range was cut past the account's events before the summarizer ran: why they
    # stayed is in the outcome, as for any removed message spanguard keeps.
    assert outcome.applied and outcome.pinned, outcome
    assert {p.span_id for p in outcome.pins} == set(outcome.pinned)
    last = _texts(model.requests[-1])
    # The model's last request: the task (protected) and the account's tool call and
    # result (pinned: "that account") stay ahead of the summary; the chatter is in it.
    assert SUMMARY in last and "Account 8841-C: two charges" in last
    assert last.index(scenario["account"]) < last.index(SUMMARY)
    assert scenario["chatter"][0] not in last
    # The session's events, compaction applied, are spanguard's live spans (the model's
    # last answer is reported at the next model call).
    assert [e.id for e in context_events(final.events)][:-1] == session.live
    record = outcome.compaction
    assert record is not None and record.merged and record.tokens_before > record.tokens_after
    assert record.strategy == "LlmEventSummarizer"
    assert final.state.get("spanguard_faults") is None


async def test_without_the_guard_the_same_summary_loses_the_account(
    scenario: dict[str, Any],
) -> None:
    # The control: ADK's summarizer alone summarises the account's tool result away.
    turns = [*_turns(scenario), NEXT_TURN]
    model, _ = await _play(None, _summariser(SUMMARY), turns, **TOKEN_THRESHOLD)
    assert SUMMARY in _texts(model.requests[-1])
    assert "Account 8841-C: two charges" not in _texts(model.requests[-1])


@pytest.mark.parametrize(
    ("summary", "kind"),
    [("", FaultKind.EMPTY_SUMMARY), ("A very long summary. " * 400, FaultKind.SUMMARY_BALLOONING)],
)
async def test_empty_or_ballooning_summary_is_vetoed_and_in_the_session_state(
    scenario: dict[str, Any], summary: str, kind: FaultKind
) -> None:
    session = SpanguardClient.offline().session(f"adk-{kind}")
    guard = SpanguardSummarizer(session, _summariser(summary))

    model, final = await _play(
        guard, guard.summarizer, _turns(scenario), compaction_interval=2, overlap_size=0
    )

    assert guard.outcomes and all(o.vetoed_by == (kind,) for o in guard.outcomes)
    assert {f["kind"] for f in final.state["spanguard_faults"]} == {kind}
    assert not any(e.actions.compaction for e in final.events)  # ADK appended none
    assert scenario["chatter"][0] in _texts(model.requests[-1])


async def test_raise_on_stops_the_next_run(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("adk-raise")
    guard = SpanguardSummarizer(session, _summariser(""), raise_on={FaultKind.EMPTY_SUMMARY})
    # ADK wraps a plugin's exception in its own RuntimeError, the fault error its cause.
    with pytest.raises(RuntimeError, match="EMPTY_SUMMARY") as raised:
        await _play(
            guard, guard.summarizer, _turns(scenario), compaction_interval=2, overlap_size=0
        )
    cause = raised.value.__cause__
    assert isinstance(cause, SpanguardFaultError)
    assert cause.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)


class _SplittingSummarizer(BaseEventsSummarizer):
    """A buggy summarizer: its range ends at the tool call, the tool's response stays."""

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        calls = [e for e in events if e.get_function_calls()]
        if not calls:
            return None
        content = types.Content(role="model", parts=[types.Part(text="Summary: a lookup.")])
        compaction = EventCompaction(
            start_timestamp=events[0].timestamp,
            end_timestamp=calls[0].timestamp,
            compacted_content=content,
        )
        return Event(
            author="user", invocation_id=Event.new_id(), actions=EventActions(compaction=compaction)
        )


async def test_a_summary_that_splits_a_tool_pair_is_vetoed(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("adk-split")
    guard = SpanguardSummarizer(session, _SplittingSummarizer(), protect=())

    model, final = await _play(
        guard, guard.summarizer, _turns(scenario)[:3], compaction_interval=1, overlap_size=0
    )

    assert guard.outcomes and {o.vetoed_by for o in guard.outcomes} == {
        (FaultKind.TOOL_PAIR_SPLIT,)
    }
    assert "tool call 'call-1' split" in guard.outcomes[0].note
    assert {f["evidence"]["tool_call_id"] for f in final.state["spanguard_faults"]} == {"call-1"}
    assert not any(e.actions.compaction for e in final.events)
    # The model never got half the pair (ADK would drop or repair the orphaned half).
    assert all(_orphans(request) == set() for request in model.requests)


class _FromTheStart(BaseEventsSummarizer):
    """A summarizer whose range starts at the session's beginning, whatever it was given:
    its summary would replace the task (the first user turn) too."""

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        content = types.Content(role="model", parts=[types.Part(text="Summary: small talk.")])
        compaction = EventCompaction(
            start_timestamp=0.0, end_timestamp=events[-1].timestamp, compacted_content=content
        )
        return Event(
            author="user", invocation_id=Event.new_id(), actions=EventActions(compaction=compaction)
        )


async def test_a_summary_over_the_task_keeps_the_task_verbatim(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("adk-task")
    guard = SpanguardSummarizer(session, _FromTheStart())
    turns = [scenario["account"], *scenario["chatter"][:2], NEXT_TURN]

    model, final = await _play(
        guard, guard.summarizer, turns, compaction_interval=3, overlap_size=0
    )

    # The task is protected: the compaction is applied without it (its range narrowed
    # to start after the task), so the model still reads the task verbatim.
    [outcome] = guard.outcomes
    task = next(e for e in final.events if e.author == "user")
    assert outcome.applied and outcome.refused == {task.id: "PROTECTED"}
    [summary] = [e for e in final.events if e.actions.compaction]
    assert summary.actions.compaction is not None
    assert summary.actions.compaction.start_timestamp > task.timestamp
    last = _texts(model.requests[-1])
    assert last.index(scenario["account"]) < last.index("Summary: small talk.")
    assert scenario["chatter"][0] not in last


def test_event_spans_carry_the_tool_pair() -> None:
    call = types.Part(function_call=types.FunctionCall(id="c-9", name="f", args={"a": 1}))
    answer = types.Part(
        function_response=types.FunctionResponse(id="c-9", name="f", response={"r": "ok"})
    )
    asks = Event(
        author="support", id=str(uuid.uuid4()), content=types.Content(role="model", parts=[call])
    )
    says = Event(
        author="support", id=str(uuid.uuid4()), content=types.Content(role="user", parts=[answer])
    )
    assert event_span(asks).calls == ("c-9",) and event_span(asks).role == "assistant"
    assert event_span(says).answers == ("c-9",) and event_span(says).role == "tool"
