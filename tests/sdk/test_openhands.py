"""OpenHands (openhands-sdk) with the spanguard condenser: a real conversation loop, a
scripted LLM.

An ``Agent`` runs its ``Conversation`` with OpenHands' own ``TestLLM`` (scripted
answers and errors, no network) and OpenHands' ``LLMSummarizingCondenser`` (a scripted
summariser, or a naive condenser of the test's), wrapped by ``SpanguardCondenser`` on
an offline client (the engine in process). openhands-sdk needs Python 3.12: this file
runs in its own virtualenv (``scripts/ci_openhands.sh``).
"""

from __future__ import annotations

import os

# No network: litellm's model price map from its own package, no banner on stdout.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest
from openhands.sdk import Agent, LocalConversation
from openhands.sdk.context.condenser import (
    CondenserBase,
    LLMSummarizingCondenser,
    RollingCondenser,
)
from openhands.sdk.context.condenser.base import CondensationRequirement
from openhands.sdk.context.view import View
from openhands.sdk.conversation.exceptions import ConversationRunError
from openhands.sdk.conversation.state import ConversationExecutionStatus
from openhands.sdk.event import (
    ActionEvent,
    Condensation,
    ObservationEvent,
    SystemPromptEvent,
)
from openhands.sdk.event.conversation_error import ConversationErrorEvent
from openhands.sdk.llm import LLM, Message, MessageToolCall, TextContent
from openhands.sdk.llm.exceptions import LLMContextWindowExceedError
from openhands.sdk.testing import TestLLM
from pydantic import PrivateAttr

from spanguard.schemas import FaultKind
from spanguard.streams.sdk import SpanguardClient
from spanguard.streams.sdk.adapters.openhands import (
    SpanguardCondenser,
    SpanguardFaultError,
)

SUMMARY = "The user chatted about cats and the weather."
TURNS = [
    "Hi! I need help with a billing problem.",
    "My account 8841-C was charged twice for the same order.",
    "Unrelated: what is a good name for a cat? " * 6,
    "And how warm will it be tomorrow? " * 6,
    "Thanks. Please close that account today.",
]
"""The user's turns: the first is the task (protected by default), the last refers to
the account of the second ("that account")."""


def say(text: str) -> Message:
    """An assistant answer."""
    return Message(role="assistant", content=[TextContent(text=text)])


LOOKUP = Message(
    role="assistant",
    content=[TextContent(text="Looking it up.")],
    tool_calls=[
        MessageToolCall(
            id="call-1",
            name="think",
            arguments='{"thought": "Account 8841-C: two charges of 40 EUR for order 55012."}',
            origin="completion",
        )
    ],
)


class RecordingLLM(TestLLM):
    """OpenHands' scripted LLM, recording the messages of every call."""

    __test__ = False
    _requests: list[list[Message]] = PrivateAttr(default_factory=list)

    @property
    def requests(self) -> list[list[Message]]:
        """The messages of every call, in order."""
        return self._requests

    def completion(self, messages: list[Message], *args: Any, **kwargs: Any) -> Any:
        self._requests.append(list(messages))
        return super().completion(messages, *args, **kwargs)


def _agent_llm(failure: Exception | None = None) -> RecordingLLM:
    """The agent's answers: the account turn calls ``think`` (a tool pair), the others
    answer; ``failure`` is raised at the last turn's first call (then it answers)."""
    script: list[Message | Exception] = [say("Noted (0)."), LOOKUP, say("Noted (1).")]
    script += [say("Noted (2)."), say("Noted (3).")]
    script += [failure] if failure is not None else []
    script += [say("Noted (4)."), say("Noted (5).")]
    return RecordingLLM(model="test-model", usage_id="agent", scripted_responses=script)


def summarising(summary: str, max_size: int = 11) -> LLMSummarizingCondenser:
    """OpenHands' summarising condenser, its LLM scripted to answer ``summary``."""
    llm = TestLLM.from_messages([say(summary)] * 3, usage_id="condenser")
    return LLMSummarizingCondenser(llm=llm, max_size=max_size, keep_first=2)


def _texts(messages: Sequence[Message]) -> list[str]:
    return ["".join(c.text for c in m.content if isinstance(c, TextContent)) for m in messages]


Run = tuple[RecordingLLM, LocalConversation]


def converse(tmp_path: Path, condenser: CondenserBase, *, failure: Exception | None = None) -> Run:
    """(the LLM, a conversation of an agent with ``condenser``)."""
    llm = _agent_llm(failure)
    agent = Agent(llm=llm, tools=[], condenser=condenser)
    return llm, LocalConversation(agent=agent, workspace=str(tmp_path), visualizer=None)


