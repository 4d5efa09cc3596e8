"""deepagents with the spanguard guard: a real deep agent loop, a scripted model.

``create_deep_agent`` runs its loop (its own middleware stack, a state backend) with a
scripted chat model; deepagents' own ``SummarizationMiddleware`` (a scripted
summariser) compacts inside ``wrap_model_call``, wrapped by
``SpanguardDeepAgentsMiddleware`` on an offline client (the engine in process).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from deepagents.middleware.summarization import SummarizationMiddleware
from langchain.agents.middleware import AgentMiddleware
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import SpanguardClient
from spanguard.streams.sdk.adapters.deepagents import (
    SpanguardDeepAgentsMiddleware,
    SpanguardFaultError,
)
from spanguard.streams.sdk.messages import Message, Protect

Play = Callable[..., dict[str, Any]]
SUMMARY = "The user chatted about pets, weather and books."


class RecordingModel(GenericFakeChatModel):
    """A scripted chat model that records every request and, past ``limit`` messages,
    refuses it as a provider does (``ContextOverflowError``)."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)
    limit: int | None = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        if self.limit is not None and len(messages) > self.limit:
            raise ContextOverflowError(f"prompt is too long: {len(messages)} messages")
        return super()._generate(messages, *args, **kwargs)


def _conversation(request: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A request without deepagents' system prompt (not in the state)."""
    return [m for m in request if not isinstance(m, SystemMessage)]


def _texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.text) for m in messages]


def _orphans(messages: Sequence[BaseMessage]) -> set[str]:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return {str(c) for c in calls ^ results}


@pytest.fixture
def model(agent_script: Callable[[int], list[Any]]) -> Callable[..., RecordingModel]:
    """The agent's model: a call of the account tool, then plain replies."""

    def make(limit: int | None = None, script: list[Any] | None = None) -> RecordingModel:
        return RecordingModel(messages=iter(script or agent_script(6)), limit=limit)

    return make


def summariser(model: RecordingModel, summary: str, **options: Any) -> SummarizationMiddleware:
    """deepagents' summariser answering ``summary`` (at 11 messages, keeping the last two)."""
    settings: dict[str, Any] = {"trigger": ("messages", 11), "keep": ("messages", 2)}
    settings.update(options)
    return SummarizationMiddleware(
        model, backend=StateBackend(), summarizer=lambda messages: summary, **settings
    )


@pytest.fixture
def deep_agent(account_tool: Any) -> Callable[..., Any]:
    """A deep agent on ``model`` with ``middleware`` (a summariser, or its guard, takes
    the place of deepagents' default one: same name)."""

    def make(model: RecordingModel, middleware: Sequence[AgentMiddleware[Any, Any]]) -> Any:
        return create_deep_agent(
            model, [account_tool], middleware=list(middleware), checkpointer=InMemorySaver()
        )

    return make


Guarded = tuple[RecordingModel, SpanguardDeepAgentsMiddleware, Any]


@pytest.fixture
def guarded(
    deep_agent: Callable[..., Any], model: Callable[..., RecordingModel]
) -> Callable[..., Guarded]:
    """(model, guard, agent): ``compactor(model)`` wrapped by the guard on a fresh offline
    session ``session_id``."""

    def make(
        session_id: str,
        compactor: Callable[[RecordingModel], AgentMiddleware[Any, Any]],
        *,
        limit: int | None = None,
        raise_on: Collection[FaultKind] = (),
        protect: Protect = ("system", "first_user"),
        script: list[Any] | None = None,
    ) -> Guarded:
        llm = model(limit, script)
        session = SpanguardClient.offline().session(session_id)
        guard = SpanguardDeepAgentsMiddleware(
            session, compactor=compactor(llm), raise_on=raise_on, protect=protect
        )
        return llm, guard, deep_agent(llm, [guard])

    return make


