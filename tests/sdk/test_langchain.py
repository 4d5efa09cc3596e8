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
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import Session, SpanguardClient
from spanguard.streams.sdk.adapters.langchain import (
    SpanguardFaultError,
    SpanguardMiddleware,
    guarded_trim_messages,
)
from spanguard.streams.sdk.adapters.lc_messages import replace_all
from spanguard.streams.sdk.messages import ProtectRule

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
    # The summarised messages are merged by the rewrite, not evicted: the SDK's own
    # pin check (the gate's pinned set on the local engine) kept the account's.
    assert outcome.pinned, outcome
    texts = _texts(result["messages"])
    # The summary is in, and the account's messages the last turn refers to stayed.
    assert any("chatted about pets" in t for t in texts)
    assert any("Account 8841-C: two charges" in t for t in texts)
    assert scenario["account"] in texts
    # The tool result kept its call (a ToolMessage without its AIMessage is invalid).
    kept_tool = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert kept_tool and any(isinstance(m, AIMessage) and m.tool_calls for m in result["messages"])
    # The chatter was summarised away (merged into the summary), and the pins say why.
    assert not any(scenario["chatter"][0] == t for t in texts)
    assert {p.span_id for p in outcome.pins} == set(outcome.pinned)
    record = outcome.compaction
    assert record is not None and record.merged and not record.removed
    assert record.tokens_before > record.tokens_after
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
        from spanguard.streams.sdk.bridge import run_sync

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
    # Only system prompts protected: the account turn (the first user message) stays
    # because the last turn refers to it, not because it is the task.
    only_system: tuple[ProtectRule, ...] = ("system",)
    session = client.session("lc-trim", protect=only_system)
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


# -- contract 1.2: tool pairs and protected messages in the agent loop ------------------

SYSTEM_PROMPT = "You are the billing agent. Never close an account without the user's consent."
THREAD: Any = {"configurable": {"thread_id": "t-1"}}


class _OrphanCheck(AgentMiddleware[Any, Any]):
    """Stands in for the provider's rule: records every model request holding a tool
    result without its call, or a call without its result (the provider's 400)."""

    def __init__(self) -> None:
        super().__init__()
        self.orphans: list[str] = []
        self.requests = 0

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.requests += 1
        calls = {
            c["id"] for m in request.messages if isinstance(m, AIMessage) for c in m.tool_calls
        }
        results = {m.tool_call_id for m in request.messages if isinstance(m, ToolMessage)}
        self.orphans.extend(sorted(str(c) for c in calls ^ results))
        return handler(request)


class _SplittingSummariser(AgentMiddleware[Any, Any]):
    """A naive compactor: summarises everything up to the last tool call and keeps its
    result onwards (the cut LangChain #34282 describes)."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        cut = next(
            (i for i in range(len(messages) - 1, 0, -1) if isinstance(messages[i], ToolMessage)),
            None,
        )
        if cut is None:
            return None
        return {"messages": replace_all([HumanMessage("Summary: a lookup."), *messages[cut:]])}


class _CondenseSystemPrompt(AgentMiddleware[Any, Any]):
    """A compactor that shortens the system prompt in place (same id, new text)."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        system = next((m for m in state["messages"] if isinstance(m, SystemMessage)), None)
        if system is None or system.text != SYSTEM_PROMPT:
            return None
        return {"messages": [SystemMessage("Billing agent.", id=system.id)]}