def play(conversation: LocalConversation) -> None:
    """Play :data:`TURNS`, running the agent after each."""
    for text in TURNS:
        # openhands types the parameters of its @observe-decorated methods as Never
        # (and, in some releases, their self too).
        conversation.send_message(text)  # type: ignore[arg-type,misc,unused-ignore]
        conversation.run()  # type: ignore[misc,unused-ignore]


def run(tmp_path: Path, condenser: CondenserBase) -> Run:
    """:data:`TURNS` played in a conversation of an agent with ``condenser``."""
    llm, conversation = converse(tmp_path, condenser)
    play(conversation)
    return llm, conversation


def guarded(
    session_id: str, condenser: CondenserBase, raise_on: Collection[FaultKind] = ()
) -> SpanguardCondenser:
    """``condenser`` wrapped, on a fresh offline session."""
    session = SpanguardClient.offline().session(session_id)
    return SpanguardCondenser(session, condenser, raise_on=raise_on)


def _orphans(messages: Sequence[Message]) -> set[str]:
    calls = {c.id for m in messages for c in m.tool_calls or []}
    results = {m.tool_call_id for m in messages if m.tool_call_id}
    return calls ^ results


def test_a_summary_that_drops_the_referred_account_keeps_it_pinned(tmp_path: Path) -> None:
    condenser = guarded("oh-pin", summarising(SUMMARY))

    llm, conversation = run(tmp_path, condenser)

    [outcome] = condenser.outcomes
    assert outcome.applied
    view = View.from_events(conversation.state.events)
    by_id = {e.id: e for e in view.events}
    pinned = [by_id[s] for s in outcome.pinned]
    assert any(isinstance(e, ActionEvent) for e in pinned)  # the lookup, and its answer:
    assert any(isinstance(by_id[s], ObservationEvent) for s in outcome.kept)
    # The LLM's last call: the task, the summary, the account turn and the lookup the
    # last turn refers to ("that account"), word for word and in this order (OpenHands
    # sends consecutive user events as one message).
    sent = "\n".join(_texts(llm.requests[-1]))
    order = [TURNS[0], SUMMARY, TURNS[1], "Looking it up.", TURNS[-1]]
    at = [sent.find(part) for part in order]
    assert -1 not in at and at == sorted(at), at
    assert [c.id for m in llm.requests[-1] for c in m.tool_calls or []] == ["call-1"]
    assert TURNS[2] not in sent
    assert not _orphans(llm.requests[-1])
    # The Condensation in the event log forgets only what the summary really replaces.
    [condensation] = [e for e in conversation.state.events if isinstance(e, Condensation)]
    assert condensation.forgotten_event_ids.isdisjoint(outcome.kept)
    assert condenser.guard.session.live == [e.id for e in view.events][:-1]  # not its answer
    record = outcome.compaction
    assert record is not None and record.merged and not record.removed
    assert record.strategy == "LLMSummarizingCondenser"
    # The faults' place: the condenser the conversation's agent holds.
    assert conversation.state.agent.condenser is condenser and condenser.faults == []


def test_without_the_guard_the_same_summary_loses_the_account(tmp_path: Path) -> None:
    # The control: OpenHands' condenser alone forgets what the last turn refers to.
    llm, _ = run(tmp_path, summarising(SUMMARY))
    assert not any("8841-C" in t for t in _texts(llm.requests[-1]))


@pytest.mark.parametrize(
    ("summary", "kind"),
    [("", FaultKind.EMPTY_SUMMARY), ("cats and weather " * 400, FaultKind.SUMMARY_BALLOONING)],
)
def test_a_failed_summary_is_vetoed_and_the_llm_gets_every_event(
    tmp_path: Path, summary: str, kind: FaultKind
) -> None:
    condenser = guarded(f"oh-{kind}", summarising(summary))

    llm, conversation = run(tmp_path, condenser)

    assert condenser.outcomes and all(o.vetoed_by == (kind,) for o in condenser.outcomes)
    assert conversation.state.agent.condenser is condenser
    assert {f.kind for f in condenser.faults} == {kind}
    assert not any(isinstance(e, Condensation) for e in conversation.state.events)
    sent = "\n".join(_texts(llm.requests[-1]))
    assert all(turn in sent for turn in TURNS)


class _SplittingCondenser(RollingCondenser):
    """A naive condenser: forgets everything after the task up to the last tool call and
    keeps the call's result (the cut between a call and its result)."""

    max_size: int = 11

    def condensation_requirement(
        self, view: View, agent_llm: LLM | None = None
    ) -> CondensationRequirement | None:
        return CondensationRequirement.SOFT if len(view) > self.max_size else None

    def get_condensation(self, view: View, agent_llm: LLM | None = None) -> Condensation:
        last = max(i for i, e in enumerate(view.events) if isinstance(e, ActionEvent))
        return Condensation(
            forgotten_event_ids={e.id for e in view.events[2 : last + 1]},
            summary="Summary: a lookup.",
            summary_offset=2,
            llm_response_id="split",
        )