def test_a_summary_that_drops_the_referred_account_keeps_it_pinned(
    guarded: Callable[..., Guarded], play: Play, scenario: dict[str, Any]
) -> None:
    llm, guard, agent = guarded("da-pin", lambda m: summariser(m, SUMMARY))

    state = play(agent)

    [outcome] = guard.outcomes
    assert outcome.applied and outcome.pinned, outcome
    # The model's last request: the task (protected), the summary, and the tool pair the
    # last turn refers to ("that account"), kept word for word.
    sent = _texts(_conversation(llm.requests[-1]))
    assert sent[0] == scenario["account"]
    assert any(SUMMARY in t for t in sent)
    assert any("Account 8841-C: two charges" in t for t in sent)
    assert sent[-1] == scenario["referring"]
    assert not any(scenario["chatter"][0] == t for t in sent)
    assert not _orphans(_conversation(llm.requests[-1]))
    # The state holds what the model saw, then its answer; no summarisation event.
    assert _texts(state["messages"]) == [*sent, "Noted (turn 4)."]
    assert state.get("_summarization_event") is None
    assert guard.session.live == [str(m.id) for m in state["messages"]]
    record = outcome.compaction
    assert record is not None and record.merged and not record.removed
    assert record.strategy == "SummarizationMiddleware"
    assert {p.span_id for p in outcome.pins} == set(outcome.pinned)


def test_without_the_guard_the_same_summary_loses_the_account(
    deep_agent: Callable[..., Any], model: Callable[..., RecordingModel], play: Play
) -> None:
    # The control: deepagents' summariser alone sends a request without the account.
    llm = model()
    play(deep_agent(llm, [summariser(llm, SUMMARY)]))
    assert not any("8841-C" in t for t in _texts(_conversation(llm.requests[-1])))


@pytest.mark.parametrize(
    ("summary", "kind"),
    [("", FaultKind.EMPTY_SUMMARY), ("pets and weather " * 400, FaultKind.SUMMARY_BALLOONING)],
)
def test_a_failed_summary_is_vetoed_and_the_model_gets_the_messages(
    guarded: Callable[..., Guarded],
    play: Play,
    scenario: dict[str, Any],
    summary: str,
    kind: FaultKind,
) -> None:
    llm, guard, agent = guarded(f"da-{kind}", lambda m: summariser(m, summary))

    state = play(agent)

    assert guard.outcomes and all(o.vetoed_by == (kind,) for o in guard.outcomes)
    assert {f["kind"] for f in state["spanguard_faults"]} == {kind}
    sent = _texts(_conversation(llm.requests[-1]))
    assert scenario["account"] in sent and scenario["chatter"][0] in sent
    assert not any("summary" in t for t in sent)
    assert state.get("_summarization_event") is None


class _SplittingSummariser(SummarizationMiddleware):
    """deepagents' summariser with a naive cut: just before the last tool result, so the
    summary absorbs the call and the result stays (LangChain #34282's cut)."""

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"  # takes the default summariser's place

    def _determine_cutoff_index(self, messages: list[Any]) -> int:
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        return results[-1] if results else 0


def _splitting(model: RecordingModel) -> _SplittingSummariser:
    return _SplittingSummariser(
        model,
        backend=StateBackend(),
        trigger=("messages", 11),
        summarizer=lambda messages: "Summary: a lookup.",
    )


def test_a_summary_that_splits_a_tool_pair_is_vetoed(
    guarded: Callable[..., Guarded], play: Play
) -> None:
    llm, guard, agent = guarded("da-split", _splitting)

    state = play(agent)

    [outcome] = guard.outcomes
    assert outcome.vetoed_by == (FaultKind.TOOL_PAIR_SPLIT,)
    assert "tool call 'call-1' split" in outcome.note
    faults = state["spanguard_faults"]
    assert {(f["kind"], f["evidence"]["tool_call_id"]) for f in faults} == {
        (FaultKind.TOOL_PAIR_SPLIT, "call-1")
    }
    # No request held half a pair; the model got the whole context instead.
    assert all(not _orphans(_conversation(r)) for r in llm.requests)
    assert any(isinstance(m, ToolMessage) for m in _conversation(llm.requests[-1]))


def test_without_the_guard_the_split_reaches_the_model(
    deep_agent: Callable[..., Any], model: Callable[..., RecordingModel], play: Play
) -> None:
    llm = model()
    play(deep_agent(llm, [_splitting(llm)]))
    assert _orphans(_conversation(llm.requests[-1])) == {"call-1"}


