"""Counting recall, precision and volume over :class:`~bench.referents.drive.SessionRun`\\ s.

**Recall** (per value class). At each eviction request, a *case* is a value
that a *candidate* span (one the policy selected) first introduced (it is the
earliest turn whose annotation holds the value) and that a *retained* span
(live, not selected, later in position) repeats (its annotation holds it, or
its text writes it out in any case, as whole words). The case is *kept* when the
decision did not commit the candidate; *pinned* when it was refused ``PINNED``.
One case per (request, value).

**Precision** of pins. A pin is *right* when the pinned span and one of its
``pinned_for`` spans share a value other than a city, time, date, count, amount
or category (annotated in one and annotated or written out in the other); or a
``pinned_for`` span writes out the distinctive part of a name the pinned span
holds (the name without a leading "the" and its trailing head noun); or names
the name's type after a determiner ("this restaurant" for a restaurant name).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.referents.drive import PinSeen, SessionRun
from bench.referents.model import Dialogue, Turn, Value, contains, value_key
from bench.referents.sgd import NOT_SHARED, TYPE_WORDS

NAME_LIKE = frozenset({"venue", "event", "media", "person", "product", "name"})
"""Classes whose values are names (the distinctive-part and type-phrase rules)."""

_HEAD_NOUNS = """hotel hotels guest inn motel lodge house guesthouse hostel suites suite resort
    apartments
    apartment residences restaurant restaurants cafe caffe bar grill kitchen bistro diner
    brasserie tavern pub cantina pizzeria steakhouse bakery eatery lounge club room
    museum gallery park garden gardens zoo aquarium theater theatre cinema hall center
    centre stadium arena field pavilion church cathedral temple tower bridge palace castle
    market square plaza beach library college university school institute clinic
    hospital studio studios salon spa"""
HEAD_NOUNS = frozenset(_HEAD_NOUNS.split())
"""Head nouns a venue name ends in ("Acorn Guest House" -> distinctive "acorn")."""

DETERMINERS = ("this", "that", "the", "these", "those", "same", "said")


def distinctive_part(name_key: str) -> str:
    """A name's key without a leading "the" and its trailing head nouns
    (``"the hamilton lodge"`` -> ``"hamilton"``); "" when nothing is left."""
    words = name_key.split()
    if words and words[0] == "the":
        words = words[1:]
    while words and words[-1] in HEAD_NOUNS:
        words = words[:-1]
    return " ".join(words)


def type_phrase(text_key: str, slot: str) -> bool:
    """Whether ``text_key`` names the type of a ``slot`` value after a
    determiner (``"this restaurant"``, ``"that same hotel"``)."""
    words = TYPE_WORDS.get(slot, ())
    if not words:
        return False
    pattern = rf"\b(?:{'|'.join(DETERMINERS)})(?: \w+)? (?:{'|'.join(words)})\b"
    return re.search(pattern, text_key) is not None


def pin_verdict(pinned: Turn, pinned_for: list[Turn]) -> str:
    """Why a pin is right (``shared``, ``distinctive``, ``type``), or ``""`` when
    it is not (see the module docstring)."""
    for other in pinned_for:
        for value in pinned.values:
            if value.cls not in NOT_SHARED and other.repeats(value.key):
                return "shared"
        for value in other.values:
            if value.cls not in NOT_SHARED and pinned.repeats(value.key):
                return "shared"
    for other in pinned_for:
        for value in pinned.values:
            if value.cls not in NAME_LIKE:
                continue
            part = distinctive_part(value.key)
            if part and contains(other.text_key, part):
                return "distinctive"
            if type_phrase(other.text_key, value.slot):
                return "type"
    return ""


@dataclass(slots=True)
class ClassCount:
    """Recall counts of one value class."""

    cases: int = 0
    kept: int = 0
    pinned: int = 0

    @property
    def recall(self) -> float | None:
        """kept / cases (None without cases)."""
        return self.kept / self.cases if self.cases else None


@dataclass(slots=True)
class PinCase:
    """One pin with everything a reader needs."""

    policy: str
    session_id: str
    request_id: str
    pin: PinSeen
    pinned_text: str
    pinned_for_texts: dict[str, str]
    verdict: str
    mention_cls: str | None
    """The class of the value the mention's key is (annotated), if any."""

    def to_json(self) -> dict[str, Any]:
        """As plain JSON data."""
        return {
            "policy": self.policy,
            "session_id": self.session_id,
            "request_id": self.request_id,
            "span_id": self.pin.span_id,
            "pinned_for": list(self.pin.pinned_for),
            "mention": {"key": self.pin.key, "type": self.pin.type, "surface": self.pin.surface},
            "pinned_text": self.pinned_text,
            "pinned_for_texts": self.pinned_for_texts,
            "verdict": self.verdict or "wrong",
            "mention_class": self.mention_cls,
        }


@dataclass(frozen=True, slots=True)
class MissCase:
    """A recall case the gate lost: the candidate committed, a retained span repeating
    its value."""

    policy: str
    session_id: str
    request_id: str
    value: Value
    candidate: Turn
    repeat: Turn

    def to_json(self) -> dict[str, Any]:
        """As plain JSON data."""
        return {
            "policy": self.policy,
            "session_id": self.session_id,
            "request_id": self.request_id,
            "class": self.value.cls,
            "slot": self.value.slot,
            "value": self.value.surface,
            "candidate": {"span_id": self.candidate.span_id, "text": self.candidate.text},
            "repeat": {"span_id": self.repeat.span_id, "text": self.repeat.text},
        }


