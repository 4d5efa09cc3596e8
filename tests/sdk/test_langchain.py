"""LangChain 1.x agents with the spanguard middleware: a real agent loop, a scripted model.

The agent (``create_agent``) runs its loop with a scripted chat model and
LangChain's own ``SummarizationMiddleware`` (a scripted summariser), wrapped by
``SpanguardMiddleware`` on an offline client (the engine in process).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from schemas import FaultKind
from streams.sdk import Session, SpanguardClient
from streams.sdk.adapters.langchain import (
    SpanguardFaultError,
    SpanguardMiddleware,
    guarded_trim_messages,
)

Model = Callable[[Sequence[Any]], Any]
Play = Callable[..., dict[str, Any]]
SUMMARY = "The user chatted about pets, weather and books."


@pytest.fixture
def agent(
    scripted_chat_model: Model, agent_script: Callable[[int], list[Any]], account_tool: Any
) -> Callable[..., Any]:
    """An agent with ``middleware`` whose model answers ``turns`` turns."""

    def make(middleware: Sequence[AgentMiddleware[Any, Any]], turns: int = 6) -> Any:
        return create_agent(
            scripted_chat_model(agent_script(turns)),
            [account_tool],
            middleware=list(middleware),
            checkpointer=InMemorySaver(),
        )

    return make


@pytest.fixture
def summariser(scripted_chat_model: Model) -> Callable[[str], SummarizationMiddleware]:
    """LangChain's ``SummarizationMiddleware`` with a scripted summariser: whatever it is
    given, it answers ``summary`` (at 11 messages, keeping the last two)."""

    def make(summary: str) -> SummarizationMiddleware:
        return SummarizationMiddleware(
            scripted_chat_model([]),
            trigger=("messages", 11),
            keep=("messages", 2),
            summarizer=lambda messages: summary,
        )

    return make


Guarded = tuple[Session, SpanguardMiddleware, Any]


@pytest.fixture
def guarded_agent(
    agent: Callable[..., Any], summariser: Callable[[str], SummarizationMiddleware]
) -> Callable[..., Guarded]:
    """(session, guard, agent): the summariser of ``summary`` wrapped by the guard, on a
    fresh offline session ``session_id``."""

    def make(session_id: str, summary: str, raise_on: Collection[FaultKind] = ()) -> Guarded:
        session = SpanguardClient.offline().session(session_id)
        guard = SpanguardMiddleware(session, compactor=summariser(summary), raise_on=raise_on)
        return session, guard, agent([guard])

    return make


def _texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def test_summary_that_drops_the_referred_account_keeps_it_pinned(
    guarded_agent: Callable[..., Guarded], play: Play, scenario: dict[str, Any]
) -> None:
    session, guard, agent = guarded_agent("lc-pin", SUMMARY)

    result = play(agent)

    [outcome] = guard.outcomes
    assert outcome.applied
    decision = outcome.decision
    assert decision is not None and decision.pinned, decision
    texts = _texts(result["messages"])
    # The summary is in, and the account's messages the last turn refers to stayed.
    assert any("chatted about pets" in t for t in texts)
    assert any("Account 8841-C: two charges" in t for t in texts)
    assert scenario["account"] in texts
    # The tool result kept its call (a ToolMessage without its AIMessage is invalid).
    kept_tool = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert kept_tool and any(isinstance(m, AIMessage) and m.tool_calls for m in result["messages"])
    # The chatter was summarised away, and the pins are the gate's, in the session's view.
    assert not any(scenario["chatter"][0] == t for t in texts)
    assert {p.span_id for p in decision.pins} == set(decision.pinned)
    assert session.live == [m.id for m in result["messages"]]


def test_without_the_guard_the_same_summary_loses_the_account(
    agent: Callable[..., Any], summariser: Callable[[str], SummarizationMiddleware], play: Play
) -> None:
    # The control: LangChain's middleware alone drops what the last turn refers to.
    texts = _texts(play(agent([summariser(SUMMARY)]))["messages"])
    assert not any("8841-C" in t for t in texts)


def test_empty_summary_is_vetoed_and_the_messages_stay(
    guarded_agent: Callable[..., Guarded], play: Play, scenario: dict[str, Any]
) -> None:
    # The summariser failed: an empty answer.
    _, guard, agent = guarded_agent("lc-empty", "")

    result = play(agent)

    kinds = [f["kind"] for f in result["spanguard_faults"]]
    assert FaultKind.EMPTY_SUMMARY in kinds
    assert all(not o.applied for o in guard.outcomes)
    texts = _texts(result["messages"])
    assert scenario["account"] in texts and scenario["chatter"][0] in texts
    assert not any(m.additional_kwargs.get("lc_source") for m in result["messages"])


class _CondenseToolResults(AgentMiddleware[Any, Any]):
    """A harness's own compaction: tool results rewritten in place (same id, new text)."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        long = [m for m in state["messages"] if isinstance(m, ToolMessage) and "order" in m.text]
        if not long:
            return None
        condensed = [
            ToolMessage(content="8841-C: charged twice.", tool_call_id=m.tool_call_id, id=m.id)
            for m in long
        ]
        return {"messages": condensed}