NOTE = "Refund note for account 8841-C: two charges of 40 EUR for order 55012."
WRITE_NOTE = AIMessage(
    content="",
    tool_calls=[
        {"name": "write_file", "args": {"file_path": "/refund.md", "content": NOTE}, "id": "call-w"}
    ],
)


def _writes_a_file(message: Message) -> bool:
    return message.role == "ai" and "write_file" in message.text


def test_truncated_arguments_of_a_protected_call_are_vetoed(
    guarded: Callable[..., Guarded], play: Play
) -> None:
    # The harness protects the agent's file writes; deepagents' argument truncation
    # rewrites the call in place (same id, the content clipped).
    truncate = {"trigger": ("messages", 6), "keep": ("messages", 2), "max_length": 20}
    script = [WRITE_NOTE, *(AIMessage(f"Noted (turn {n}).") for n in range(6))]
    llm, guard, agent = guarded(
        "da-protected",
        lambda m: summariser(m, SUMMARY, trigger=("messages", 99), truncate_args_settings=truncate),
        protect=("system", "first_user", _writes_a_file),
        script=script,
    )

    state = play(agent)

    assert guard.outcomes and {o.vetoed_by for o in guard.outcomes} == {
        (FaultKind.PROTECTED_SPAN_REWRITTEN,)
    }
    assert "protected message" in guard.outcomes[0].note
    assert {f["kind"] for f in state["spanguard_faults"]} == {FaultKind.PROTECTED_SPAN_REWRITTEN}
    # Every request after the first (the call did not exist yet) carried the call's own
    # arguments, once truncation had started too.
    contents = [
        c["args"]["content"]
        for r in llm.requests
        for m in r
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    ]
    assert len(contents) == len(llm.requests) - 1 and set(contents) == {NOTE}


def test_a_veto_at_the_context_limit_raises_instead_of_overflowing_again(
    guarded: Callable[..., Guarded], play: Play
) -> None:
    # The summary runs only because the model refused the request (12 messages with
    # the system prompt); the summariser fails, so the veto keeps a context the model
    # already refused: the agent gets the veto, not a second overflow.
    llm, _, agent = guarded(
        "da-overflow", lambda m: summariser(m, "", trigger=("messages", 99)), limit=11
    )

    with pytest.raises(SpanguardFaultError) as raised:
        play(agent)

    assert raised.value.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)
    assert "context overflow" in str(raised.value)
    assert isinstance(raised.value.__cause__, ContextOverflowError)
    assert [len(r) for r in llm.requests[-2:]] == [12, 12]  # refused twice, then stopped


def test_an_overflow_summary_that_passes_is_applied(
    guarded: Callable[..., Guarded], play: Play, scenario: dict[str, Any]
) -> None:
    llm, guard, agent = guarded(
        "da-overflow-ok", lambda m: summariser(m, SUMMARY, trigger=("messages", 99)), limit=11
    )

    state = play(agent)

    [outcome] = guard.outcomes
    assert outcome.applied and outcome.pinned
    assert len(llm.requests[-1]) <= 11
    assert scenario["account"] in _texts(state["messages"])


def test_raise_on_stops_the_agent_with_the_fault(
    guarded: Callable[..., Guarded], play: Play
) -> None:
    _, _, agent = guarded(
        "da-raise", lambda m: summariser(m, ""), raise_on={FaultKind.EMPTY_SUMMARY}
    )
    with pytest.raises(SpanguardFaultError) as raised:
        play(agent)
    assert raised.value.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)


async def test_async_agent_gets_the_same_pins(
    guarded: Callable[..., Guarded],
    aplay: Callable[[Any], Awaitable[dict[str, Any]]],
    scenario: dict[str, Any],
) -> None:
    llm, guard, agent = guarded("da-async", lambda m: summariser(m, SUMMARY))
    state = await aplay(agent)
    [outcome] = guard.outcomes
    assert outcome.applied and outcome.pinned
    assert any("Account 8841-C: two charges" in t for t in _texts(state["messages"]))
    assert _texts(_conversation(llm.requests[-1]))[0] == scenario["account"]
