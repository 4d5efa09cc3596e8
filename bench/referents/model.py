"""The benchmark's own view of a conversation: turns with annotated values.

Both sources (SGD dialogues, :mod:`bench.referents.sgd`, and the generated
agent runs, :mod:`bench.referents.agent_traces`) become a :class:`Dialogue`: one
:class:`Turn` per span, each with the values its annotation says it states.
Values are compared by :func:`value_key`: their letter and digit words,
case-folded, joined by one space (``"Sino's"`` -> ``"sino s"``), so a repeat is
found in any case and with any punctuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

_WORDS = re.compile(r"[^\W_]+")


def value_key(value: str) -> str:
    """The comparison key of a value or text: letter/digit words case-folded."""
    return " ".join(_WORDS.findall(value.casefold()))


def contains(haystack_key: str, needle_key: str) -> bool:
    """Whether ``needle_key`` occurs in ``haystack_key`` as whole words (both keys
    made by :func:`value_key`)."""
    if not needle_key:
        return False
    return f" {needle_key} " in f" {haystack_key} "


@dataclass(frozen=True, slots=True)
class Value:
    """A value a turn states: its comparison ``key``, value ``cls`` (see
    :data:`bench.referents.sgd.CLASS_OF`), the ``slot`` (annotation field) that
    names it and its ``surface`` as written."""

    key: str
    cls: str
    slot: str
    surface: str


@dataclass(frozen=True)
class Turn:
    """One span: id, role, text and the values its annotation holds; tool-call
    fields and ``protected`` as the contract's ``span.added`` carries them."""

    span_id: str
    role: str
    text: str
    values: tuple[Value, ...] = ()
    tool_call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    protected: bool = False

    @cached_property
    def text_key(self) -> str:
        """:func:`value_key` of the whole text."""
        return value_key(self.text)

    @cached_property
    def keys(self) -> frozenset[str]:
        """The keys of the annotated values."""
        return frozenset(v.key for v in self.values)

    def repeats(self, key: str) -> bool:
        """Whether this turn states ``key``: annotated, or written in its text."""
        return key in self.keys or contains(self.text_key, key)

    @property
    def tokens(self) -> int:
        """The token estimate sent in ``span.added``: the word count (at least 1)."""
        return max(1, len(self.text.split()))


@dataclass(frozen=True)
class Dialogue:
    """One conversation, which becomes one session."""

    dialogue_id: str
    turns: tuple[Turn, ...]
    services: tuple[str, ...] = ()
    index: dict[str, Turn] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {t.span_id: t for t in self.turns})

    def first_introductions(self) -> dict[str, tuple[int, Value]]:
        """Every value key -> (index of the earliest turn whose annotation holds
        it, that annotation). The class of a value is its first annotation's."""
        first: dict[str, tuple[int, Value]] = {}
        for position, turn in enumerate(self.turns):
            for value in turn.values:
                first.setdefault(value.key, (position, value))
        return first