class _Scorer(AgentMiddleware[Any, Any]):
    """The harness's relevance scorer: scores every message once, by length."""

    def __init__(self, guard: SpanguardMiddleware) -> None:
        super().__init__()
        self.guard = guard
        self.scored: set[str] = set()

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        from streams.sdk.bridge import run_sync

        session = self.guard.session
        fresh = {
            m.id: min(1.0, len(m.text) / 100)
            for m in state["messages"]
            if m.id and m.id in session.live and m.id not in self.scored
        }
        if fresh:
            run_sync(session, session.score(fresh, scorer="length-v1"))
            self.scored.update(fresh)
        return None


@pytest.mark.parametrize("carry_scores", [True, False])
def test_rewrite_that_keeps_stale_scores_raises_the_fault(
    agent: Callable[..., Any], play: Play, carry_scores: bool
) -> None:
    client = SpanguardClient.offline()
    session = client.session(f"lc-stale-{carry_scores}")
    guard = SpanguardMiddleware(
        session, compactor=_CondenseToolResults(), carry_scores=carry_scores
    )
    reporter = SpanguardMiddleware(session)  # reports every model call

    result = play(agent([reporter, _Scorer(reporter), guard], turns=3), chatter=1)

    kinds = [f["kind"] for f in result.get("spanguard_faults", [])]
    if carry_scores:
        assert kinds.count(FaultKind.REWRITE_WITHOUT_INVALIDATION) == 1
    else:
        assert FaultKind.REWRITE_WITHOUT_INVALIDATION not in kinds
    assert "8841-C: charged twice." in _texts(result["messages"])


def test_raise_on_stops_the_agent_with_the_fault(
    guarded_agent: Callable[..., Guarded], play: Play
) -> None:
    _, _, agent = guarded_agent("lc-raise", "", raise_on={FaultKind.EMPTY_SUMMARY})
    with pytest.raises(SpanguardFaultError) as raised:
        play(agent)
    assert raised.value.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)


async def test_async_agent_gets_the_same_pins(
    guarded_agent: Callable[..., Guarded],
    aplay: Callable[[Any], Awaitable[dict[str, Any]]],
    scenario: dict[str, Any],
) -> None:
    _, guard, agent = guarded_agent("lc-async", SUMMARY)
    state = await aplay(agent)
    [outcome] = guard.outcomes
    assert outcome.applied and outcome.kept
    assert scenario["account"] in _texts(state["messages"])


def test_guarded_trim_keeps_what_a_later_message_refers_to(scenario: dict[str, Any]) -> None:
    client = SpanguardClient.offline()
    session = client.session("lc-trim")
    history: list[BaseMessage] = [
        HumanMessage(scenario["account"]),
        AIMessage("I see two charges."),
        *(HumanMessage(t) for t in scenario["chatter"]),
        HumanMessage(scenario["referring"]),
    ]
    trimmed, outcome = guarded_trim_messages(
        session,
        history,
        max_tokens=3,
        token_counter=len,  # one "token" per message: keep the last three
        strategy="last",
    )
    assert outcome.applied
    assert outcome.decision is not None and outcome.decision.pinned
    texts = _texts(trimmed)
    assert texts[0] == scenario["account"] and texts[-1] == scenario["referring"]
    assert scenario["chatter"][0] not in texts