def test_a_condensation_that_splits_a_tool_pair_is_vetoed(tmp_path: Path) -> None:
    condenser = guarded("oh-split", _SplittingCondenser())

    llm, _ = run(tmp_path, condenser)

    assert condenser.outcomes
    assert {o.vetoed_by for o in condenser.outcomes} == {(FaultKind.TOOL_PAIR_SPLIT,)}
    assert "tool call 'call-1' split" in condenser.outcomes[0].note
    faults = condenser.faults
    assert {(f.kind, f.evidence["tool_call_id"]) for f in faults} == {
        (FaultKind.TOOL_PAIR_SPLIT, "call-1")
    }
    assert all(not _orphans(r) for r in llm.requests)
    assert "Summary: a lookup." not in _texts(llm.requests[-1])


class _ShortenedPrompt(CondenserBase):
    """A condenser that shortens the system prompt in place (same event, new text)."""

    def condense(self, view: View, agent_llm: LLM | None = None) -> View | Condensation:
        events = [
            e.model_copy(update={"system_prompt": TextContent(text="Be brief.")})
            if isinstance(e, SystemPromptEvent)
            else e
            for e in view.events
        ]
        return View(events=events)


def test_a_rewritten_system_prompt_is_vetoed(tmp_path: Path) -> None:
    condenser = guarded("oh-system", _ShortenedPrompt())

    llm, _ = run(tmp_path, condenser)

    assert len(condenser.outcomes) == len(llm.requests)  # vetoed at every step
    assert {o.vetoed_by for o in condenser.outcomes} == {(FaultKind.PROTECTED_SPAN_REWRITTEN,)}
    assert "protected message" in condenser.outcomes[0].note
    assert {f.kind for f in condenser.faults} == {FaultKind.PROTECTED_SPAN_REWRITTEN}
    assert all("Be brief." not in _texts(r)[0] for r in llm.requests)


def test_a_veto_at_the_context_limit_stops_the_conversation_and_says_so(
    tmp_path: Path,
) -> None:
    # The LLM refuses the last turn's context: the agent asks for a condensation; the
    # summariser fails, and without a compaction the agent cannot go on.
    condenser = guarded("oh-hard", summarising("", max_size=99))
    _, conversation = converse(tmp_path, condenser, failure=LLMContextWindowExceedError())

    with pytest.raises(ConversationRunError) as raised:
        play(conversation)

    assert isinstance(raised.value.__cause__, SpanguardFaultError)
    [outcome] = condenser.outcomes
    assert outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)
    # The conversation's own record: an error event that names the veto and the limit.
    assert conversation.state.execution_status == ConversationExecutionStatus.ERROR
    [error] = [e for e in conversation.state.events if isinstance(e, ConversationErrorEvent)]
    assert error.code == "SpanguardFaultError"
    assert "hard limit" in error.detail and "EMPTY_SUMMARY" in error.detail
    assert not any(isinstance(e, Condensation) for e in conversation.state.events)


def test_a_summary_at_the_context_limit_that_passes_is_applied(tmp_path: Path) -> None:
    condenser = guarded("oh-hard-ok", summarising(SUMMARY, max_size=99))
    llm, conversation = converse(tmp_path, condenser, failure=LLMContextWindowExceedError())

    play(conversation)

    [outcome] = condenser.outcomes
    assert outcome.applied and outcome.pinned
    assert conversation.state.execution_status == ConversationExecutionStatus.FINISHED
    assert any("8841-C" in t for t in _texts(llm.requests[-1]))


def test_raise_on_stops_the_conversation_with_the_fault(tmp_path: Path) -> None:
    condenser = guarded("oh-raise", summarising(""), raise_on={FaultKind.EMPTY_SUMMARY})
    _, conversation = converse(tmp_path, condenser)

    with pytest.raises(ConversationRunError) as raised:
        play(conversation)

    assert isinstance(raised.value.__cause__, SpanguardFaultError)
    assert raised.value.__cause__.outcome.vetoed_by == (FaultKind.EMPTY_SUMMARY,)
    [error] = [e for e in conversation.state.events if isinstance(e, ConversationErrorEvent)]
    assert error.code == "SpanguardFaultError"


async def test_async_condense_gates_the_same_way(tmp_path: Path) -> None:
    # The async entry point (``acondense``) on the view of a conversation played to its
    # last turn without compaction.
    llm, conversation = run(tmp_path, summarising(SUMMARY, max_size=99))
    condenser = guarded("oh-async", summarising(SUMMARY))

    result = await condenser.acondense(View.from_events(conversation.state.events), llm)

    [outcome] = condenser.outcomes
    assert outcome.applied and outcome.pinned
    assert isinstance(result, Condensation)
    assert result.forgotten_event_ids.isdisjoint(outcome.kept)
