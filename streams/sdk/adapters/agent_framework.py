"""Microsoft Agent Framework: a compaction strategy that spanguard gates.

Three lines::

    guard = SpanguardCompaction(session, SummarizationStrategy(client=summariser))
    agent = Agent(client=client, compaction_strategy=guard, context_providers=[guard])
    response = await agent.run("...", session=thread)   # thread.state["spanguard_faults"]

:class:`SpanguardCompaction` is a ``CompactionStrategy`` (``async __call__(messages)
-> bool``) that wraps yours (``SummarizationStrategy``, ``SlidingWindowStrategy``,
``TokenBudgetComposedStrategy``...): usable as ``Agent(compaction_strategy=...)``
(before every model call), on a chat client, or in ``CompactionProvider(
before_strategy=..., after_strategy=...)``. The framework's strategies edit the
list in place: they mark messages excluded (``_excluded``) and insert summaries.
The guard snapshots the list, lets the strategy run, and gates what it did
(the included messages before -> after): a vetoed compaction (an empty or
ballooning summary, a rewritten protected message, half a tool pair summarised)
is undone, list and annotations alike, and the strategy reports no change; an
applied one keeps what the gate and the SDK keep (pinned: a retained message
refers to it; protected; both halves of a tool pair), included again, in
spanguard's order.

It is also a ``ContextProvider``: in ``context_providers`` it writes the faults of
each run to the session's state (``session.state["spanguard_faults"]``, JSON-ready
records) and to the response's ``additional_properties``. Kinds in ``raise_on``
raise :class:`~spanguard.streams.sdk.compaction.SpanguardFaultError` out of ``agent.run``.

Spans: a message's ``message_id`` (one is set when missing). Tool pairs from the
contents: a ``*_call`` content's ``call_id`` (``function_call``...) and the
``*_result`` content answering it; a system message and the first user message
are protected by default; a summary (a message carrying
``_summary_of_message_ids``) is never protected, and its lineage is what it says
it summarises.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from typing import Any, Unpack

from agent_framework import (
    EXCLUDED_KEY,
    GROUP_ANNOTATION_KEY,
    SUMMARIZED_BY_SUMMARY_ID_KEY,
    SUMMARY_OF_MESSAGE_IDS_KEY,
    CompactionStrategy,
    ContextProvider,
    included_messages,
)
from agent_framework import Message as AfMessage

from spanguard.streams.sdk.adapters.items import FAULTS_KEY, ItemGuard, Span, call_text, joined
from spanguard.streams.sdk.bridge import AnySession, run_async
from spanguard.streams.sdk.compaction import GuardOptions


def _summary_of(message: AfMessage) -> tuple[str, ...]:
    group = message.additional_properties.get(GROUP_ANNOTATION_KEY)
    ids = group.get(SUMMARY_OF_MESSAGE_IDS_KEY) if isinstance(group, dict) else None
    return tuple(str(i) for i in ids) if isinstance(ids, list) else ()


def ensure_id(message: AfMessage) -> str:
    """The message's ``message_id``, set to a fresh one when it has none."""
    if not message.message_id:
        message.message_id = f"msg-{uuid.uuid4().hex}"
    return message.message_id


def message_span(message: AfMessage) -> Span:
    """The span of an Agent Framework message: its text, tool calls and results."""
    parts: list[str] = []
    calls: list[str] = []
    answers: list[str] = []
    for content in message.contents:
        kind = str(content.type)
        if kind == "text":
            parts.append(str(content.text or ""))
        elif kind.endswith("_call") and content.call_id:
            calls.append(str(content.call_id))
            parts.append(call_text(content.name, content.arguments))
        elif kind.endswith("_result") and content.call_id:
            answers.append(str(content.call_id))
            result = content.result
            parts.append(result if isinstance(result, str) else call_text(None, result))
    summary = _summary_of(message)
    return Span(
        ensure_id(message),
        joined(parts),
        role=str(message.role),
        calls=tuple(calls),
        answers=tuple(answers),
        protected=False if summary else None,
        derived_from=summary,
    )


class _Snapshot:
    """The list and every message's annotations and contents, to undo a strategy."""

    def __init__(self, messages: list[AfMessage]) -> None:
        self.order = list(messages)
        self.state = [
            (m, copy.deepcopy(m.additional_properties), list(m.contents)) for m in messages
        ]

    def restore(self, messages: list[AfMessage]) -> None:
        messages[:] = self.order
        for message, properties, contents in self.state:
            message.additional_properties.clear()
            message.additional_properties.update(properties)
            message.contents[:] = contents


