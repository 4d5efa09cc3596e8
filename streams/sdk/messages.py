"""The framework-neutral message the SDK tracks, and the default token count.

Adapters turn their framework's messages into :class:`Message`; the session
turns messages into spans. The text stays in the process: only its sha256
(and the referents extracted from it) go on the wire, unless the client is
created with ``send_text=True``.

Contract 1.2 adds what a message is besides its text: the tool calls it makes
(``tool_call_ids``), the call it answers (``tool_call_id``) and whether the
harness must keep it verbatim (``protected``). Adapters fill them from the
framework's own objects; :data:`DEFAULT_PROTECT` protects the system prompt and
the user's first message unless the session is told otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text (the harness's own count goes into ``tokens``)."""

ProtectRule = Literal["system", "first_user"]
"""A named protection rule: ``system`` protects every system (or developer) message,
``first_user`` the session's first user message (the original task)."""

ProtectPredicate = Callable[["Message"], bool]
"""A harness's own protection rule: True protects the message."""

Protect = Collection[ProtectRule | ProtectPredicate]
"""A session's protection policy: named rules and predicates, any of which protects a
message (an empty collection protects nothing)."""

DEFAULT_PROTECT: tuple[ProtectRule, ...] = ("system", "first_user")
"""The default policy: the system prompt and the user's first message are protected."""

SYSTEM_ROLES = frozenset({"system", "developer"})
"""Roles that ``system`` protects (OpenAI's ``developer`` messages are system prompts)."""

USER_ROLES = frozenset({"user", "human"})
"""Roles of a user's message (``human`` is LangChain's)."""


def approximate_tokens(text: str) -> int:
    """About four characters per token (OpenAI's rule of thumb): 0 for empty text.

    Pass the framework's or the model's own counter where it matters; the
    contract only needs every count of a session to come from the same counter.
    """
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class Message:
    """One segment of the context: a chat message, a tool result, a summary.

    ``id`` is the span id (stable for the message's life in the context);
    ``tokens`` None means "count with the session's token counter";
    ``derived_from`` names the span ids a summary replaces (its lineage, declared
    by the caller; the SDK computes everything else by diffing hashes).

    ``tool_call_ids`` are the tool calls the message makes (an assistant message
    with calls), ``tool_call_id`` the call it answers (a tool result): a call and
    its results form a tool pair that leaves the context whole or not at all.
    ``protected`` True keeps the message verbatim (never evicted, never
    rewritten), False never protects it, None (the default) lets the session's
    policy decide (:data:`DEFAULT_PROTECT`). All three belong to the span and are
    sent only when it enters the context: a message a rewrite creates is never
    protected nor half of a pair.
    """

    id: str
    text: str
    role: str | None = None
    tokens: int | None = None
    derived_from: tuple[str, ...] = ()
    tool_call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    protected: bool | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a message needs a non-empty id (its span id)")
        if self.tokens is not None and self.tokens < 0:
            raise ValueError(f"tokens must be >= 0, not {self.tokens}")
        if any(not c for c in self.tool_call_ids) or self.tool_call_id == "":
            raise ValueError("tool call ids must be non-empty")


def is_protected(message: Message, policy: Protect, *, first_user: bool) -> bool:
    """Whether ``policy`` protects ``message`` (its own ``protected`` wins when set).

    ``first_user``: the message is the session's first user message.

    Raises:
        ValueError: For a rule name the policy does not know.
    """
    if message.protected is not None:
        return message.protected
    for rule in policy:
        if callable(rule):
            if rule(message):
                return True
        elif rule == "system":
            if message.role in SYSTEM_ROLES:
                return True
        elif rule == "first_user":
            if first_user:
                return True
        else:
            raise ValueError(f"unknown protection rule {rule!r} (system, first_user)")
    return False


def check_policy(policy: Protect) -> tuple[ProtectRule | ProtectPredicate, ...]:
    """``policy`` as a tuple, every rule name checked.

    Raises:
        ValueError: For a rule name that is neither ``system`` nor ``first_user``
            (a bare string is also refused: ``protect="system"`` would be read
            letter by letter).
    """
    if isinstance(policy, str):
        raise ValueError(f"protect takes a collection of rules, e.g. ({policy!r},)")
    rules = tuple(policy)
    for rule in rules:
        if not callable(rule) and rule not in ("system", "first_user"):
            raise ValueError(f"unknown protection rule {rule!r} (system, first_user)")
    return rules
