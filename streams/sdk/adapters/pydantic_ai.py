"""Pydantic AI: a capability that reports every model request and gates history compaction.

Three lines::

    guard = SpanguardHistory(session, compactor=my_history_processor)
    agent = Agent(model, capabilities=[guard])
    result = await agent.run("...")   # spanguard_faults(result.all_messages())

:class:`SpanguardHistory` is a capability whose ``before_model_request`` runs once
per model request: it reports the history (a new turn of the session), runs
``compactor`` (a history processor: ``messages -> messages``, sync or async,
optionally ``(ctx, messages)``; use it instead of ``history_processors=[...]``)
and gates what it proposes: an empty or ballooning summary, a rewritten
protected message or a summary that absorbs half a tool pair is vetoed (the
history stays), what it drops with no summary goes through the gate, and what
must stay is put back (pinned: a retained message refers to it; protected; both
halves of a tool pair). The result becomes the request and the run's history,
as Pydantic AI's own history processing does.

The compaction strategies of ``pydantic-ai-harness`` (``SlidingWindowCompaction``,
``SummarizingCompaction``, the tiers of ``TieredCompaction``...) are gated through
:meth:`SpanguardHistory.gated`, which wraps one as a ``CompactionStrategy``
(``compact(messages, ctx)``); keep the guard in ``capabilities`` too, ahead of the
compaction capability, so that every request is reported and counted as a turn::

    guard = SpanguardHistory(session)
    tiers = TieredCompaction(tiers=[guard.gated(SlidingWindowCompaction(...))], ...)
    agent = Agent(model, capabilities=[guard, tiers])

Faults land in the history: the request a compaction ran before carries them in
its ``metadata["spanguard_faults"]`` (JSON-ready records; :func:`spanguard_faults`
collects them from ``result.all_messages()``), and in ``guard.faults``; kinds in
``raise_on`` raise :class:`~spanguard.streams.sdk.compaction.SpanguardFaultError` out of
``agent.run``.

Spans: one per model message (a request's parts together, a response's parts
together). Pydantic AI messages have no id: the span id is kept in the message's
``metadata["spanguard_span_id"]`` (set on first sight; a copy made with
``dataclasses.replace`` shares it, so it is the same span rewritten). Tool pairs:
a ``ToolCallPart``'s ``tool_call_id`` and the ``ToolReturnPart`` (or tool retry)
answering it. A request holding a ``SystemPromptPart`` has role ``system``, one
with tool returns ``tool``, other requests ``user``, responses ``assistant``: the
system prompt and the first user prompt are protected by default.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Unpack

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import ModelRequestContext

from spanguard.streams.sdk.adapters.items import FAULTS_KEY, ItemGuard, Span, call_text, joined
from spanguard.streams.sdk.bridge import AnySession, run_async
from spanguard.streams.sdk.compaction import GuardOptions

SPAN_KEY = "spanguard_span_id"
"""The metadata key holding a message's span id."""

History = list[ModelMessage]
HistoryCompactor = Callable[..., History | Awaitable[History] | None]
"""A history processor: ``(messages)`` or ``(ctx, messages)`` -> the compacted messages
(None or the same list: nothing to do)."""


def ensure_id(message: ModelMessage) -> str:
    """The message's span id, set in its metadata when it has none."""
    metadata = message.metadata if message.metadata is not None else {}
    if not isinstance(metadata.get(SPAN_KEY), str):
        metadata[SPAN_KEY] = f"pai-{uuid.uuid4().hex}"
        message.metadata = metadata
    return str(metadata[SPAN_KEY])


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return joined(v for v in value if isinstance(v, str))
    return call_text(None, value)


def message_span(message: ModelMessage) -> Span:
    """The span of a Pydantic AI model message: its parts' text, tool calls and returns."""
    parts: list[str] = []
    calls: list[str] = []
    answers: list[str] = []
    kinds: set[str] = set()
    for part in message.parts:
        kind = str(part.part_kind)
        kinds.add(kind)
        if kind == "tool-call":
            calls.append(str(getattr(part, "tool_call_id", "")))
            parts.append(call_text(getattr(part, "tool_name", None), getattr(part, "args", None)))
        elif kind in ("tool-return", "retry-prompt") and getattr(part, "tool_name", None):
            answers.append(str(getattr(part, "tool_call_id", "")))
            parts.append(_content(getattr(part, "content", None)))
        elif kind in ("system-prompt", "user-prompt", "text", "tool-return", "retry-prompt"):
            parts.append(_content(getattr(part, "content", None)))
    if not isinstance(message, ModelRequest):
        role = "assistant"
    elif "system-prompt" in kinds:
        role = "system"
    elif answers:
        role = "tool"
    else:
        role = "user"
    return Span(
        ensure_id(message),
        joined(parts),
        role=role,
        calls=tuple(c for c in calls if c),
        answers=tuple(a for a in answers if a),
    )


