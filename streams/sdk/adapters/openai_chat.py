"""OpenAI-style message lists (Chat Completions messages, Responses / Agents SDK items).

Plain harness code, three lines::

    guard = ChatGuard(session)
    await guard.observe(messages)                                  # before each model call
    messages, outcome = await guard.compact(messages, compacted)   # gate a compaction

The OpenAI Agents SDK: :class:`SpanguardAgentsSession` wraps any of its
sessions (``SQLiteSession``...) and gates your compactor in the SDK's own
compaction hook (``run_compaction``, called by the runner after each turn)::

    session = SpanguardAgentsSession(SQLiteSession("conv-1"), guard_session, compactor)
    result = await Runner.run(agent, "...", session=session)

Span ids: an item's own ``id`` (Responses items, assistant messages), else
``call_id`` for tool results, else the item is matched to the tracked list by
its content (an identical item keeps its span; a changed one is a new span
whose lineage is what the compaction removed). Items are never modified: no
extra key is added to what goes to the API.

Importing this module needs no framework; :class:`SpanguardAgentsSession`
uses only the Agents SDK's session protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``, ``run_compaction``).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, Unpack

import orjson

from schemas import IntegrityFault, text_sha256
from streams.sdk.bridge import AnySession
from streams.sdk.compaction import (
    CompactionGuard,
    CompactionOutcome,
    GuardOptions,
    SpanguardFaultError,
)
from streams.sdk.messages import Message

Item = Mapping[str, Any]


def item_text(item: Item) -> str:
    """The text spanguard hashes for an item: its content, tool call or tool output."""
    parts: list[str] = []
    content = item.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
    if item.get("type") == "function_call":
        parts.append(_json({"name": item.get("name"), "arguments": item.get("arguments")}))
    if item.get("type") == "function_call_output":
        output = item.get("output")
        parts.append(output if isinstance(output, str) else _json(output))
    for call in item.get("tool_calls") or ():  # Chat Completions assistant tool calls
        if isinstance(call, Mapping):
            parts.append(_json(call.get("function")))
    return "\n".join(parts)


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode("utf-8")


def _own_id(item: Item) -> str | None:
    if isinstance(item.get("id"), str) and item["id"]:
        return str(item["id"])
    if item.get("type") == "function_call_output" and isinstance(item.get("call_id"), str):
        return f"out-{item['call_id']}"
    return None


def _fingerprint(item: Item) -> str:
    return text_sha256(_json(dict(item)))


def _partners(items: Sequence[Item], ids: Sequence[str]) -> dict[str, list[str]]:
    """A tool call and its output stay together (the API refuses one without the other)."""
    calls: dict[str, str] = {}
    partners: dict[str, list[str]] = {}
    for item, span_id in zip(items, ids, strict=True):
        call_id = item.get("call_id")
        if item.get("type") == "function_call" and isinstance(call_id, str):
            calls[call_id] = span_id
        for call in item.get("tool_calls") or ():
            if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                calls[call["id"]] = span_id
    for item, span_id in zip(items, ids, strict=True):
        call_id = item.get("call_id") or item.get("tool_call_id")
        is_output = item.get("type") == "function_call_output" or item.get("role") == "tool"
        if is_output and isinstance(call_id, str) and call_id in calls:
            partners.setdefault(span_id, []).append(calls[call_id])
            partners.setdefault(calls[call_id], []).append(span_id)
    return partners


class ChatGuard(CompactionGuard):
    """Tracks an OpenAI-style list for a session and gates its compactions.

    Options: :class:`~streams.sdk.compaction.GuardOptions`.
    """

    def __init__(self, session: AnySession, **options: Unpack[GuardOptions]) -> None:
        super().__init__(session, **options)
        self._known: list[tuple[str, str]] = []
        """(fingerprint, span id) of the tracked list, in order."""

    def ids(self, items: Sequence[Item]) -> list[str]:
        """Span ids for ``items``: own ids, else the tracked item with the same content
        (in order, each used once), else a fresh id."""
        pool: dict[str, list[str]] = {}
        for fingerprint, span_id in self._known:
            pool.setdefault(fingerprint, []).append(span_id)
        used: set[str] = set()
        result: list[str] = []
        for item in items:
            own = _own_id(item)
            if own is None:
                matches = pool.get(_fingerprint(item), [])
                while matches and matches[0] in used:
                    matches.pop(0)
                own = matches.pop(0) if matches else f"item-{uuid.uuid4().hex[:16]}"
            span_id = own
            if span_id in used:
                span_id = f"{span_id}~{uuid.uuid4().hex[:8]}"  # the same id twice in one list
            used.add(span_id)
            result.append(span_id)
        return result

    def messages(self, items: Sequence[Item], ids: Sequence[str]) -> list[Message]:
        """The SDK messages of ``items`` under ``ids``."""
        result = []
        for item, span_id in zip(items, ids, strict=True):
            text = item_text(item)
            tokens = self.token_counter(text) if self.token_counter else None
            role = item.get("role") or item.get("type")
            result.append(Message(span_id, text, role=str(role) if role else None, tokens=tokens))
        return result

    def _remember(self, items: Sequence[Item], ids: Sequence[str]) -> None:
        self._known = [(_fingerprint(i), s) for i, s in zip(items, ids, strict=True)]

    async def observe(self, items: Sequence[Item]) -> list[IntegrityFault]:
        """Report the items not tracked yet (call before each model call)."""
        ids = self.ids(items)
        faults = await self.session.observe(self.messages(items, ids))
        self._remember(items, ids)
        return faults

    async def compact(
        self, items: Sequence[Item], compacted: Sequence[Item]
    ) -> tuple[list[Item], CompactionOutcome]:
        """Gate the compaction ``items`` -> ``compacted``; returns the items to use (the
        original ones when vetoed or undecided) and the outcome."""
        before_ids = self.ids(items)
        self._remember(items, before_ids)
        after_ids = self.ids(compacted)
        outcome = await self.gate(
            self.messages(items, before_ids),
            self.messages(compacted, after_ids),
            _partners(items, before_ids),
        )
        by_id = dict(zip(before_ids, items, strict=True))
        by_id.update(zip(after_ids, compacted, strict=True))
        result = [by_id[m.id] for m in outcome.messages]
        self._remember(result, [m.id for m in outcome.messages])
        self.check_raise(outcome, result)
        return result, outcome


class AgentsSession(Protocol):
    """The OpenAI Agents SDK's session protocol (what this module uses of it)."""

    session_id: str

    async def get_items(self, limit: int | None = None) -> list[Any]: ...
    async def add_items(self, items: list[Any]) -> None: ...
    async def pop_item(self) -> Any | None: ...
    async def clear_session(self) -> None: ...


