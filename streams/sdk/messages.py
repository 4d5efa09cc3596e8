"""The framework-neutral message the SDK tracks, and the default token count.

Adapters turn their framework's messages into :class:`Message`; the session
turns messages into spans. The text stays in the process: only its sha256
(and the referents extracted from it) go on the wire, unless the client is
created with ``send_text=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text (the harness's own count goes into ``tokens``)."""


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
    """

    id: str
    text: str
    role: str | None = None
    tokens: int | None = None
    derived_from: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a message needs a non-empty id (its span id)")
        if self.tokens is not None and self.tokens < 0:
            raise ValueError(f"tokens must be >= 0, not {self.tokens}")
