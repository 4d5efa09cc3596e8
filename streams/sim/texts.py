"""Agent text: templates that know which identifiers and anaphors they hold.

The one generator of agent text in the project (the simulator, the hand-written
scenarios and the benchmarks use it). A template marks its entities:
``<e0>`` entity 0 with its noun (``order 55012``, typed by the noun), ``<k0>``
entity 0 alone (typed by its class), ``<a0:that>`` a determiner phrase naming
entity 0's type (``that order``). :func:`compose` renders a template and records
what the text holds, so a caller knows each text's referents without running
the extractor. :class:`Conversation` picks the next message of a domain
(:mod:`streams.sim.vocab`) and keeps the conversation's entities;
:class:`AgentTexts` is the small public API: a deterministic stream of agent
messages from a seed, with no side effect at import.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field

from schemas import text_sha256

Hold = tuple[str, str]
"""(key, type): an entity a text holds; the key is the identifier case-folded."""


@dataclass(frozen=True, slots=True)
class Entity:
    """An identifier of the conversation: ``noun`` names it in text (its type),
    ``cls`` is the type it gets when it stands alone (``id`` or ``path``)."""

    noun: str
    surface: str
    cls: str

    @property
    def key(self) -> str:
        """The contract's key: the identifier case-folded."""
        return self.surface.casefold()


@dataclass(frozen=True, slots=True)
class Text:
    """A span text and the referents the generator knows it holds."""

    text: str
    holds: tuple[Hold, ...]
    anaphors: tuple[str, ...]

    @property
    def sha256(self) -> str:
        """The contract's hash of the text."""
        return text_sha256(self.text)

    @property
    def tokens(self) -> int:
        """A token estimate (about 1.3 per word)."""
        return max(1, round(len(self.text.split()) * 1.3))


# <e0>: entity 0 with its noun ("order 55012": typed by the noun);
# <k0>: entity 0 alone (the template puts a stop word before it, so its type is
#       its class); <a0:that>: a determiner phrase naming entity 0's type.
_MARK = re.compile(r"<([eka])(\d)(?::([a-z ]+))?>")
_TOOL_PREFIX = re.compile(r"[a-z]+_[a-z_]*[:(]")


def compose(
    template: str, slots: Sequence[Entity], known: Container[str], fold: bool = False
) -> Text:
    """Render ``template`` and record what it holds.

    An anaphor phrase counts only when its type is already known in the session
    (``known``) and this text has not introduced that type before the phrase:
    the contract's rule, which the extractor implements. With ``fold`` every
    identifier is written case-folded (``inc-4411``): a new surface form of the
    same key, as a paraphrasing model writes it.
    """
    parts: list[str] = []
    holds: list[Hold] = []
    anaphors: list[str] = []
    introduced: set[str] = set()
    pos = 0
    for match in _MARK.finditer(template):
        parts.append(template[pos : match.start()])
        kind, index, det = match.group(1), int(match.group(2)), match.group(3)
        entity = slots[index]
        surface = entity.key if fold else entity.surface
        if kind == "e":
            parts.append(f"{entity.noun} {surface}")
            holds.append((entity.key, entity.noun))
            introduced.add(entity.noun)
        elif kind == "k":
            parts.append(surface)
            holds.append((entity.key, entity.cls))
            introduced.add(entity.cls)
        else:
            parts.append(f"{det} {entity.noun}")
            if entity.noun in known and entity.noun not in introduced:
                anaphors.append(entity.noun)
        pos = match.end()
    parts.append(template[pos:])
    text = "".join(parts)
    if not _TOOL_PREFIX.match(text):  # "lookup_order: ...", "kyc_status(...)" stay as written
        text = text[:1].upper() + text[1:]
    return Text(text, tuple(dict.fromkeys(holds)), tuple(anaphors))


@dataclass(frozen=True, slots=True)
class Beat:
    """One kind of message: its long, short and tiny forms (a paraphrase moves
    one form down) and its entity slots (``+kind`` a new entity, ``kind`` an
    earlier one)."""

    role: str
    forms: tuple[str, ...]
    slots: tuple[str, ...] = ()


def tool_call(result: Beat) -> Beat:
    """The call that asks for a tool ``result``: it names the tool and, with the
    result's first entity, the argument (``Calling lookup_order on order 55012.``)."""
    match = _TOOL_PREFIX.match(result.forms[0])
    tool = match.group(0)[:-1] if match else "search"
    argument = [k.lstrip("+") for k in result.slots[:1]]
    if argument:
        forms = (f"Calling {tool} on <e0>.", f"Called {tool} on <e0>.", f"{tool}: <e0>.")
    else:
        forms = (f"Calling {tool}.", f"Called {tool}.", f"{tool}.")
    return Beat("call", forms, tuple(argument))


@dataclass(frozen=True, slots=True)
class Domain:
    """A family of conversations: its entity kinds and its messages."""

    name: str
    referent_dense: bool
    kinds: dict[str, tuple[str, Callable[[random.Random], str]]]
    """kind -> (class when alone, factory of a surface)."""
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
        """A fresh entity of ``kind`` (a key the conversation has not used)."""
        cls, factory = self.domain.kinds[kind]
        taken = {e.key for e in self.entities}
        while True:
            entity = Entity(kind, factory(self.rng), cls)
            if entity.key not in taken:
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
        text = compose(beat.forms[0], slots, frozenset(self._known))
        self._known.update(type_ for _, type_ in text.holds)
        return Message(beat.role, text)