ItemCompactor = Callable[[list[Any]], Sequence[Any] | Awaitable[Sequence[Any] | None] | None]


class SpanguardAgentsSession:
    """An Agents SDK session whose compactions spanguard gates.

    Wraps ``inner`` (where the items live). After every turn the runner calls
    :meth:`run_compaction`; it asks ``compactor`` for the compacted items
    (None: nothing to do), gates them with :class:`ChatGuard` and, when the
    compaction is applied, stores the result in ``inner``. ``faults`` collects
    every fault; kinds in ``raise_on`` raise :class:`SpanguardFaultError` out of
    ``Runner.run``.
    """

    def __init__(
        self,
        inner: AgentsSession,
        session: AnySession,
        compactor: ItemCompactor | None = None,
        **guard_options: Unpack[GuardOptions],
    ) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings = getattr(inner, "session_settings", None)
        self.guard = ChatGuard(session, **guard_options)
        self.compactor = compactor
        self.faults: list[IntegrityFault] = []

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The stored items (the latest ``limit``)."""
        return await self.inner.get_items(limit)

    async def add_items(self, items: list[Any]) -> None:
        """Store ``items`` and report them."""
        await self.inner.add_items(items)
        self.faults.extend(await self.guard.observe(await self.inner.get_items()))

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (the next report sees the list without it)."""
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        """Clear the stored items."""
        await self.inner.clear_session()

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """The runner's compaction hook: run the compactor and gate its result."""
        if self.compactor is None:
            return
        items = await self.inner.get_items()
        proposed = self.compactor(list(items))
        if inspect.isawaitable(proposed):
            proposed = await proposed
        if proposed is None:
            return
        try:
            result, outcome = await self.guard.compact(items, list(proposed))
        except SpanguardFaultError as error:
            self.faults.extend(error.outcome.faults)
            if error.outcome.applied and error.items is not None:
                await self._store([dict(i) for i in error.items])
            raise
        self.faults.extend(outcome.faults)
        if outcome.applied:
            await self._store([dict(i) for i in result])

    async def _store(self, items: list[Any]) -> None:
        await self.inner.clear_session()
        await self.inner.add_items(items)
