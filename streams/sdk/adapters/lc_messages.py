"""LangChain-core messages as SDK :class:`~spanguard.streams.sdk.messages.Message` (LangChain,
LangGraph).

A message's span id is its ``id`` (one is assigned when missing, on the message
object itself, so the framework keeps the same id in its state). Its text is
the text content, plus its tool calls as JSON (a call's arguments hold
identifiers a later turn may refer to). The summary message LangChain's
``SummarizationMiddleware`` writes is reported without its fixed preamble:
the span is the summariser's output, so an empty summary is an empty span.

Tool pairs come from LangChain's own fields: an ``AIMessage``'s
``tool_calls[*]["id"]`` are the span's ``tool_call_ids``, a ``ToolMessage``'s
``tool_call_id`` its ``tool_call_id``. Protection is the session's policy
(``SystemMessage`` is role ``system``, ``HumanMessage`` role ``human``); a
summary ``SummarizationMiddleware`` wrote is never protected.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from spanguard.streams.sdk.messages import Message, TokenCounter

SUMMARY_PREAMBLE = "Here is a summary of the conversation to date:\n\n"
"""What ``SummarizationMiddleware`` puts before the summary text (langchain 1.x)."""


def ensure_id(message: BaseMessage) -> str:
    """The message's id, set to a fresh one when it has none."""
    if not message.id:
        message.id = str(uuid.uuid4())
    return message.id


def span_text(message: BaseMessage) -> str:
    """The text spanguard hashes and extracts referents from."""
    text = str(message.text)
    if message.additional_kwargs.get("lc_source") == "summarization":
        text = text.removeprefix(SUMMARY_PREAMBLE)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
        encoded = json.dumps(calls, sort_keys=True, default=str)
        text = f"{text}\n{encoded}" if text else encoded
    return text


def tool_call_ids(message: BaseMessage) -> tuple[str, ...]:
    """The ids of the tool calls an ``AIMessage`` makes (none for other messages)."""
    if not isinstance(message, AIMessage):
        return ()
    return tuple(dict.fromkeys(str(c["id"]) for c in message.tool_calls if c.get("id")))


def to_message(message: BaseMessage, counter: TokenCounter | None = None) -> Message:
    """The SDK message of a LangChain message (tokens from ``counter`` when given),
    with its tool calls or the call it answers."""
    text = span_text(message)
    answers = message.tool_call_id if isinstance(message, ToolMessage) else None
    summary = message.additional_kwargs.get("lc_source") == "summarization"
    return Message(
        id=ensure_id(message),
        text=text,
        role=message.type,
        tokens=counter(text) if counter is not None else None,
        tool_call_ids=tool_call_ids(message),
        tool_call_id=answers or None,
        protected=False if summary else None,
    )


def to_messages(
    messages: Sequence[BaseMessage], counter: TokenCounter | None = None
) -> list[Message]:
    """:func:`to_message` for each."""
    return [to_message(m, counter) for m in messages]


def tool_partners(messages: Sequence[BaseMessage]) -> dict[str, list[str]]:
    """span id -> ids that must stay with it: an AI tool call and its tool results."""
    calls: dict[str, str] = {}
    partners: dict[str, list[str]] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    calls[str(call["id"])] = ensure_id(message)
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            ai_id = calls[message.tool_call_id]
            tool_id = ensure_id(message)
            partners.setdefault(ai_id, []).append(tool_id)
            partners.setdefault(tool_id, []).append(ai_id)
    return partners


def apply_update(
    messages: Sequence[BaseMessage], update: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The message list after a state update, as LangGraph's ``add_messages`` reducer makes it."""
    for message in messages:
        ensure_id(message)
    left: list[Any] = list(messages)
    right: list[Any] = list(update)
    merged = add_messages(left, right)
    return [m for m in merged if isinstance(m, BaseMessage)]


def replace_all(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A state update that makes ``messages`` the whole list."""
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]