class SpanguardCompaction(ItemGuard[AfMessage], ContextProvider):
    """A gated ``CompactionStrategy`` and the ``ContextProvider`` that surfaces its faults.

    ``compactor``: the compaction strategy to gate (None: only report the messages).
    ``faults_key``: the session state key (and response property) of the faults;
    ``source_id``: the provider's id. Other options:
    :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    def __init__(
        self,
        session: AnySession,
        compactor: CompactionStrategy | None = None,
        *,
        faults_key: str = FAULTS_KEY,
        source_id: str = "spanguard",
        **options: Unpack[GuardOptions],
    ) -> None:
        ItemGuard.__init__(self, session, **options)
        ContextProvider.__init__(self, source_id)
        self.compactor = compactor
        self.faults_key = faults_key
        self._view: list[AfMessage] = []
        """The messages the model last saw (the context spanguard tracks)."""
        self._seen: set[str] = set()
        """Every message id reported (a message left out of the view stays out)."""

    def span(self, item: AfMessage) -> Span:
        """See :func:`message_span`."""
        return message_span(item)

    async def __call__(self, messages: list[AfMessage]) -> bool:
        """The strategy protocol: run the wrapped strategy on ``messages`` (in place) and
        keep what the gate allows; True when the included messages changed. One call
        per model call (or per provider phase): the session's turn advances after it."""
        try:
            return await run_async(self.session, self._compact(messages))
        finally:
            self.next_turn()

    async def _compact(self, messages: list[AfMessage]) -> bool:
        # The context spanguard tracks is what the model last saw (an in-run compaction
        # is recomputed from the whole history at every call): that view, with the
        # messages added since, is made the included list first, so the strategy
        # compacts it further (a rolling summary) and a veto keeps it.
        now = {ensure_id(m): m for m in messages}
        fresh = [m for m in included_messages(messages) if ensure_id(m) not in self._seen]
        before = [now.get(str(m.message_id), m) for m in self._view] + fresh
        changed = _apply(messages, before)
        self._seen.update(str(m.message_id) for m in fresh)
        self._view = before
        if self.compactor is None:
            await self.observe_items(before)
            return changed
        snapshot = _Snapshot(messages)
        spans = [self.span(m) for m in before]  # before the strategy edits them in place
        if not await self.compactor(messages):
            await self.observe_items(before)
            return changed
        name = getattr(self.compactor, "__name__", type(self.compactor).__name__)
        after = included_messages(messages)
        kept, outcome = await self.gate_items(before, after, before_spans=spans, strategy=name)
        if not outcome.applied:
            snapshot.restore(messages)  # the strategy's edits of annotations and contents
        _apply(messages, kept)
        self._seen.update(str(m.message_id) for m in kept)
        self._view = kept
        self.check_raise(outcome, list(kept))
        return changed or outcome.applied

    async def after_run(
        self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]
    ) -> None:
        """Write the faults of the run to the session's state and the response."""
        faults = self.take_faults()
        if not faults:
            return
        if session is not None:
            session.state.setdefault(self.faults_key, []).extend(faults)
        response = getattr(context, "response", None)
        if response is not None:
            response.additional_properties.setdefault(self.faults_key, []).extend(faults)


def _apply(messages: list[AfMessage], kept: Sequence[AfMessage]) -> bool:
    """Make ``kept`` the included messages, in that order: the rest is excluded, what
    the SDK put back is included again (no longer marked as summarised), a kept message
    the list no longer holds (an earlier summary: in-run summaries are not stored) is
    inserted, and the included slots take ``kept``'s order (excluded messages stay where
    they are). True when the inclusion changed."""
    keep = {str(m.message_id) for m in kept}
    changed = False
    for message in messages:
        excluded = str(message.message_id) not in keep
        if bool(message.additional_properties.get(EXCLUDED_KEY, False)) != excluded:
            message.additional_properties[EXCLUDED_KEY] = excluded
            changed = True
        group = message.additional_properties.get(GROUP_ANNOTATION_KEY)
        if not excluded and isinstance(group, dict):
            group.pop(SUMMARIZED_BY_SUMMARY_ID_KEY, None)
    held = {str(m.message_id) for m in messages}
    for index, message in enumerate(kept):
        if str(message.message_id) in held:
            continue
        following = next((m for m in kept[index + 1 :] if str(m.message_id) in held), None)
        at = next(
            (i for i, m in enumerate(messages) if following is not None and m is following),
            len(messages),
        )
        messages.insert(at, message)
        held.add(str(message.message_id))
        changed = True
    slots = [i for i, m in enumerate(messages) if str(m.message_id) in keep]
    for slot, message in zip(slots, kept, strict=True):
        changed = changed or messages[slot] is not message
        messages[slot] = message
    return changed
