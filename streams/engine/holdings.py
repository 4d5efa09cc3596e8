"""Turning a span's text and harness-declared referents into stored holdings.

The result holds keyed hashes only: raw identifiers and text do not survive
this module (a mention's surface is kept only when the deployment allows it).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from spanguard.schemas import MentionIn, Referent
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.keys import KeyHasher, StoredKey
from spanguard.streams.engine.names import NameBook, NameScan, match_book, new_names
from spanguard.streams.engine.referent_index import (
    Hold,
    Holds,
    Mention,
    flat_holds,
    hold_pairs,
)
from spanguard.streams.engine.referents import Scan, find_anaphors, scan_text

BOOK_WORD_ENTRIES = 65536
"""Stored forms of book words and entries remembered per builder (cleared when full)."""

SCAN_CACHE_ENTRIES = 4096
"""Scans of recent texts kept per builder, in each of two generations (see
:class:`HoldingsBuilder`)."""


SHARED_HOLDS_ENTRIES = 4096
"""Distinct holds and mention tuples (and distinct items in them) remembered to be
shared by the spans that hold or mention the same (:func:`share_holds`,
:func:`share_mentions`; cleared when full)."""

Item = TypeVar("Item", bound=Hashable)

_shared_holds: dict[Holds, Holds] = {}
_shared_items: dict[StoredKey, StoredKey] = {}
_shared_mentions: dict[tuple[Mention, ...], tuple[Mention, ...]] = {}
_shared_mention_items: dict[Mention, Mention] = {}


def _shared(
    values: tuple[Item, ...],
    tuples: dict[tuple[Item, ...], tuple[Item, ...]],
    items: dict[Item, Item],
) -> tuple[Item, ...]:
    """``values``, or the equal tuple remembered in ``tuples``; a new one keeps the items
    remembered in ``items`` (both bounded, cleared when full)."""
    found = tuples.get(values)
    if found is not None:
        return found
    if len(items) >= SHARED_HOLDS_ENTRIES:
        items.clear()
    if len(tuples) >= SHARED_HOLDS_ENTRIES:
        tuples.clear()
    # ``map``: no Python loop over the items.
    shared = tuple(map(items.setdefault, values, values))
    tuples[shared] = shared
    return shared


def share_holds(holds: Holds) -> Holds:
    """``holds`` (flat, :data:`~spanguard.streams.engine.referent_index.Holds`), or an
    equal tuple a recent span already keeps: spans of a session hold the same referents
    again and again (in the simulated fleet, 2,661 spans with holds have 1,214 distinct
    ones), and each tuple costs 56 B and more. A new tuple keeps the key and type
    objects that recent ones keep, so equal keys decoded apart (a restore reads each
    span's own) are one object. A pure memory measure: only which equal object a span
    keeps changes. Shared by every engine of the process (one thread)."""
    # Keys and types in one dict: a clear key equal to a type string is the same
    # immutable value either way.
    return _shared(holds, _shared_holds, _shared_items) if holds else ()


def share_mentions(mentions: tuple[Mention, ...]) -> tuple[Mention, ...]:
    """``mentions``, or an equal tuple a recent span already keeps, as
    :func:`share_holds`: an anaphor is a mention of a type alone (``that hotel``), and
    sessions of a fleet write the same ones (a mention costs 56 B, a tuple of one 48)."""
    return _shared(mentions, _shared_mentions, _shared_mention_items) if mentions else ()


_shared_strings: dict[frozenset[str], frozenset[str]] = {}


def _remembered(value: Item, table: dict[Item, Item]) -> Item:
    """``value``, or the equal one ``table`` remembers (bounded by
    :data:`SHARED_HOLDS_ENTRIES`, cleared when full)."""
    found = table.get(value)
    if found is not None:
        return found
    if len(table) >= SHARED_HOLDS_ENTRIES:
        table.clear()
    table[value] = value
    return value


def share_strings(members: frozenset[str]) -> frozenset[str]:
    """``members``, or an equal set a recent session already keeps: the sessions of a
    fleet learn the same few entity types, and often protect spans of the same ids (a
    system prompt's), and a set costs 216 B a session and more. A pure memory measure,
    as :func:`share_holds` (bounded by the same number of entries, cleared when full)."""
    return _remembered(members, _shared_strings)


SHARED_ID_LENGTH = 24
"""Ids up to this many characters are shared (:func:`share_id`): longer ones are
mostly random (a UUID is 36), and would only churn the table."""

_shared_ids: dict[str, str] = {}


def share_id(value: str) -> str:
    """``value``, or the equal id string a recent span already keeps: harnesses number
    spans and tool calls per session (``u1``, ``call_3``), so every session keeps its
    own copy of the same short ids (49 B and more each, ~2 KB a simulated session,
    its gone spans' included). A pure memory measure, as :func:`share_holds` (bounded,
    cleared when full); a long id is kept as given."""
    return value if len(value) > SHARED_ID_LENGTH else _remembered(value, _shared_ids)


def forget_shared() -> None:
    """Forget the holds, mentions, keys and sets remembered to be shared (the spans and
    sessions keep theirs; later ones share among themselves again)."""
    shares: tuple[dict[Any, Any], ...] = (
        _shared_holds,
        _shared_items,
        _shared_mentions,
        _shared_mention_items,
        _shared_strings,
        _shared_ids,
    )
    for shared in shares:
        shared.clear()


Surfaces = tuple[tuple[StoredKey, str], ...]
"""``(key hash, surface)``: how a span wrote what it holds, kept only when the
deployment allows span text in state (``emit_surfaces``)."""


@dataclass(frozen=True, slots=True)
class Holdings:
    """What a span holds (flat ``(key hash, type, ...)``, :data:`Holds`), what it
    mentions, and (with ``emit_surfaces``) how it wrote them."""

    holds: Holds = ()
    mentions: tuple[Mention, ...] = ()
    surfaces: Surfaces = ()

    def union(self, other: Holdings) -> Holdings:
        """Both spans' holdings, without repeats, in a stable order."""
        if not other.holds or not self.holds:
            holds = self.holds or other.holds  # each is already without repeats
        else:
            holds = flat_holds(dict.fromkeys(hold_pairs(self.holds + other.holds)))
        held = set(holds[::2])
        mentions = tuple(
            m for m in dict.fromkeys(self.mentions + other.mentions) if m.key not in held
        )
        surfaces = tuple(dict(other.surfaces + self.surfaces).items())
        return Holdings(share_holds(holds), share_mentions(mentions), surfaces)


def _shared_words(scan: Scan) -> Scan:
    """``scan`` with the strings of its case-folded words shared with every other
    scan's (``sys.intern``): texts mostly repeat each other's words (in the mixed
    workload, 5,300 distinct words among 123,000 in 8,192 cached scans), so a cached
    scan keeps ~15 pointers instead of ~15 strings of its own, ~750 B less an entry.
    An equal scan: only whom the strings are shared with changes."""
    names = scan.names
    # The constructors, not ``_replace`` (a generic Python loop on every call).
    folded = frozenset(map(sys.intern, names.folded))
    return Scan(
        identifiers=scan.identifiers,
        phrases=scan.phrases,
        names=NameScan(names=names.names, folded=folded, words=names.words),
    )


class _KnownTypes:
    """``in`` test against the session's known types, through the type hasher."""

    __slots__ = ("_hasher", "_known", "_tenant")

    def __init__(self, hasher: KeyHasher, tenant: str, known: frozenset[str]) -> None:
        self._hasher = hasher
        self._tenant = tenant
        self._known = known

    def __contains__(self, raw_type: object) -> bool:
        return (
            isinstance(raw_type, str) and self._hasher.type(self._tenant, raw_type) in self._known
        )


class HoldingsBuilder:
    """Builds :class:`Holdings` for one tenant's spans.

    Texts repeat (templated tool results and messages, texts quoted again), and
    extraction is the costliest step of a span, so the scan of a text (a pure
    function of it) is remembered by the text's sha256: up to
    :data:`SCAN_CACHE_ENTRIES` recent ones, plus the previous generation of as many
    (a hit there moves the scan forward), which keeps what is still in use when a
    generation fills. It holds extracted identifiers and the words of
    determiner phrases in clear, like the key cache of :class:`KeyHasher`, never
    whole texts.
    """

    __slots__ = (
        "_book_words",
        "_hash_types",
        "_hasher",
        "_previous_scans",
        "_scans",
        "_surfaces",
    )

    def __init__(self, settings: EngineSettings) -> None:
        self._hasher = KeyHasher(
            settings.secret.get_secret_value(),
            clear_keys=settings.clear_keys,
            hash_types=settings.hash_types,
        )
        self._hash_types = settings.hash_types
        self._surfaces = settings.emit_surfaces
        self._scans: dict[str, Scan] = {}
        self._previous_scans: dict[str, Scan] = {}
        self._book_words: dict[tuple[str, str], StoredKey] = {}

    def clear_caches(self) -> None:
        """Forget every cached scan and stored form (they are made again on demand)."""
        self._scans.clear()
        self._previous_scans.clear()
        self._book_words.clear()
        self._hasher.clear_caches()

    def _scan(self, text: str, text_sha256: str) -> Scan:
        scan = self._scans.get(text_sha256)
        if scan is None:
            scan = self._previous_scans.get(text_sha256)
            if scan is None:
                scan = _shared_words(scan_text(text))
            if len(self._scans) >= SCAN_CACHE_ENTRIES:
                self._previous_scans = self._scans
                self._scans = {}
            self._scans[text_sha256] = scan
        return scan

    def _book_word(self, tenant: str, folded: str) -> StoredKey:
        """The stored form of a name-book word or entry (cached)."""
        cached = self._book_words.get((tenant, folded))
        if cached is None:
            if len(self._book_words) >= BOOK_WORD_ENTRIES:
                self._book_words.clear()
            cached = self._book_words[(tenant, folded)] = self._hasher.word(tenant, folded)
        return cached

    def build(
        self,
        tenant: str,
        known_types: frozenset[str],
        book: NameBook[StoredKey],
        text: str | None,
        text_sha256: str,
        introduces: Iterable[Referent] | None,
        mentions: Iterable[MentionIn] | None,
    ) -> Holdings:
        """Holdings from the built-in extractor (when there is text, whose sha256 is
        ``text_sha256``) and the harness's lists.

        ``known_types`` (the session's introduced types) decides what counts as
        an anaphor; it is not changed here (see :meth:`learn_types`). ``book`` (the
        session's name book, in stored form) gives the names the text repeats and
        learns the text's new ones.
        """
        hasher = self._hasher
        holds: dict[Hold, None] = {}
        found: dict[Mention, None] = {}
        # The first way the text wrote each held key (only with emit_surfaces).
        surfaces: dict[StoredKey, str] | None = {} if self._surfaces else None
        if text:
            # The extractor asks about lower-case words only; unless types are hashed,
            # their stored form is the word itself, so the session's set answers directly.
            known = (
                known_types if not self._hash_types else _KnownTypes(hasher, tenant, known_types)
            )
            scan = self._scan(text, text_sha256)
            for key, type_, written, _ in scan.identifiers:
                stored = hasher.key(tenant, key)
                holds[(stored, hasher.type(tenant, type_))] = None
                if surfaces is not None:
                    surfaces.setdefault(stored, written)
            self._names(tenant, book, text, scan, holds, surfaces)
            anaphors = find_anaphors(scan.phrases, known) if known else ()
            for anaphor_type, anaphor_surface, _ in anaphors:
                surface = anaphor_surface if self._surfaces else None
                found[Mention(type=hasher.type(tenant, anaphor_type), surface=surface)] = None
        for ref in introduces or ():
            holds[(hasher.key(tenant, ref.key), hasher.type(tenant, ref.type))] = None
        for men in mentions or ():
            surface = men.surface if self._surfaces else None
            if men.key is not None:
                found[Mention(key=hasher.key(tenant, men.key), surface=surface)] = None
            elif men.type is not None:
                found[Mention(type=hasher.type(tenant, men.type), surface=surface)] = None
        held = {key for key, _ in holds}
        kept = tuple(m for m in found if m.key is None or m.key not in held)
        return Holdings(
            share_holds(flat_holds(holds)),
            share_mentions(kept),
            tuple(surfaces.items()) if surfaces else (),
        )

    def _names(
        self,
        tenant: str,
        book: NameBook[StoredKey],
        text: str,
        scan: Scan,
        holds: dict[Hold, None],
        surfaces: dict[StoredKey, str] | None,
    ) -> None:
        """Hold the text's names and the book's names it repeats; teach the book the
        new ones."""
        own = scan.names.names
        if book.firsts:
            stored = self._book_word

            def lookup(entry: str) -> tuple[StoredKey, str] | None:
                return book.get(stored(tenant, entry))

            def starts(word: str) -> bool:
                return book.starts(stored(tenant, word))

            repeats = match_book(scan.names, text, lookup, starts)
            own, repeats = new_names(own, repeats)
            for key, type_, start, end in repeats:
                holds[(key, type_)] = None
                if surfaces is not None:
                    surfaces.setdefault(key, text[start:end])
        if not own:
            return
        hasher = self._hasher
        for name in own:
            held_key = hasher.key(tenant, name.key)
            holds[(held_key, hasher.type(tenant, name.type))] = None
            if surfaces is not None:
                surfaces.setdefault(held_key, name.surface)
        book.learn(
            own,
            lambda raw: self._book_word(tenant, raw),
            lambda raw: hasher.type(tenant, raw),
        )

    @staticmethod
    def learn_types(known_types: frozenset[str], holdings: Holdings) -> frozenset[str]:
        """The session's known types with those a span introduced: ``known_types``
        itself when it has them all (most spans), else a shared equal set
        (:func:`share_strings`)."""
        types = holdings.holds[1::2]
        if known_types.issuperset(types):
            return known_types
        return share_strings(known_types.union(types))
