"""The simulator speaks like people (contract 1.2, "Referents"): names in both cases,
shortened names and phrases, codes, phone numbers, JSON tool results, cities used as
locations; and the generator knows exactly what each of them holds."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referents import extract
from spanguard.streams.engine.words import is_ordinary, is_proper
from spanguard.streams.sim import SimConfig, SimulatedFleet, simulate
from spanguard.streams.sim.texts import AgentTexts, Domain, Entity, compose
from spanguard.streams.sim.vocab import (
    AIRLINE,
    BOOKING,
    CITIES,
    DOMAINS,
    FAMILY_NAMES,
    GIVEN_NAMES,
    HOTEL_WORDS,
    RESTAURANT_WORDS,
)

WARKWORTH = Entity("hotel", "Warkworth House", "house", "name", "Warkworth")
PHONE = Entity("phone", "01223 356354", "phone", "phone")
CODE = Entity("reference", "EZNVJAPG", "id")
RESERVATION = Entity("reservation", "NO6JO3", "id")


@pytest.fixture(scope="module")
def fleet() -> SimulatedFleet:
    return simulate(SimConfig(sessions=40, seed=23, fault_rate=0.5))


def test_name_words_are_distinctive_and_cities_are_known_places() -> None:
    # A name made of words that are neither ordinary nor known proper nouns is a name
    # in lower case and after any preposition; a known city after "to" is a place.
    for word in [*HOTEL_WORDS, *RESTAURANT_WORDS, *GIVEN_NAMES, *FAMILY_NAMES]:
        assert not is_ordinary(word) and not is_proper(word), word
    for city in CITIES:
        assert is_proper(city) and not is_ordinary(city), city


def test_compose_knows_what_names_phones_codes_and_json_hold() -> None:
    first = compose("I'd suggest <e0>, you can reach it on <k1>.", (WARKWORTH, PHONE), set())
    assert first.text == "I'd suggest Warkworth House, you can reach it on 01223 356354."
    assert first.holds == (("warkworth house", "house"), ("01223356354", "phone"))
    assert first.names == (("warkworth house", "house"),)
    # A later text repeats it in lower case, shortened, or refers to it by a phrase; a
    # name the book has keeps the type of its first introduction.
    book = {"warkworth house": "house"}
    lower = compose("What is the phone number of <k0>?", (WARKWORTH,), {"house"}, book=book)
    assert lower.text == "What is the phone number of warkworth house?"
    assert lower.holds == (("warkworth house", "house"),)
    short = compose("Is the <s0> still free?", (WARKWORTH,), {"house"}, book=book)
    assert short.text == "Is the Warkworth still free?" and short.holds == lower.holds
    phrase = compose("Does <a0:that> have parking?", (WARKWORTH,), {"hotel"}, book=book)
    assert phrase.text == "Does that hotel have parking?" and phrase.anaphors == ("hotel",)
    json = compose(
        "find_hotel: {<j0:hotel_name>, <j1:phone>, <j2:reference>}", (WARKWORTH, PHONE, CODE), set()
    )
    assert json.holds == (
        ("warkworth house", "hotel"),
        ("01223356354", "phone"),
        ("eznvjapg", "reference"),
    )
    assert compose("<j0:reservation_id>", (RESERVATION,), set()).holds == (
        ("no6jo3", "reservation"),
    )
    labelled = compose("Booked, <t0:reference number:>.", (CODE,), set())
    assert labelled.text == "Booked, reference number: EZNVJAPG."
    assert labelled.holds == (("eznvjapg", "reference"),)
    # A paraphrase folds names and identifiers, not an upper-case code.
    folded = compose("<e0>, <e1>, <e2>.", (WARKWORTH, CODE, RESERVATION), set(), True, book)
    assert folded.text == "Warkworth house, reference EZNVJAPG, reservation no6jo3."
    with pytest.raises(AssertionError):
        compose("the <s0>", (WARKWORTH,), set())  # a shortened name the book lacks


def test_every_text_holds_what_the_generator_says_in_session_order(fleet: SimulatedFleet) -> None:
    books: dict[str, NameBook] = defaultdict(NameBook)
    for record in fleet.texts:
        found = extract(record.text, record.known, books[record.session_id])
        held = {(i.key, i.type) for i in found.identifiers} | {(n.key, n.type) for n in found.names}
        assert held == set(record.holds), record
        assert [a.type for a in found.anaphors] == list(record.anaphors), record


_CITY_AFTER = re.compile(r"\b(?:in|from|to|near) (?:" + "|".join(CITIES) + r")\b")


def test_the_fleet_exercises_every_referent_rule(fleet: SimulatedFleet) -> None:
    seen: Counter[str] = Counter()
    books: dict[str, NameBook] = defaultdict(NameBook)
    introduced: dict[str, set[str]] = defaultdict(set)
    for record in fleet.texts:
        book = books[record.session_id]
        found = extract(record.text, record.known, book)
        for name in found.names:
            lower = name.surface == name.surface.lower()
            if name.key not in introduced[record.session_id]:
                introduced[record.session_id].add(name.key)
                seen["name introduced in lower case" if lower else "name introduced cased"] += 1
            elif name.surface.casefold() != name.key:
                seen["name shortened"] += 1
            else:
                seen["name repeated in lower case" if lower else "name repeated cased"] += 1
        for identifier in found.identifiers:
            if identifier.type == "phone":
                seen["phone"] += 1
            if identifier.surface.isalpha() and identifier.surface.isupper():
                seen["upper-case code"] += 1
        if "{" in record.text:
            seen["JSON tool result"] += 1
            seen["JSON identifying value"] += sum(
                f'": "{i.surface}"' in record.text for i in found.identifiers
            )
            seen["JSON amount (not held)"] += '"price": ' in record.text
        if _CITY_AFTER.search(record.text):
            seen["city used as a location"] += 1
            assert not any(n.key in {c.lower() for c in CITIES} for n in found.names), record
        seen["anaphor of a name's type"] += sum(
            a.type in {"hotel", "restaurant"} for a in found.anaphors
        )
    for rule in (
        "name introduced cased",
        "name introduced in lower case",
        "name repeated cased",
        "name repeated in lower case",
        "name shortened",
        "anaphor of a name's type",
        "phone",
        "upper-case code",
        "JSON tool result",
        "JSON identifying value",
        "JSON amount (not held)",
        "city used as a location",
    ):
        assert seen[rule] >= 5, (rule, seen)


def test_names_pin_in_the_truth(fleet: SimulatedFleet) -> None:
    # A retained span that repeats or shortens a name needs the span that introduced
    # it: the truth's needed spans include such introductions.
    dense = {s.session_id for s in fleet.truth.sessions if s.profile in {"booking", "airline"}}
    needed = [e for s in fleet.truth.sessions if s.session_id in dense for e in s.evictions]
    assert sum(len(e.needed) for e in needed) > 10


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(DOMAINS))
def test_agent_texts_hold_what_they_say_for_any_seed(seed: int, domain: Domain) -> None:
    # The invariant behind the truth, on any conversation: extracting each message in
    # order with one name book finds exactly what the generator recorded.
    book = NameBook()
    known: set[str] = set()
    for message in AgentTexts(seed, domain).turns(12):
        found = extract(message.text.text, frozenset(known), book)
        held = {(i.key, i.type) for i in found.identifiers} | {(n.key, n.type) for n in found.names}
        assert held == set(message.text.holds), message
        assert [a.type for a in found.anaphors] == list(message.text.anaphors), message
        known.update(type_ for _, type_ in message.text.holds)


def test_booking_and_airline_are_referent_dense() -> None:
    assert BOOKING.referent_dense and AIRLINE.referent_dense
