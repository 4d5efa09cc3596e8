"""Google ADK: an events summarizer that spanguard gates, and the plugin that watches the session.

Three lines::

    guard = SpanguardSummarizer(session, LlmEventSummarizer(llm))
    app = App(name="support", root_agent=agent, plugins=[guard],
              events_compaction_config=EventsCompactionConfig(summarizer=guard, ...))
    # runner.run_async(...): faults in the ADK session's state["spanguard_faults"]

ADK compacts a session by asking ``EventsCompactionConfig.summarizer`` to summarise
a range of events (``maybe_summarize_events``; both the sliding-window and the
token-threshold compaction go through it) and appending the summary as a
compaction event whose timestamps cover the range; returning None compacts
nothing. :class:`SpanguardSummarizer` wraps your summarizer there:

1. the context is the session's events as the model sees them (raw events outside
   every compaction range, and the summaries), reported to spanguard;
2. the range is cut to what may go: ADK can only replace a contiguous range, so
   the range starts after the last event that has to stay (protected: the task;
   pinned: a retained event refers to it, :meth:`Session.pins_for`; half of a tool
   pair whose other half stays); nothing left: no compaction. Your summarizer then
   summarises that range, not more;
3. its compaction event is gated (the context with the range replaced by the
   summary): an empty or ballooning summary, a rewritten protected event or a
   summary splitting a tool pair is vetoed (None: the events stay); else the
   event is returned, its range narrowed to what spanguard let go.

It is also an ADK plugin (``App(plugins=[guard])`` or ``Runner(plugins=...)``): it
reports the context before every model call (a new turn of the session) and keeps
the session it compacts. Faults go into the ADK session's state
(``state["spanguard_faults"]``, JSON-ready records) by a state-only event appended
through the session service, and into ``guard.faults``. ADK treats an exception of
a summarizer as "no compaction", so kinds in ``raise_on`` raise
:class:`~spanguard.streams.sdk.compaction.SpanguardFaultError` from the plugin's next hook
(the next model call or run) instead.

Spans: an event's ``id``; its text parts, function calls (``tool_call_ids``: the
calls' ids) and function responses (the calls they answer); the user's events
have role ``user`` (the first is protected by default), function responses
``tool``, the rest ``assistant``; a summary is the compaction event's id.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.session import Session as AdkSession

from spanguard.streams.sdk.adapters.items import (
    FAULTS_KEY,
    ItemGuard,
    Span,
    call_text,
    joined,
    pair_partners,
)
from spanguard.streams.sdk.bridge import AnySession, run_async
from spanguard.streams.sdk.compaction import CompactionOutcome, GuardOptions, SpanguardFaultError
from spanguard.streams.sdk.decision import Pin

log = logging.getLogger(__name__)


def _summary_of(event: Event) -> Any:
    return event.actions.compaction if event.actions else None


def event_span(event: Event) -> Span:
    """The span of an ADK event (a compaction event: its summary)."""
    compaction = _summary_of(event)
    content = compaction.compacted_content if compaction is not None else event.content
    parts: list[str] = []
    calls: list[str] = []
    answers: list[str] = []
    for part in (content.parts if content is not None else None) or ():
        if part.text and not part.thought:
            parts.append(part.text)
        if part.function_call is not None:
            calls.append(str(part.function_call.id or ""))
            parts.append(call_text(part.function_call.name, part.function_call.args))
        if part.function_response is not None:
            answers.append(str(part.function_response.id or ""))
            parts.append(call_text(part.function_response.name, part.function_response.response))
    if compaction is not None:
        role = "assistant"
    elif answers:
        role = "tool"
    else:
        role = "user" if event.author == "user" else "assistant"
    return Span(
        event.id,
        joined(parts),
        role=role,
        calls=tuple(c for c in calls if c),
        answers=tuple(a for a in answers if a),
        protected=False if compaction is not None else None,
    )


def _visible(event: Event) -> bool:
    if getattr(event, "isolation_scope", None) is not None or event.partial:
        return False
    if _summary_of(event) is not None:
        return True
    return event.content is not None and bool(event.content.parts)


def context_events(events: Sequence[Event]) -> list[Event]:
    """The events as the model sees them: every raw event no compaction range covers,
    and each summary that no other range contains, at its range's end (ADK's own
    rule: contained ranges are superseded, overlapping ones both stay)."""
    shown = [e for e in events if _visible(e)]
    ranges: list[tuple[float, float, int]] = []
    for index, event in enumerate(shown):
        compaction = _summary_of(event)
        if compaction is not None:
            ranges.append((compaction.start_timestamp, compaction.end_timestamp, index))
    kept = [
        r
        for r in ranges
        if not any(
            o is not r and o[0] <= r[0] and r[1] <= o[1] and (o[:2] != r[:2] or o[2] > r[2])
            for o in ranges
        )
    ]
    placed: list[tuple[float, int, Event]] = [(end, i, shown[i]) for _, end, i in kept]
    for index, event in enumerate(shown):
        covered = any(start <= event.timestamp <= end for start, end, _ in kept)
        if _summary_of(event) is None and not covered:
            placed.append((event.timestamp, index, event))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [event for _, _, event in placed]


class SpanguardSummarizer(ItemGuard[Event], BaseEventsSummarizer, BasePlugin):
    """The gated summarizer and the plugin (see the module).

    ``summarizer``: yours (``LlmEventSummarizer``...). ``faults_key``: the session state
    key of the faults. Other options: :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    def __init__(
        self,
        session: AnySession,
        summarizer: BaseEventsSummarizer,
        *,
        faults_key: str = FAULTS_KEY,
        name: str = "spanguard",
        **options: Unpack[GuardOptions],
    ) -> None:
        ItemGuard.__init__(self, session, **options)
        BasePlugin.__init__(self, name)
        self.summarizer = summarizer
        self.faults_key = faults_key
        self.adk_session: AdkSession | None = None
        """The ADK session the runner last ran (its events are the context)."""
        self.session_service: BaseSessionService | None = None
        self._raise: SpanguardFaultError | None = None
        self._recorded = 0

    def span(self, item: Event) -> Span:
        """See :func:`event_span`."""
        return event_span(item)

    # -- the plugin ------------------------------------------------------------------

    async def before_run_callback(self, *, invocation_context: Any) -> None:
        """Keep the session and its service (the summarizer reads and writes through
        them); raise what a compaction after the previous run left to raise."""
        self.adk_session = invocation_context.session
        self.session_service = invocation_context.session_service
        self._raise_pending()

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        """Report the context the model is called with, then start its turn."""
        self.adk_session = callback_context.session
        try:
            self._raise_pending()
            await run_async(self.session, self.observe_items(self._context()))
        finally:
            self.next_turn()

    def _raise_pending(self) -> None:
        error, self._raise = self._raise, None
        if error is not None:
            raise error

    def _context(self, events: Sequence[Event] = ()) -> list[Event]:
        held = self.adk_session.events if self.adk_session is not None else events
        return context_events(held)

    # -- the summarizer ----------------------------------------------------------------

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        """Summarise what of ``events`` may go (see the module) and gate the summary."""
        return await run_async(self.session, self._summarize(events))

    async def _summarize(self, events: list[Event]) -> Event | None:
        context = self._context(events)
        await self.observe_items(context)
        cut = self._releasable(context, events)
        if not cut.window:
            return None
        proposal = await self.summarizer.maybe_summarize_events(events=cut.window)
        compaction = _summary_of(proposal) if proposal is not None else None
        if proposal is None or compaction is None:
            return None
        held = self.adk_session.events if self.adk_session is not None else context
        after = context_events([*held, proposal])
        name = type(self.summarizer).__name__
        kept, outcome = await self.gate_items(context, after, strategy=name)
        if cut.refused:  # what the cut kept out of the range is what spanguard refused
            outcome = replace(
                outcome,
                refused={**cut.refused, **outcome.refused},
                pins=(*cut.pins, *outcome.pins),
            )
            self.outcomes[-1] = outcome
        await self._surface(outcome)
        if not outcome.applied:
            return None
        gone = [e for e in context if e.id not in {k.id for k in kept}]
        return _narrowed(proposal, context, gone)

    def _releasable(self, context: list[Event], events: list[Event]) -> _Cut:
        """The tail of ``events`` (in the context) after the last event that has to stay:
        protected, pinned by a retained event, or half of a tool pair whose other half
        stays. What stays moves the cut, which can pin more: until nothing changes."""
        candidates = [e for e in events if e.id in {c.id for c in context}]
        spans = {e.id: self.span(e) for e in context}
        partners = pair_partners(list(spans.values()))
        protected = set(self.session.tracker.protected_ids())
        cut = _Cut([], {}, [])
        while candidates:
            ids = {e.id for e in candidates}
            pins = [p for p in self.session.pins_for(list(ids)) or () if p.span_id in ids]
            pinned = {p.span_id for p in pins}
            for event in candidates:
                if event.id in protected:
                    cut.refused.setdefault(event.id, "PROTECTED")
                elif event.id in pinned:
                    cut.refused.setdefault(event.id, "PINNED")
                    cut.pins.extend(p for p in pins if p.span_id == event.id)
                elif any(p not in ids for p in partners.get(event.id, ())):
                    cut.refused.setdefault(event.id, "TOOL_PAIR")
            stays = [i for i, e in enumerate(candidates) if e.id in cut.refused]
            if not stays:
                cut.window = candidates
                return cut
            candidates = candidates[max(stays) + 1 :]
        return cut

    async def _surface(self, outcome: CompactionOutcome) -> None:
        """Faults into the ADK session's state (a state-only event, in the latest
        invocation so that no new invocation is counted), and the error to raise."""
        try:
            self.check_raise(outcome)
        except SpanguardFaultError as error:
            self._raise = error
        faults = self.faults[self._recorded :]
        if not faults or self.adk_session is None or self.session_service is None:
            return
        state = self.adk_session.state.get(self.faults_key) or []
        invocation = next(
            (e.invocation_id for e in reversed(self.adk_session.events) if e.invocation_id),
            Event.new_id(),
        )
        event = Event(
            author=self.name,
            invocation_id=invocation,
            actions=EventActions(state_delta={self.faults_key: [*state, *faults]}),
        )
        await self.session_service.append_event(session=self.adk_session, event=event)
        self._recorded = len(self.faults)