def _no_orphans(messages: list[BaseMessage]) -> bool:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return calls == {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


def test_a_summary_that_splits_a_tool_pair_is_vetoed(agent: Callable[..., Any], play: Play) -> None:
    session = SpanguardClient.offline().session("lc-split")
    guard = SpanguardMiddleware(session, compactor=_SplittingSummariser())
    provider = _OrphanCheck()

    result = play(agent([guard, provider]))

    assert guard.outcomes and all(not o.applied for o in guard.outcomes)
    assert {o.vetoed_by for o in guard.outcomes} == {(FaultKind.TOOL_PAIR_SPLIT,)}
    assert "tool call 'call-1' split" in guard.outcomes[0].note
    faults = result["spanguard_faults"]
    assert {f["kind"] for f in faults} == {FaultKind.TOOL_PAIR_SPLIT}
    assert {f["evidence"]["tool_call_id"] for f in faults} == {"call-1"}
    # The model never got a request with half a pair, and the state kept both halves.
    assert provider.requests > 1 and provider.orphans == []
    assert _no_orphans(result["messages"]) and any(
        isinstance(m, ToolMessage) for m in result["messages"]
    )


def test_without_the_guard_the_split_reaches_the_provider(
    agent: Callable[..., Any], play: Play
) -> None:
    # The control: the same compactor alone sends the tool result without its call.
    provider = _OrphanCheck()
    play(agent([_SplittingSummariser(), provider]))
    assert "call-1" in provider.orphans


def test_a_rewritten_system_prompt_is_vetoed(
    agent: Callable[..., Any], scenario: dict[str, Any]
) -> None:
    session = SpanguardClient.offline().session("lc-system")
    guard = SpanguardMiddleware(session, compactor=_CondenseSystemPrompt())
    loop = agent([guard])

    result = loop.invoke(
        {"messages": [SystemMessage(SYSTEM_PROMPT), HumanMessage(scenario["account"])]}, THREAD
    )
    result = loop.invoke({"messages": [HumanMessage("And the second charge?")]}, THREAD)

    assert guard.outcomes and {o.vetoed_by for o in guard.outcomes} == {
        (FaultKind.PROTECTED_SPAN_REWRITTEN,)
    }
    assert "protected message" in guard.outcomes[0].note
    assert {f["kind"] for f in result["spanguard_faults"]} == {FaultKind.PROTECTED_SPAN_REWRITTEN}
    [system] = [m for m in result["messages"] if isinstance(m, SystemMessage)]
    assert system.text == SYSTEM_PROMPT and session.tracker.live[str(system.id)].protected


def test_a_rolling_summary_that_absorbs_a_whole_pair_is_applied(
    agent: Callable[..., Any], scripted_chat_model: Model, scenario: dict[str, Any]
) -> None:
    session = SpanguardClient.offline().session("lc-rolling")
    summariser = SummarizationMiddleware(
        scripted_chat_model([]),
        trigger=("messages", 8),
        keep=("messages", 2),
        summarizer=lambda messages: (
            "The agent ran lookup_account for account 8841-C: two charges for order 55012."
        ),
    )
    guard = SpanguardMiddleware(session, compactor=summariser, trigger="threshold")
    provider = _OrphanCheck()
    loop = agent([guard, provider])

    # The first turn calls the tool; nothing later refers to what the call found.
    state = loop.invoke(
        {"messages": [SystemMessage(SYSTEM_PROMPT), HumanMessage(scenario["account"])]}, THREAD
    )
    for text in scenario["chatter"]:
        state = loop.invoke({"messages": [HumanMessage(text)]}, THREAD)

    [outcome] = guard.outcomes
    assert outcome.applied and outcome.vetoed_by == ()
    assert FaultKind.TOOL_PAIR_SPLIT not in outcome.fault_kinds
    messages = state["messages"]
    assert not any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in messages)
    # The system prompt and the task stay verbatim, ahead of the summary.
    texts = _texts(messages)
    assert texts[:3] == [SYSTEM_PROMPT, scenario["account"], texts[2]]
    assert "two charges" in texts[2]
    assert outcome.fault_kinds == []  # the summary kept the keys it absorbed
    record = outcome.compaction
    assert record is not None and record.strategy == "SummarizationMiddleware"
    assert record.trigger == "threshold" and record.faults == []
    assert provider.orphans == []


def test_guarded_trim_keeps_both_halves_of_a_pair(scenario: dict[str, Any]) -> None:
    session = SpanguardClient.offline().session("lc-trim-pair")
    history: list[BaseMessage] = [
        SystemMessage(SYSTEM_PROMPT),
        HumanMessage("Hello."),
        AIMessage("", tool_calls=[{"name": "lookup_account", "args": {}, "id": "call-7"}]),
        ToolMessage("No charges found.", tool_call_id="call-7"),
        AIMessage("Nothing to refund."),
        HumanMessage(scenario["chatter"][0]),
    ]
    trimmed, outcome = guarded_trim_messages(
        session, history, max_tokens=3, token_counter=len, strategy="last"
    )
    # trim_messages alone would keep the tool result without its call.
    assert isinstance(trim_messages_alone(history)[0], ToolMessage)
    assert outcome.applied and outcome.decision is not None
    assert outcome.decision.refused[str(history[2].id)] == "TOOL_PAIR"
    assert trimmed == history and _no_orphans(trimmed)


def trim_messages_alone(history: list[BaseMessage]) -> list[BaseMessage]:
    """What ``trim_messages`` keeps of ``history`` on its own (the last three)."""
    from langchain_core.messages import trim_messages

    return list(trim_messages(history, max_tokens=3, token_counter=len, strategy="last"))
