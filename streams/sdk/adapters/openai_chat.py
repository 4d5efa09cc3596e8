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

Tool pairs come from the items themselves (:func:`item_tool_ids`): a Chat
Completions assistant message's ``tool_calls[*].id`` and a ``tool`` message's
``tool_call_id``; a Responses / Agents SDK call item (``function_call``,
``custom_tool_call``, ``computer_call``, ``shell_call``, ``local_shell_call``,
``apply_patch_call``, ``tool_search_call``, ``program``) and its ``*_output``
item by their shared ``call_id``; an ``mcp_approval_request`` and the
``mcp_approval_response`` that names it. The system (or developer) message and
the user's first message are protected by the session's default policy.

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

from spanguard.schemas import IntegrityFault, text_sha256
from spanguard.streams.sdk.bridge import AnySession
from spanguard.streams.sdk.compaction import (
    CompactionGuard,
    CompactionOutcome,
    GuardOptions,
    SpanguardFaultError,
)
from spanguard.streams.sdk.messages import SYSTEM_ROLES, Message

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


CALL_OUTPUT_TYPES: dict[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "local_shell_call": "local_shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
"""Responses item types that call a tool, and the type of the item that answers them
(matched by ``call_id``; the same table as the Agents SDK's own)."""

OUTPUT_TYPES = frozenset(CALL_OUTPUT_TYPES.values())


def item_tool_ids(item: Item) -> tuple[tuple[str, ...], str | None]:
    """(the tool call ids an item makes, the call id it answers) for Chat Completions
    messages and Responses / Agents SDK items; ``((), None)`` for any other item."""
    kind = item.get("type")
    call_id = item.get("call_id")
    if kind in CALL_OUTPUT_TYPES and isinstance(call_id, str) and call_id:
        return (call_id,), None
    if kind in OUTPUT_TYPES and isinstance(call_id, str) and call_id:
        return (), call_id
    if kind == "mcp_approval_request" and isinstance(item.get("id"), str) and item["id"]:
        return (str(item["id"]),), None
    if kind == "mcp_approval_response":
        request = item.get("approval_request_id")
        return (), request if isinstance(request, str) and request else None
    if item.get("role") == "tool":
        answered = item.get("tool_call_id")
        return (), answered if isinstance(answered, str) and answered else None
    calls = tuple(
        dict.fromkeys(
            str(c["id"])
            for c in item.get("tool_calls") or ()
            if isinstance(c, Mapping) and isinstance(c.get("id"), str) and c["id"]
        )
    )
    return calls, None


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode("utf-8")


def _own_id(item: Item) -> str | None:
    if isinstance(item.get("id"), str) and item["id"]:
        return str(item["id"])
    if item.get("type") in OUTPUT_TYPES and isinstance(item.get("call_id"), str):
        return f"out-{item['call_id']}"
    if item.get("role") == "tool" and isinstance(item.get("tool_call_id"), str):
        return f"out-{item['tool_call_id']}"
    return None


def _is_system(item: Item) -> bool:
    return item.get("role") in SYSTEM_ROLES


def _fingerprint(item: Item) -> str:
    return text_sha256(_json(dict(item)))


class ChatGuard(CompactionGuard):
    """Tracks an OpenAI-style list for a session and gates its compactions.

    Options: :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    def __init__(self, session: AnySession, **options: Unpack[GuardOptions]) -> None:
        super().__init__(session, **options)
        self._known: list[tuple[str, str, bool]] = []
        """(fingerprint, span id, is a system message) of the tracked list, in order."""

    def ids(self, items: Sequence[Item]) -> list[str]:
        """Span ids for ``items``: own ids, else the tracked item with the same content
        (in order, each used once), else, for a system (or developer) message, the
        tracked system message in the same rank (a changed system prompt is the system
        prompt rewritten, not a new message), else a fresh id."""
        pool: dict[str, list[str]] = {}
        for fingerprint, span_id, _ in self._known:
            pool.setdefault(fingerprint, []).append(span_id)
        used: set[str] = set()
        systems = [s for _, s, system in self._known if system]
        rank = 0
        result: list[str] = []
        for item in items:
            own = _own_id(item)
            system = _is_system(item)
            if own is None:
                matches = pool.get(_fingerprint(item), [])
                while matches and matches[0] in used:
                    matches.pop(0)
                if matches:
                    own = matches.pop(0)
                elif system and rank < len(systems) and systems[rank] not in used:
                    own = systems[rank]
                else:
                    own = f"item-{uuid.uuid4().hex[:16]}"
            rank += system
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
            calls, answers = item_tool_ids(item)
            result.append(
                Message(
                    span_id,
                    text,
                    role=str(role) if role else None,
                    tokens=tokens,
                    tool_call_ids=calls,
                    tool_call_id=answers,
                )
            )
        return result

    def _remember(self, items: Sequence[Item], ids: Sequence[str]) -> None:
        self._known = [(_fingerprint(i), s, _is_system(i)) for i, s in zip(items, ids, strict=True)]

    async def observe(
        self, items: Sequence[Item], *, new_turn: bool = True
    ) -> list[IntegrityFault]:
        """Report the items not tracked yet (call before each model call); then, unless
        ``new_turn`` is False, the model call starts a new turn (see
        :meth:`~spanguard.streams.sdk.compaction.CompactionGuard.next_turn`)."""
        ids = self.ids(items)
        faults = await self.session.observe(self.messages(items, ids))
        self._remember(items, ids)
        if new_turn:
            self.next_turn()
        return faults

    async def compact(
        self, items: Sequence[Item], compacted: Sequence[Item], *, strategy: str | None = None
    ) -> tuple[list[Item], CompactionOutcome]:
        """Gate the compaction ``items`` -> ``compacted``; returns the items to use (the
        original ones when vetoed or undecided) and the outcome. ``strategy`` names
        the compactor in the rewrite (when the guard was given none)."""
        before_ids = self.ids(items)
        self._remember(items, before_ids)
        after_ids = self.ids(compacted)
        outcome = await self.gate(
            self.messages(items, before_ids),
            self.messages(compacted, after_ids),
            strategy=strategy,
        )
        by_id = dict(zip(before_ids, items, strict=True))
        if outcome.applied:  # a vetoed rewrite of an item keeps the original item
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
        """Store ``items`` and report them (the turn advances in :meth:`run_compaction`)."""
        await self.inner.add_items(items)
        stored = await self.inner.get_items()
        self.faults.extend(await self.guard.observe(stored, new_turn=False))

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (the next report sees the list without it)."""
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        """Clear the stored items."""
        await self.inner.clear_session()

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """The runner's compaction hook, once per agent turn: the turn advances, then the
        compactor runs and its result is gated."""
        self.guard.next_turn()
        if self.compactor is None:
            return
        items = await self.inner.get_items()
        proposed = self.compactor(list(items))
        if inspect.isawaitable(proposed):
            proposed = await proposed
        if proposed is None:
            return
        name = getattr(self.compactor, "__name__", None)
        try:
            result, outcome = await self.guard.compact(items, list(proposed), strategy=name)
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