def spanguard_faults(messages: Iterable[ModelMessage]) -> list[dict[str, Any]]:
    """Every fault spanguard wrote into the history's metadata, in order."""
    return [f for m in messages for f in (m.metadata or {}).get(FAULTS_KEY, [])]


class SpanguardHistory(ItemGuard[ModelMessage], AbstractCapability[Any]):
    """The capability (see the module): reports each model request, gates ``compactor``.

    Options: :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    # A guard is one session's: identity, not the dataclass fields of AbstractCapability.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(
        self,
        session: AnySession,
        compactor: HistoryCompactor | None = None,
        **options: Unpack[GuardOptions],
    ) -> None:
        ItemGuard.__init__(self, session, **options)
        self.compactor = compactor

    def span(self, item: ModelMessage) -> Span:
        """See :func:`message_span`."""
        return message_span(item)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Report the history, gate the compactor's proposal; the request and the run's
        history become the result. Then the model request's turn starts."""
        try:
            messages = await run_async(
                self.session, self._process(ctx, list(request_context.messages))
            )
        finally:
            self.next_turn()
        request_context.messages = list(messages)
        ctx.messages[:] = messages
        return request_context

    async def _process(self, ctx: RunContext[Any], messages: History) -> History:
        if self.compactor is None:
            await self.observe_items(messages)
            return messages
        for message in messages:
            ensure_id(message)  # before the compactor copies them (a copy keeps the span)
        compactor = self.compactor
        proposed = compactor(ctx, messages) if _takes_ctx(compactor) else compactor(messages)
        if inspect.isawaitable(proposed):
            proposed = await proposed
        name = getattr(compactor, "__name__", type(compactor).__name__)
        return await self.gate_history(messages, proposed, name)

    async def gate_history(
        self, messages: History, proposed: History | None, strategy: str | None
    ) -> History:
        """Gate ``messages -> proposed`` (None or equal: only report); the faults go into
        the metadata of the request being sent (the last message kept)."""
        spans = [self.span(m) for m in messages]
        if proposed is None or proposed == messages:
            await self.session.observe(self.messages(spans))
            return messages
        kept, outcome = await self.gate_items(
            messages, proposed, before_spans=spans, strategy=strategy
        )
        if outcome.faults and kept:
            last = kept[-1]
            last.metadata = {
                **(last.metadata or {}),
                FAULTS_KEY: [
                    *(last.metadata or {}).get(FAULTS_KEY, []),
                    *(f.model_dump(mode="json") for f in outcome.faults),
                ],
            }
        self.check_raise(outcome, list(kept))
        return kept

    def gated(self, inner: Any) -> SpanguardStrategy:
        """``inner`` (a ``pydantic-ai-harness`` ``CompactionStrategy``) gated by this guard."""
        return SpanguardStrategy(self, inner)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not spec-serialisable (it holds a session)."""
        return None


class SpanguardStrategy:
    """A ``pydantic-ai-harness`` ``CompactionStrategy`` whose result spanguard gates
    (made by :meth:`SpanguardHistory.gated`; usable as a ``TieredCompaction`` tier)."""

    def __init__(self, guard: SpanguardHistory, inner: Any) -> None:
        self.guard = guard
        self.inner = inner

    async def compact(self, messages: History, ctx: RunContext[Any]) -> History:
        """The inner strategy's compaction of ``messages``, gated (the original messages
        when vetoed)."""
        before = list(messages)
        for message in before:
            ensure_id(message)  # before the strategy copies them
        proposed: History = await self.inner.compact(list(before), ctx)
        name = type(self.inner).__name__
        return await run_async(self.guard.session, self.guard.gate_history(before, proposed, name))


def _takes_ctx(compactor: Callable[..., Any]) -> bool:
    try:
        return len(inspect.signature(compactor).parameters) >= 2
    except (TypeError, ValueError):  # a builtin or a C callable: the one-argument form
        return False
