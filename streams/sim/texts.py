"""Agent text: templates that know which identifiers, names and anaphors they hold.

The one generator of agent text in the project (the simulator, the hand-written
scenarios and the benchmarks use it). A template marks its entities:

* ``<e0>`` entity 0 as it is first written: an identifier with its noun
  (``order 55012``, typed by the noun), a name as it is spelled (``Warkworth
  House``, typed by its head noun);
* ``<k0>`` entity 0 alone: an identifier without a noun (the template puts a
  stop word before it, so its type is its class: ``is 01223 356354`` ->
  ``phone``), a name in lower case (``warkworth house``), as users type it;
* ``<s0>`` a name shortened to its distinctive part (``the <s0>`` -> ``the
  Warkworth``): a repeat of a name the session's name book already has;
* ``<t0:label>`` an identifier after a label that ends in its noun
  (``<t0:reference number:>`` -> ``reference number: EZNVJAPG``);
* ``<j0:field>`` a JSON field of a tool result (``"reservation_id": "NO6JO3"``,
  typed by the field's noun; ``"hotel_name": "Warkworth House"`` -> ``hotel``);
* ``<a0:that>`` a determiner phrase naming entity 0's type (``that order``,
  ``that hotel``).

:func:`compose` renders a template and records what the text holds, following
the "Referents" rules of contract 1.2, so a caller knows each text's referents
without running the extractor: a name the session's name book already has is
held under the type the book gives it (the type of its first introduction),
whatever form repeats it. :class:`Conversation` picks the next message of a
domain (:mod:`spanguard.streams.sim.vocab`) and keeps the conversation's entities;
:class:`AgentTexts` is the small public API: a deterministic stream of agent
messages from a seed, with no side effect at import.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from spanguard.schemas import text_sha256

Hold = tuple[str, str]
"""(key, type): an entity a text holds; the key is the identifier case-folded, a
phone number's digits, or a name's words case-folded and joined by one space."""

_WORD = re.compile(r"[^\W_]+")
_DIGIT = re.compile(r"\d")

NAME_FIELD_TYPES: Mapping[str, str] = {
    "hotel_name": "hotel",
    "restaurant_name": "restaurant",
    "name": "name",
}
"""JSON name fields the vocabularies use, and the type a value under each gets (the
word before ``name`` when it is a head noun of the contract's name rules)."""


@dataclass(frozen=True, slots=True)
class Entity:
    """A referent of the conversation.

    ``form`` is ``id`` (an identifier: ``noun`` names it in text and is its type,
    ``cls`` is its type when it stands alone), ``phone`` (a phone number: keyed
    by its digits, ``cls`` ``phone``) or ``name`` (a proper name: ``surface`` is
    how it is spelled, ``cls`` its type when the text introduces it (its head
    noun, else ``name``), ``noun`` the word a phrase refers to it by (``that
    hotel``), ``short`` its distinctive part as written, ``""`` without one).
    """

    noun: str
    surface: str
    cls: str
    form: str = "id"
    short: str = ""

    @property
    def key(self) -> str:
        """The contract's key: the identifier case-folded, a phone number's digits,
        a name's words case-folded and joined by one space."""
        if self.form == "phone":
            return "".join(_DIGIT.findall(self.surface))
        if self.form == "name":
            return name_key(self.surface)
        return self.surface.casefold()


def name_key(surface: str) -> str:
    """A name's key: its letter and digit words, case-folded, joined by one space."""
    return " ".join(_WORD.findall(surface.casefold()))


@dataclass(frozen=True, slots=True)
class Text:
    """A span text and the referents the generator knows it holds."""

    text: str
    holds: tuple[Hold, ...]
    anaphors: tuple[str, ...]
    names: tuple[Hold, ...] = ()
    """The part of ``holds`` that are names (introduced or repeated)."""

    @property
    def sha256(self) -> str:
        """The contract's hash of the text."""
        return text_sha256(self.text)

    @property
    def tokens(self) -> int:
        """A token estimate (about 1.3 per word)."""
        return max(1, round(len(self.text.split()) * 1.3))


_MARK = re.compile(r"<([ekastj])(\d)(?::([^>]+))?>")
_TOOL_PREFIX = re.compile(r"[a-z]+_[a-z_]*[:(]")


def field_type(name: str, entity: Entity) -> str:
    """The type a JSON value under field ``name`` gets: a name field's entry of
    :data:`NAME_FIELD_TYPES`, ``phone`` for a phone, else the field's noun
    (``reservation_id`` -> ``reservation``, ``reference`` -> ``reference``)."""
    if entity.form == "name":
        return NAME_FIELD_TYPES[name]
    if entity.form == "phone":
        return "phone"
    words = name.split("_")
    return words[-2] if len(words) > 1 else words[0]


def compose(
    template: str,
    slots: Sequence[Entity],
    known: Container[str],
    fold: bool = False,
    book: Mapping[str, str] | None = None,
) -> Text:
    """Render ``template`` and record what it holds.

    An anaphor phrase counts only when its type is already known in the session
    (``known``) and this text has not introduced that type before the phrase:
    the contract's rule, which the extractor implements. ``book`` maps the keys
    of the names the session's name book has to their types: a name found there
    is held under that type, one not found under the type this text gives it. With
    ``fold`` every identifier and name is written case-folded (``inc-4411``,
    ``warkworth house``; an upper-case code stays as it is): a new surface form of
    the same key, as a paraphrasing model writes it.
    """
    book = book or {}
    parts: list[str] = []
    holds: list[Hold] = []
    names: list[Hold] = []
    anaphors: list[str] = []
    introduced: set[str] = set()
    pos = 0
    for match in _MARK.finditer(template):
        parts.append(template[pos : match.start()])
        kind, index, arg = match.group(1), int(match.group(2)), match.group(3)
        entity = slots[index]
        pos = match.end()
        if kind == "a":
            parts.append(f"{arg} {entity.noun}")
            if entity.noun in known and entity.noun not in introduced:
                anaphors.append(entity.noun)
            continue
        surface = entity.surface
        # A paraphrase writes identifiers case-folded, but keeps an upper-case code as
        # it is (in lower case, "eznvjapg" would be a word, not a code).
        if fold and entity.form == "id" and not (surface.isalpha() and surface.isupper()):
            surface = entity.key
        if fold and entity.form == "name":
            surface = surface.lower()
        type_ = entity.noun
        if kind == "e":
            if entity.form == "name":
                parts.append(surface)
                type_ = entity.cls
            else:
                parts.append(f"{entity.noun} {surface}")
        elif kind == "k":
            parts.append(surface.lower() if entity.form == "name" else surface)
            type_ = entity.cls
        elif kind == "s":
            assert entity.form == "name" and entity.short and entity.key in book, entity
            parts.append(entity.short.lower() if fold else entity.short)
        elif kind == "t":
            parts.append(f"{arg} {surface}")
        else:
            assert arg is not None
            parts.append(f'"{arg}": "{surface}"')
            type_ = field_type(arg, entity)
        if entity.form == "name":
            type_ = book.get(entity.key, type_)
            names.append((entity.key, type_))
        holds.append((entity.key, type_))
        introduced.add(type_)
    parts.append(template[pos:])
    text = "".join(parts)
    if not _TOOL_PREFIX.match(text):  # "lookup_order: ...", "kyc_status(...)" stay as written
        text = text[:1].upper() + text[1:]
    return Text(text, tuple(dict.fromkeys(holds)), tuple(anaphors), tuple(dict.fromkeys(names)))


@dataclass(frozen=True, slots=True)
class Beat:
    """One kind of message: its long, short and tiny forms (a paraphrase moves
    one form down) and its entity slots (``+kind`` a new entity, ``kind`` an
    earlier one)."""

    role: str
    forms: tuple[str, ...]
    slots: tuple[str, ...] = ()


def tool_call(result: Beat) -> Beat:
    """The call that asks for a tool ``result``: it names the tool and, when the
    result's first entity is an earlier one, the argument (``Calling order_status on
    order 55012.``); a result that finds a new entity (a search) is asked for
    without one. (Not "Called ...": the words after ``called`` are a name.)"""
    match = _TOOL_PREFIX.match(result.forms[0])
    tool = match.group(0)[:-1] if match else "search"
    argument = [k for k in result.slots[:1] if not k.startswith("+")]
    if argument:
        forms = (f"Calling {tool} on <e0>.", f"Ran {tool} on <e0>.", f"{tool}: <e0>.")
    else:
        forms = (f"Calling {tool}.", f"Ran {tool}.", f"{tool}.")
    return Beat("call", forms, tuple(argument))


Kind = tuple[str, Callable[[random.Random], str]] | Callable[[random.Random], Entity]
"""How a domain makes an entity of one kind (see :attr:`Domain.kinds`)."""


@dataclass(frozen=True, slots=True)
class Domain:
    """A family of conversations: its entity kinds and its messages."""

    name: str
    referent_dense: bool
    kinds: dict[str, Kind]
    """kind -> (class when alone, factory of a surface) for an identifier, or a
    factory of the whole :class:`Entity` (phones, names)."""
    opening: tuple[Beat, ...]
    user: tuple[Beat, ...]
    tool: tuple[Beat, ...]
    assistant: tuple[Beat, ...]


NEW_ENTITY_LIMIT = 7
"""A conversation introduces no new entity once it knows this many."""


@dataclass(slots=True)
class Conversation:
    """The entities of one conversation and the choice of its next message.

    ``rng`` is shared with the caller (it is not copied by :meth:`clone`), so a
    plan that is thrown away still moves the draws on, as the simulator expects.
    """

    domain: Domain
    rng: random.Random
    entities: list[Entity] = field(default_factory=list)

    def clone(self) -> Conversation:
        """A copy whose entity list a failed plan can throw away."""
        return Conversation(self.domain, self.rng, list(self.entities))

    def new_entity(self, kind: str) -> Entity:
        """A fresh entity of ``kind``: a key the conversation has not used, and for a
        name a distinctive part no other name of it shares (a part two names share
        stands for neither, so ``the Warkworth`` would repeat nothing)."""
        spec = self.domain.kinds[kind]
        taken = {e.key for e in self.entities}
        parts = {e.short.casefold() for e in self.entities if e.short}
        words = {w for e in self.entities if e.form == "name" for w in e.key.split()}
        while True:
            if isinstance(spec, tuple):
                cls, factory = spec
                entity = Entity(kind, factory(self.rng), cls)
            else:
                entity = spec(self.rng)
            if entity.key in taken:
                continue
            if entity.short and (
                entity.short.casefold() in words or parts & set(entity.key.split())
            ):
                continue
            self.entities.append(entity)
            return entity

    def old_entity(self, kind: str, live_keys: Container[str]) -> Entity | None:
        """An entity of ``kind`` talked about before, preferring those still in context."""
        known = [e for e in self.entities if e.noun == kind]
        if not known:
            return None
        held = [e for e in known if e.key in live_keys] or known
        # Recent entities are talked about more.
        return held[-1] if self.rng.random() < 0.6 else self.rng.choice(held)

    def choose(
        self, beats: Sequence[Beat], live_keys: Container[str]
    ) -> tuple[Beat, tuple[Entity, ...]]:
        """The next message among ``beats`` and the entities it names.

        A beat that refers to a kind never introduced is not eligible; referent-dense
        domains favour beats that refer back, sparse ones small talk.
        """
        options: list[tuple[Beat, float]] = []
        count = len(self.entities)
        for beat in beats:
            old = [k for k in beat.slots if not k.startswith("+")]
            new = [k for k in beat.slots if k.startswith("+")]
            if any(not any(e.noun == k for e in self.entities) for k in old):
                continue
            if new and count >= NEW_ENTITY_LIMIT:
                continue
            weight = 1.0
            if old:
                weight = 3.0 if self.domain.referent_dense else 1.0
            elif not beat.slots:
                weight = 1.0 if self.domain.referent_dense else 3.0
            options.append((beat, weight))
        beat = self.rng.choices([b for b, _ in options], weights=[w for _, w in options])[0]
        slots: list[Entity] = []
        for kind in beat.slots:
            if kind.startswith("+"):
                slots.append(self.new_entity(kind[1:]))
            else:
                entity = self.old_entity(kind, live_keys)
                assert entity is not None
                slots.append(entity)
        return beat, tuple(slots)


@dataclass(frozen=True, slots=True)
class Message:
    """One agent message: its role and its text (with what the text holds)."""

    role: str
    text: Text


class AgentTexts:
    """Deterministic agent messages of one domain, from a seed.

    Each turn is a user message, often a tool result, and a reply, written from
    the domain's templates; later turns refer back to earlier entities (by
    anaphor or by repeating the identifier). The same seed gives the same texts.
    """

    def __init__(self, seed: int, domain: Domain) -> None:
        self._conversation = Conversation(domain, random.Random(seed))
        self._known: set[str] = set()
        self._book: dict[str, str] = {}
        """The name book as :func:`compose` reads it: name key -> its type."""
        self._turns = 0

    def turn(self) -> list[Message]:
        """The messages of the next turn."""
        self._turns += 1
        domain = self._conversation.domain
        rng = self._conversation.rng
        groups: list[Sequence[Beat]] = [domain.opening if self._turns == 1 else domain.user]
        if rng.random() < 0.6 or self._turns == 1:
            groups.append(domain.tool)
        groups.append(domain.assistant)
        return [self._message(beats) for beats in groups]

    def turns(self, count: int) -> Iterator[Message]:
        """The messages of the next ``count`` turns, in order."""
        for _ in range(count):
            yield from self.turn()

    def _message(self, beats: Sequence[Beat]) -> Message:
        keys = {e.key for e in self._conversation.entities}
        beat, slots = self._conversation.choose(beats, keys)
        text = compose(beat.forms[0], slots, frozenset(self._known), book=self._book)
        self._known.update(type_ for _, type_ in text.holds)
        for key, type_ in text.names:
            self._book.setdefault(key, type_)
        return Message(beat.role, text)