@dataclass(slots=True)
class _Cut:
    """The part of a proposed range that may go, and why the events before it stay."""

    window: list[Event]
    refused: dict[str, str]
    pins: list[Pin]


def _extent(event: Event) -> tuple[float, float]:
    compaction = _summary_of(event)
    if compaction is None:
        return event.timestamp, event.timestamp
    return compaction.start_timestamp, compaction.end_timestamp


def _narrowed(proposal: Event, context: list[Event], gone: list[Event]) -> Event | None:
    """``proposal`` whose range covers exactly ``gone`` (the events spanguard let go;
    None when nothing goes). ADK replaces one contiguous range: when what goes is not
    one run of the context (a rare case the cut of the range prevents), the last run
    goes and a warning says the rest stayed."""
    compaction = _summary_of(proposal)
    if not gone or compaction is None:
        return None
    ids = {e.id for e in gone}
    order = [i for i, e in enumerate(context) if e.id in ids]
    run = order
    if order[-1] - order[0] + 1 != len(order):
        start = max(i for i in order if i - 1 not in order)
        run = [i for i in order if i >= start]
        log.warning("spanguard: ADK compacts one range; %d events stayed", len(order) - len(run))
    spans = [_extent(context[i]) for i in run]  # a summary merged: its whole range
    bounds = {
        "start_timestamp": min(a for a, _ in spans),
        "end_timestamp": max(b for _, b in spans),
    }
    narrowed = compaction.model_copy(update=bounds)
    actions = proposal.actions.model_copy(update={"compaction": narrowed})
    return proposal.model_copy(update={"actions": actions})
