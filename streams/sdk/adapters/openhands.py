"""OpenHands (``openhands-sdk``, Python 3.12+): a condenser that gates another condenser.

Three lines::

    condenser = SpanguardCondenser(session, LLMSummarizingCondenser(llm=summary_llm))
    agent = Agent(llm=llm, tools=tools, condenser=condenser)
    Conversation(agent=agent, workspace=".").run()  # condenser.faults

OpenHands asks the agent's condenser for the context before every LLM call
(``condense(view) -> View | Condensation``): a ``View`` is the events to send, a
``Condensation`` (events forgotten, a summary at an offset) is added to the event
log and gives the next step's view. :class:`SpanguardCondenser` runs the condenser
it wraps and gates what it proposes before the agent applies it:

* the events are the spans (span id = event id): the system prompt and the first
  user message are protected by default; an ``ActionEvent``'s tool call and the
  observation that answers it (``tool_call_id``) are a tool pair;
* a vetoed compaction (an empty or ballooning summary, a rewritten protected event,
  a summary that absorbs half of a tool pair) returns the original view: the agent
  goes on with every event. When the condensation was **required** (a
  ``CondensationRequest`` in the view, sent after the LLM refused the context as too
  long or asked by the user, or a rolling condenser's ``HARD`` requirement: its token
  limit) the veto raises :class:`SpanguardFaultError` instead, which says so: the
  conversation stops with a ``ConversationErrorEvent`` in its events rather than
  send the LLM a context it cannot take, again and again;
* an applied compaction keeps what must stay (pinned: a later event refers to it;
  protected; both halves of a tool pair): the ``Condensation`` returned forgets only
  the rest, its summary where the gate placed it; a ``View`` holds the decided events.

Faults accumulate in ``faults`` (the condenser is the one the conversation's agent
holds: ``conversation.state.agent.condenser.faults``), each veto is logged as a
warning, and kinds in ``raise_on`` raise :class:`SpanguardFaultError`, which the
conversation records as a ``ConversationErrorEvent``. Each condense call is one agent
step: it advances the session's ``turn``.

Importing this module needs ``openhands-sdk`` (Python 3.12 or newer); nothing else in
:mod:`spanguard.streams.sdk` imports it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Unpack

from openhands.sdk.context.condenser import CondenserBase, RollingCondenser
from openhands.sdk.context.condenser.base import CondensationRequirement
from openhands.sdk.context.view import View
from openhands.sdk.event import Condensation, CondensationSummaryEvent, LLMConvertibleEvent
from openhands.sdk.llm import LLM, TextContent
from pydantic import PrivateAttr

from spanguard.schemas import IntegrityFault
from spanguard.streams.sdk.bridge import AnySession, run_async, run_sync
from spanguard.streams.sdk.compaction import (
    CompactionGuard,
    CompactionOutcome,
    GuardOptions,
    SpanguardFaultError,
)
from spanguard.streams.sdk.messages import Message

__all__ = ["SpanguardCondenser", "SpanguardFaultError", "event_message"]

log = logging.getLogger(__name__)

Result = View | Condensation


def event_message(event: LLMConvertibleEvent, guard: CompactionGuard) -> Message:
    """The SDK message of an OpenHands event: its LLM message's text (and tool call, as
    JSON: the arguments hold identifiers a later turn may refer to), its role, the tool
    call it makes or answers. A condensation's summary is never protected."""
    message = event.to_llm_message()
    parts = [c.text for c in message.content if isinstance(c, TextContent)]
    calls = message.tool_calls or []
    if calls:
        encoded = [{"name": c.name, "arguments": c.arguments} for c in calls]
        parts.append(json.dumps(encoded, sort_keys=True))
    text = "\n".join(p for p in parts if p)
    summary = isinstance(event, CondensationSummaryEvent)
    return Message(
        id=event.id,
        text=text,
        role=message.role,
        tokens=guard.token_counter(text) if guard.token_counter is not None else None,
        tool_call_ids=tuple(dict.fromkeys(c.id for c in calls if c.id)),
        tool_call_id=message.tool_call_id or None,
        protected=False if summary else None,
    )


