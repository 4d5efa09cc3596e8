"""Recall and precision counting on tiny hand-made dialogues and decisions."""

from __future__ import annotations

from bench.referents.drive import PinSeen, RequestSeen, SessionRun
from bench.referents.measure import count_session, distinctive_part, pin_verdict, type_phrase
from bench.referents.model import Dialogue, Turn, Value, value_key


def v(surface: str, cls: str, slot: str) -> Value:
    return Value(value_key(surface), cls, slot, surface)


ACORN = v("Acorn Guest House", "venue", "hotel_name")
CAMBRIDGE = v("Cambridge", "city", "location")

DIALOGUE = Dialogue(
    "d1",
    (
        Turn("t000", "user", "I need a hotel in Cambridge.", (CAMBRIDGE,)),
        Turn("t001", "assistant", "How about Acorn Guest House?", (ACORN,)),
        Turn("t002", "user", "Sounds fine. Is it cheap?"),
        Turn("t003", "assistant", "Yes, 50 pounds a night."),
        Turn("t004", "user", "book the acorn guest house in cambridge please"),
        Turn("t005", "assistant", "Done: Acorn Guest House, Cambridge.", (ACORN, CAMBRIDGE)),
    ),
)
ALL = tuple(t.span_id for t in DIALOGUE.turns)


def request(
    selected: tuple[str, ...],
    committed: tuple[str, ...],
    refused: dict[str, str] | None = None,
    pins: list[PinSeen] | None = None,
) -> RequestSeen:
    return RequestSeen("r1", ALL, selected, committed, refused or {}, pins or [], "PARTIAL")


def test_a_committed_introduction_that_a_retained_turn_repeats_is_lost() -> None:
    run = SessionRun(DIALOGUE, "threshold", "d1", [request(("t000", "t001"), ("t000", "t001"))])
    tally = count_session(run)
    assert (tally.classes["venue"].cases, tally.classes["venue"].kept) == (1, 0)
    assert (tally.classes["city"].cases, tally.classes["city"].kept) == (1, 0)
    assert [m.value.surface for m in tally.misses] == ["Cambridge", "Acorn Guest House"]
    assert tally.misses[1].repeat.span_id == "t004"  # the text repeat, in another case


def test_a_pinned_introduction_is_kept_and_counted_as_pinned() -> None:
    pin = PinSeen("t001", ("t004",), "acorn guest house", "house", None, ("t004", "t001"))
    run = SessionRun(
        DIALOGUE,
        "threshold",
        "d1",
        [request(("t000", "t001"), ("t000",), {"t001": "PINNED"}, [pin])],
    )
    tally = count_session(run)
    venue = tally.classes["venue"]
    assert (venue.cases, venue.kept, venue.pinned, venue.recall) == (1, 1, 1, 1.0)
    assert tally.classes["city"].kept == 0
    assert (tally.pins, tally.pins_right, tally.precision) == (1, 1, 1.0)
    assert tally.pins_by_mention_class["venue"] == 1


def test_no_case_without_a_retained_repeat_or_when_the_candidate_did_not_introduce() -> None:
    # t004 and t005 selected too: no retained span repeats anything.
    run = SessionRun(DIALOGUE, "keep_top_k", "d1", [request(ALL, ALL)])
    assert count_session(run).classes == {}
    # t005 is not the first to hold the values; t004 holds them only in its text.
    run = SessionRun(DIALOGUE, "keep_top_k", "d1", [request(("t004", "t005"), ("t004", "t005"))])
    assert count_session(run).classes == {}


def test_volume_counts_selected_and_committed_tokens() -> None:
    run = SessionRun(
        DIALOGUE, "threshold", "d1", [request(("t002", "t003"), ("t003",), {"t002": "PINNED"})]
    )
    tally = count_session(run)
    assert (tally.selected_tokens, tally.committed_tokens) == (10, 5)
    assert tally.volume_drop == 0.5


def test_a_pin_that_shares_only_a_city_is_wrong() -> None:
    pinned = DIALOGUE.turns[0]
    assert pin_verdict(pinned, [DIALOGUE.turns[5]]) == ""
    assert pin_verdict(DIALOGUE.turns[1], [DIALOGUE.turns[4]]) == "shared"


def test_a_pin_is_right_for_the_distinctive_part_or_a_typed_determiner_phrase() -> None:
    pinned = DIALOGUE.turns[1]
    assert pin_verdict(pinned, [Turn("x", "user", "Does the Acorn have parking?")]) == (
        "distinctive"
    )
    assert pin_verdict(pinned, [Turn("x", "user", "Does that hotel have parking?")]) == "type"
    assert pin_verdict(pinned, [Turn("x", "user", "Does it have parking?")]) == ""
    assert pin_verdict(pinned, [Turn("x", "user", "Is there a hotel with parking?")]) == ""


def test_distinctive_part_and_type_phrase() -> None:
    assert distinctive_part("the hamilton lodge") == "hamilton"
    assert distinctive_part("acorn guest house") == "acorn"
    assert distinctive_part("pizza hut fen ditton") == "pizza hut fen ditton"
    assert distinctive_part("hotel") == ""
    assert type_phrase("is this restaurant open", "restaurant_name")
    assert type_phrase("book that same hotel", "hotel_name")
    assert not type_phrase("a restaurant nearby", "restaurant_name")
    assert not type_phrase("this restaurant", "city")


def test_a_pin_for_a_price_is_wrong_where_prices_are_not_identifiers() -> None:
    price = v("1268", "amount", "price")
    flight = v("HAT170", "id", "flight_number")
    dialogue = Dialogue(
        "d2",
        (
            Turn("t000", "tool", '{"flight_number": "HAT170", "price": 1268}', (flight, price)),
            Turn("t001", "user", "Is 1268 the final price for hat170?", (price, flight)),
        ),
    )
    pin = PinSeen("t000", ("t001",), "1268", "price", None, ("t001", "t000"))
    run = SessionRun(
        dialogue,
        "threshold",
        "d2",
        [RequestSeen("r1", ("t000", "t001"), ("t000",), (), {"t000": "PINNED"}, [pin], "REJECT")],
    )
    assert count_session(run).pins_right == 1  # the spans share the flight number...
    strict = count_session(run, frozenset({"amount", "rating"}))
    assert (strict.pins_right, strict.pins_by_mention_class["amount"]) == (0, 1)  # ...not here
