"""The name rules of contract 1.2 ("Referents"), one example per rule, and the
properties every text keeps (total, deterministic, exact offsets, linear)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.names import (
    _PLAIN,
    NameBook,
    _may_name,
    distinctive_part,
    folded_words,
    scan_names,
)
from spanguard.streams.engine.referents import extract
from spanguard.streams.engine.shape import shape_of


def names(text: str) -> list[tuple[str, str]]:
    """(key, type) of every name the text introduces, in order."""
    return [(n.key, n.type) for n in scan_names(text).names]


# --- cased runs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'd suggest the Acorn guest house.", [("acorn guest house", "house")]),
        ("We tried Pizza Hut Fen Ditton tonight.", [("pizza hut fen ditton", "name")]),
        ("We went to see Christ's College today.", [("christ s college", "college")]),
        ("I booked the restaurant Pizza Hut for you.", [("pizza hut", "restaurant")]),
        ("The Bank of America branch is open.", [("bank of america", "bank")]),
        ("Your appointment is with Ellen M. Sanford at noon.", [("ellen m sanford", "name")]),
        ("It is at 1 Hotel Central Park in town.", [("1 hotel central park", "park")]),
        ("Bill Callahan is playing at the venue.", [("bill callahan", "name")]),
    ],
)
def test_a_run_of_capitalised_words_is_a_name(text: str, expected: list[tuple[str, str]]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Indian food is fine by me.",  # one ordinary word, sentence-initial
        "Please book it for Monday and Tuesday.",  # days only
        "Hello, good morning to you.",  # greetings
        "**Outgoing Flight**: leaves at ten.",  # a label
        "# Booking Summary\nall done here",  # a markdown heading
        "I want a place in the Centre of town.",  # one ordinary word
        "Did the KYC check pass for this one?",  # an acronym
    ],
)
def test_capitalised_words_that_name_nothing(text: str) -> None:
    assert names(text) == []


def test_an_ordinary_first_word_of_a_sentence_stays_and_the_rest_is_a_book_entry() -> None:
    # "Try" is capitalised only because it starts the sentence, "Cypress" because it
    # is the name's own: both stay, and the rest is in the book for a later repeat.
    (tried,) = scan_names("Try Pizza Hut Fen Ditton tonight.").names
    assert (tried.key, tried.parts) == ("try pizza hut fen ditton", ("pizza hut fen ditton",))
    assert repeats("Try Pizza Hut Fen Ditton now.", "book pizza hut fen ditton")[1] == [
        ("try pizza hut fen ditton", "name", "pizza hut fen ditton")
    ]
    (glen,) = scan_names("Cypress Glen is another choice.").names
    assert glen.key == "cypress glen"


def test_title_case_text_is_not_cased() -> None:
    # Every word capitalised: the case says nothing, only distinctive words count.
    assert names("Book A Table At The Restaurant Tonight Please") == []


# --- distinctive words, in any case -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("how about warkworth house?", [("warkworth house", "house")]),
        ("the hamilton lodge is cheap", [("hamilton lodge", "lodge")]),
        ("allenbell sounds good", [("allenbell", "name")]),
        ("the allenbell guest house please", [("allenbell guest house", "house")]),
        ("a place called the golden curry", [("golden curry", "name")]),
        ("her name is maria lopez ok", [("maria lopez", "name")]),
    ],
)
def test_distinctive_words_are_names_in_any_case(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert names(text) == expected


def test_a_label_is_not_a_name_in_any_case() -> None:
    assert names("lookup: account 4003-D status=flagged") == []


def test_ordinary_words_alone_are_not_names() -> None:
    assert names("i want a cheap hotel in the north with free parking") == []


# --- places used as locations --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I need a train to Cambridge please.",
        "a train to cambridge leaving from stevenage",
        "It is on Regent Street, near the market.",
        "We are staying in San Diego this week.",
        "The hotel is at 12 Magdalene Street.",
    ],
)
def test_a_place_used_as_a_location_is_not_a_name(text: str) -> None:
    assert names(text) == []


def test_a_venue_is_a_name_wherever_it_stands() -> None:
    assert names("take me to the Warkworth House now") == [("warkworth house", "house")]
    assert names("3 tickets to Anberlin please") == [("anberlin", "name")]


# --- the name book --------------------------------------------------------------------


def test_distinctive_part() -> None:
    assert distinctive_part(["acorn", "guest", "house"]) == "acorn"
    assert distinctive_part(["warkworth", "house"]) == "warkworth"
    assert distinctive_part(["pizza", "hut", "restaurant"]) == "pizza hut"
    assert distinctive_part(["red", "house"]) == ""  # one ordinary word: too common
    assert distinctive_part(["allenbell"]) == ""  # no head noun to take away


def repeats(*texts: str) -> list[list[tuple[str, str, str]]]:
    """(key, type, surface) of every name each text holds, with one book for all."""
    book = NameBook()
    return [
        [(n.key, n.type, n.surface) for n in extract(t, frozenset(), book).names] for t in texts
    ]


def test_a_later_text_repeating_a_name_in_any_case_holds_its_key() -> None:
    assert repeats("I'd suggest Warkworth House.", "what's the phone of warkworth house?")[1] == [
        ("warkworth house", "house", "warkworth house")
    ]


def test_the_distinctive_part_alone_mentions_the_whole_name() -> None:
    assert repeats("Try the Acorn Guest House.", "is the Acorn near the station?")[1] == [
        ("acorn guest house", "house", "Acorn")
    ]


def test_a_part_two_names_share_stands_for_neither() -> None:
    out = repeats("Try Acorn Guest House.", "Or Acorn Lodge.", "I like the acorn best")
    assert out[2] == [("acorn", "name", "acorn")]  # a name of its own, no repeat


def test_a_repeat_followed_by_a_name_or_location_word_is_not_one() -> None:
    out = repeats(
        "We visited Magdalene College.",
        "Walk down Magdalene Street after lunch.",
        "Then Magdalene Bridge Books is next door.",
    )
    assert ("magdalene college", "college", "Magdalene") not in out[1] + out[2]


def test_a_city_repeated_as_a_location_is_not_a_repeat() -> None:
    out = repeats("San Jose is lovely in spring.", "book a table in San Jose")
    assert out[1] == []


def test_a_longer_new_name_wins_over_a_repeat_inside_it() -> None:
    out = repeats(
        "Try Atlanta Botanical Garden.", "I booked the Ac Hotel By Marriott Atlanta Downtown."
    )
    assert [key for key, _, _ in out[1]] == ["ac hotel by marriott atlanta downtown"]


def test_a_json_name_field_goes_into_the_book() -> None:
    out = repeats('{"hotel_name": "Allenbell", "price": 80}', "book allenbell for me")
    assert out[0] == [("allenbell", "hotel", "Allenbell")]
    assert out[1] == [("allenbell", "hotel", "allenbell")]


# --- properties ---------------------------------------------------------------------------

_WORDS = st.sampled_from(
    [
        "the", "Acorn", "guest", "house", "to", "Cambridge", "warkworth", "Lodge", "in", ".",
        ",", "?", "called", "Bill", "Street", "12", "of", "M.", "&", "'s", "\n", "#", ":",
        "allenbell", "ACME", "Vs", "hotel", "name", "is",
    ]
)  # fmt: skip
_TEXTS = st.one_of(st.text(max_size=80), st.lists(_WORDS, max_size=30).map(" ".join))


@given(st.lists(_TEXTS, max_size=4))
@settings(max_examples=300, deadline=None)
def test_names_are_total_deterministic_and_exact(texts: list[str]) -> None:
    book, again = NameBook(), NameBook()
    for text in texts:
        found = extract(text, frozenset({"house"}), book)
        assert found == extract(text, frozenset({"house"}), again)
        starts = [n.start for n in found.names]
        assert starts == sorted(starts)
        for name in found.names:
            assert text[name.start : name.start + len(name.surface)] == name.surface
            assert name.key and name.key == name.key.casefold()


_WORD_REFERENCE = re.compile(r"[^\W_]{1,64}+")


@settings(max_examples=400)
@given(
    st.text(
        alphabet=st.sampled_from("aZ09_ -.'\u2019\t\n\x1cé\u00dfİ") | st.characters(),
        max_size=160,
    )
    | st.builds(lambda n, tail: "x" * n + tail, st.integers(60, 140), st.text(max_size=5))
)
def test_folded_words_are_the_regex_words_case_folded(text: str) -> None:
    # The ASCII fast path (one translate, one split) must equal the regex on any
    # text: words of 65+ letters split every 64, and non-ASCII text folds as before.
    assert folded_words(text) == frozenset(_WORD_REFERENCE.findall(text.casefold()))


_CAPITAL_REFERENCE = re.compile(r"[A-Z](?<![\w'\u2019][A-Z])[a-z][\w'\u2019]*+")


def _capital_inside_reference(text: str) -> bool:
    """The rule written out: a capitalised word whose nearest character before it,
    within four, past blanks, ends no sentence."""
    for match in _CAPITAL_REFERENCE.finditer(text):
        before = text[max(0, match.start() - 4) : match.start()].rstrip(" \t")
        if before and before[-1] not in ".!?:;\n" and match.group().casefold() not in _PLAIN:
            return True
    return False


@settings(max_examples=400)
@given(st.text(alphabet=st.sampled_from("Ab Cd Mon.!?:;\n\t'\u2019(\"-x"), max_size=40))
def test_a_capital_inside_a_sentence_is_found_as_the_rule_says(text: str) -> None:
    expected = _capital_inside_reference(text)
    assert _may_name(text, frozenset(), frozenset(), None) == expected
    assert _may_name(text, frozenset(), frozenset(), shape_of(text)) == expected
