"""The referents of one span: what it holds and what it mentions.

Shared code, on purpose: the contract says "the project's extractor module is
the reference implementation of these rules (the client side uses the same
code)", so the identifier, name and anaphor rules are taken from the pure
function :func:`spanguard.streams.engine.referents.extract`, with the session's name
book as that function keeps it (:class:`spanguard.streams.engine.names.NameBook`, raw
keys: the reference never hashes). Nothing else of :mod:`spanguard.streams.engine` is
used by the reference model. Everything built on top (binding, resolution,
pinning) is re-derived here from the contract.

Contract 1.2: the extractor "runs once per text, in event order (a rewrite's
entries in snapshot order), and keeps one name book per session". Callers
call :func:`from_text` exactly so: once for every ``span.added`` with text
and every rewritten entry with text, in that order, with the session's book.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from spanguard.schemas import MentionIn, Referent
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referents import extract

__all__ = [
    "Mention",
    "NameBook",
    "Referents",
    "canonical_key",
    "copy_book",
    "from_harness",
    "from_text",
]


@dataclass(frozen=True, slots=True)
class Mention:
    """A reference a span makes: to a ``key``, or (``key`` None) an anaphor of ``type``."""

    key: str | None
    type: str | None


@dataclass(frozen=True, slots=True)
class Referents:
    """``holds``: ``(key, type)`` of every entity the span holds (introduced or
    repeated); ``mentions``: the harness's mentions and the text's anaphors."""

    holds: tuple[tuple[str, str], ...] = ()
    mentions: tuple[Mention, ...] = ()

    @property
    def keys(self) -> frozenset[str]:
        """The keys the span holds."""
        return frozenset(key for key, _ in self.holds)

    @property
    def types(self) -> frozenset[str]:
        """The entity types the span holds."""
        return frozenset(kind for _, kind in self.holds)

    def plus(self, other: Referents) -> Referents:
        """Both sets of referents."""
        return Referents(self.holds + other.holds, self.mentions + other.mentions)


def canonical_key(key: str) -> str:
    """A key as the contract compares it: case-folded (a hashed key is kept)."""
    return key.lower() if key.startswith("hmac-sha256:") else key.casefold()


def from_text(text: str, known_types: Set[str], book: NameBook[str]) -> Referents:
    """Referents the built-in extractor finds in ``text``: its identifiers and its
    names (those it introduces and the book's names it repeats, under the full
    name's key) are held, its anaphors mentioned. ``known_types`` are the types
    the session introduced so far (for anaphors); ``book`` is the session's name
    book, which learns the text's new names (so call this once per text, in the
    session's order)."""
    found = extract(text, frozenset(known_types), book)
    holds = tuple((item.key, item.type) for item in found.identifiers)
    holds += tuple((item.key, item.type) for item in found.names)
    mentions = tuple(Mention(None, item.type) for item in found.anaphors)
    return Referents(holds, mentions)


def copy_book(book: NameBook[str]) -> NameBook[str]:
    """An independent copy of a name book (a planner tries events on a copy)."""
    copy: NameBook[str] = NameBook()
    copy.entries = dict(book.entries)
    copy.firsts = set(book.firsts)
    return copy


def from_harness(
    introduces: Iterable[Referent] | None, mentions: Iterable[MentionIn] | None
) -> Referents:
    """Referents the harness sent as ``introduces`` / ``mentions``."""
    holds = tuple((canonical_key(item.key), item.type.lower()) for item in introduces or ())
    said = tuple(
        Mention(
            canonical_key(item.key) if item.key is not None else None,
            item.type.lower() if item.type is not None else None,
        )
        for item in mentions or ()
    )
    return Referents(holds, said)