class SpanguardCondenser(CondenserBase):
    """Gates the compactions of ``condenser`` (see the module).

    ``session``: the spanguard session of the conversation; options:
    :class:`~spanguard.streams.sdk.compaction.GuardOptions`. ``faults`` lists every
    fault the gated compactions raised, ``outcomes`` every gated compaction.
    """

    condenser: CondenserBase
    """The condenser whose proposals are gated (serialised with the agent)."""

    _guard: CompactionGuard = PrivateAttr()
    _gone: set[str] = PrivateAttr(default_factory=set)
    _faults: list[IntegrityFault] = PrivateAttr(default_factory=list)

    def __init__(
        self,
        session: AnySession,
        condenser: CondenserBase,
        **options: Unpack[GuardOptions],
    ) -> None:
        super().__init__(condenser=condenser)
        self._guard = CompactionGuard(session, **options)

    @property
    def guard(self) -> CompactionGuard:
        """The guard: its session, options and ``outcomes``."""
        return self._guard

    @property
    def faults(self) -> list[IntegrityFault]:
        """Every fault of the gated compactions, in order."""
        return self._faults

    @property
    def outcomes(self) -> list[CompactionOutcome]:
        """Every gated compaction, in order."""
        return self._guard.outcomes

    def get_llm(self) -> LLM | None:
        """The wrapped condenser's LLM."""
        return self.condenser.get_llm()

    def handles_condensation_requests(self) -> bool:
        """As the wrapped condenser (the agent sends it its ``CondensationRequest``)."""
        return self.condenser.handles_condensation_requests()

    def condense(self, view: View, agent_llm: LLM | None = None) -> Result:
        """The wrapped condenser's result, gated (sync agents)."""
        required = self._required(view, agent_llm)
        result = self.condenser.condense(view, agent_llm=agent_llm)
        session = self._guard.session
        return run_sync(session, self._gate(view, result, required=required))

    async def acondense(self, view: View, agent_llm: LLM | None = None) -> Result:
        """The wrapped condenser's result, gated (async agents)."""
        required = self._required(view, agent_llm)
        result = await self.condenser.acondense(view, agent_llm=agent_llm)
        return await run_async(self._guard.session, self._gate(view, result, required=required))

    def _required(self, view: View, agent_llm: LLM | None) -> bool:
        """Whether the agent cannot go on without a compaction: it asked for one (the LLM
        refused the context, or the user asked), or the rolling condenser's requirement
        is ``HARD`` (its token limit)."""
        if view.unhandled_condensation_request:
            return True
        if isinstance(self.condenser, RollingCondenser):
            need = self.condenser.condensation_requirement(view, agent_llm=agent_llm)
            return need == CondensationRequirement.HARD
        return False

    async def _gate(self, view: View, result: Result, *, required: bool) -> Result:
        guard = self._guard
        # What the session holds: the view without what an earlier ``View`` result left
        # out (such a view is not persisted: the agent's next view has those again).
        events = [e for e in view.events if e.id not in self._gone]
        before = [event_message(e, guard) for e in events]
        await guard.session.observe(before)
        guard.next_turn()
        proposed = result.apply(events) if isinstance(result, Condensation) else result.events
        after = [event_message(e, guard) for e in proposed]
        if [(m.id, m.text) for m in after] == [(m.id, m.text) for m in before]:
            return result
        name = type(self.condenser).__name__
        outcome = await guard.gate(before, after, strategy=name)
        self._faults.extend(outcome.faults)
        guard.check_raise(outcome)
        if not outcome.applied:
            return self._veto(view, events, outcome, required=required)
        by_id = {e.id: e for e in (*events, *proposed)}
        final = [by_id[m.id] for m in outcome.messages]
        kept = {e.id for e in final}
        self._gone |= {e.id for e in events if e.id not in kept}
        if isinstance(result, Condensation):
            return _condensation(result, view.events, final)
        return View(
            events=final, unhandled_condensation_request=result.unhandled_condensation_request
        )

    def _veto(
        self,
        view: View,
        events: list[LLMConvertibleEvent],
        outcome: CompactionOutcome,
        *,
        required: bool,
    ) -> View:
        """The original view, or, when the agent cannot go on without a compaction, the
        veto raised (:class:`SpanguardFaultError`) so that it says why."""
        if required:
            note = (
                f"{outcome.note}, but the agent needs a compaction "
                "(condensation requested: the context is at its hard limit)"
            )
            log.warning("spanguard: %s", note)
            raise SpanguardFaultError(replace(outcome, note=note))
        log.warning("spanguard: %s", outcome.note)
        if len(events) == len(view.events):
            return view
        return View(
            events=events, unhandled_condensation_request=view.unhandled_condensation_request
        )


def _condensation(
    proposed: Condensation,
    events: Sequence[LLMConvertibleEvent],
    final: Sequence[LLMConvertibleEvent],
) -> Condensation:
    """``proposed`` forgetting only what is not in ``final``, its summary where ``final``
    has it: applied to ``events`` it gives ``final``."""
    kept = {e.id for e in final}
    summary = next(
        (i for i, e in enumerate(final) if isinstance(e, CondensationSummaryEvent)), None
    )
    update: dict[str, Any] = {"forgotten_event_ids": {e.id for e in events if e.id not in kept}}
    if summary is not None:
        update["summary_offset"] = summary
    return proposed.model_copy(update=update)