@dataclass(slots=True)
class Tally:
    """Figures of one policy over many sessions (additive)."""

    sessions: int = 0
    spans: int = 0
    requests: int = 0
    selected_spans: int = 0
    selected_tokens: int = 0
    committed_spans: int = 0
    committed_tokens: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    classes: dict[str, ClassCount] = field(default_factory=dict)
    pins: int = 0
    pins_right: int = 0
    pins_by_verdict: Counter[str] = field(default_factory=Counter)
    pins_by_mention_class: Counter[str] = field(default_factory=Counter)
    """Pins counted by the annotated class of their mention's key ("none": no value)."""
    faults: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    pin_cases: list[PinCase] = field(default_factory=list)
    misses: list[MissCase] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        """Add ``other``'s counts to these."""
        for name in (
            "sessions",
            "spans",
            "requests",
            "selected_spans",
            "selected_tokens",
            "committed_spans",
            "committed_tokens",
            "pins",
            "pins_right",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for counter in (
            "refused",
            "pins_by_verdict",
            "pins_by_mention_class",
            "faults",
            "rejected",
        ):
            getattr(self, counter).update(getattr(other, counter))
        for cls, count in other.classes.items():
            mine = self.classes.setdefault(cls, ClassCount())
            mine.cases += count.cases
            mine.kept += count.kept
            mine.pinned += count.pinned
        self.pin_cases.extend(other.pin_cases)
        self.misses.extend(other.misses)

    def group(self, classes: tuple[str, ...]) -> ClassCount:
        """The counts of several classes summed."""
        total = ClassCount()
        for cls in classes:
            count = self.classes.get(cls)
            if count is not None:
                total.cases += count.cases
                total.kept += count.kept
                total.pinned += count.pinned
        return total

    @property
    def precision(self) -> float | None:
        """right pins / pins (None without pins)."""
        return self.pins_right / self.pins if self.pins else None

    @property
    def volume_drop(self) -> float | None:
        """Share of the selected tokens that the gate kept (not committed)."""
        if not self.selected_tokens:
            return None
        return 1 - self.committed_tokens / self.selected_tokens


def _value_of_key(dialogue: Dialogue, key: str | None) -> Value | None:
    """The annotated value whose key is the mention's key (spaces aside: a phone's
    key is its digits alone), or None."""
    if key is None:
        return None
    wanted = value_key(key).replace(" ", "")
    for turn in dialogue.turns:
        for value in turn.values:
            if value.key.replace(" ", "") == wanted:
                return value
    return None


def count_session(run: SessionRun, wrong_mentions: frozenset[str] = frozenset()) -> Tally:
    """Recall, precision and volume figures of one session; a pin whose mention's
    key is an annotated value of a class in ``wrong_mentions`` (amounts, ratings)
    is wrong whatever else its spans share."""
    dialogue = run.dialogue
    tally = Tally(sessions=1, spans=len(dialogue.turns))
    tally.faults.update(run.faults)
    tally.rejected.update(run.rejected)
    first = dialogue.first_introductions()
    introduced: dict[str, list[Value]] = {}
    for position, value in first.values():
        introduced.setdefault(dialogue.turns[position].span_id, []).append(value)
    order = {turn.span_id: i for i, turn in enumerate(dialogue.turns)}
    for request in run.requests:
        tally.requests += 1
        selected = set(request.selected)
        retained = [dialogue.index[s] for s in request.live if s not in selected]
        tally.selected_spans += len(selected)
        tally.committed_spans += len(request.committed)
        tally.selected_tokens += sum(dialogue.index[s].tokens for s in selected)
        tally.committed_tokens += sum(dialogue.index[s].tokens for s in request.committed)
        tally.refused.update(request.refused.values())
        committed = set(request.committed)
        for candidate in request.selected:
            for value in introduced.get(candidate, ()):
                after = order[candidate]
                repeat = next(
                    (r for r in retained if order[r.span_id] > after and r.repeats(value.key)),
                    None,
                )
                if repeat is None:
                    continue
                count = tally.classes.setdefault(value.cls, ClassCount())
                count.cases += 1
                if candidate not in committed:
                    count.kept += 1
                    if request.refused.get(candidate) == "PINNED":
                        count.pinned += 1
                else:
                    tally.misses.append(
                        MissCase(
                            run.policy,
                            run.session_id,
                            request.request_id,
                            value,
                            dialogue.index[candidate],
                            repeat,
                        )
                    )
        for pin in request.pins:
            pinned = dialogue.index[pin.span_id]
            others = [dialogue.index[s] for s in pin.pinned_for if s in dialogue.index]
            mention_value = _value_of_key(dialogue, pin.key)
            mention_cls = mention_value.cls if mention_value is not None else None
            verdict = "" if mention_cls in wrong_mentions else pin_verdict(pinned, others)
            tally.pins += 1
            tally.pins_right += bool(verdict)
            tally.pins_by_verdict[verdict or "wrong"] += 1
            tally.pins_by_mention_class[mention_cls or "none"] += 1
            tally.pin_cases.append(
                PinCase(
                    run.policy,
                    run.session_id,
                    request.request_id,
                    pin,
                    pinned.text,
                    {o.span_id: o.text for o in others},
                    verdict,
                    mention_cls,
                )
            )
    return tally
