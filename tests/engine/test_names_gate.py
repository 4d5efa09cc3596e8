"""Names through the engine: the gate keeps the turn that introduced a name a later
turn repeats, in any case or shortened, and the session's name book survives a restore."""

from __future__ import annotations

import pytest

from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript
from tests.engine.test_persist import run_split, run_whole


def venue_session() -> SessionScript:
    s = SessionScript()
    s.add("u1", "I need a cheap place to stay in the north.", role="user")
    s.add(
        "a1", "I'd suggest the Acorn Guest House, it is cheap and has free wifi.", role="assistant"
    )
    s.add("u2", "Any train to Cambridge on Friday?", role="user")
    s.add("a2", "There is one leaving at 10:30.", role="assistant")
    s.add("u3", "great. what's the phone number of the acorn?", role="user")
    s.score(("u1", 0.05), ("a1", 0.1), ("u2", 0.1), ("a2", 0.05), ("u3", 0.9))
    s.evict(threshold=0.15)
    return s


def test_a_shortened_lower_case_repeat_pins_the_turn_that_introduced_the_name() -> None:
    driver = EngineDriver(clear_keys=True, emit_surfaces=True)
    driver.pipe(venue_session())
    (pin,) = driver.pins()
    assert (pin.span_id, pin.pinned_for) == ("a1", ["u3"])
    assert (pin.mention.key, pin.mention.type) == ("acorn guest house", "house")
    assert pin.mention.surface == "acorn"  # how the retained turn wrote it
    (decision,) = driver.decisions()
    assert sorted(decision.committed) == ["a2", "u1", "u2"]


def test_without_surfaces_configured_no_text_leaves_the_engine() -> None:
    driver = EngineDriver()
    driver.pipe(venue_session())
    (pin,) = driver.pins()
    assert pin.mention.surface is None
    assert pin.mention.key is not None and pin.mention.key.startswith("hmac-sha256:")


def test_a_city_used_as_a_location_pins_nothing() -> None:
    s = SessionScript()
    s.add("u1", "I need a train to Cambridge.")
    s.add("a1", "There are trains to Cambridge every hour.")
    s.add("u2", "Book one to cambridge for me.")
    s.score(("u1", 0.1), ("a1", 0.1), ("u2", 0.9))
    s.evict(threshold=0.15)
    driver = EngineDriver()
    driver.pipe(s)
    assert driver.pins() == []


def test_a_request_for_a_new_value_is_not_an_anaphor() -> None:
    s = SessionScript()
    s.add("a1", "Your booking reference is EZNVJAPG and the phone number is 01223 356354.")
    s.add("u1", "thanks, and the train?")
    s.add("u2", "can you send me the reference number for the train?")
    s.score(("a1", 0.1), ("u1", 0.1), ("u2", 0.9))
    s.evict(threshold=0.15)
    driver = EngineDriver()
    driver.pipe(s)
    assert driver.pins() == []


@pytest.mark.parametrize("repeat", ["NO6JO3", "no6jo3", "reservation no6jo3"])
def test_a_json_tool_result_value_repeated_later_pins_the_tool_result(repeat: str) -> None:
    s = SessionScript()
    s.add("t1", '{"reservation_id": "NO6JO3", "price": 1268, "rating": 4}', role="tool")
    s.add("a1", "Done.")
    s.add("u1", f"please cancel {repeat}")
    s.score(("t1", 0.1), ("a1", 0.1), ("u1", 0.9))
    s.evict(threshold=0.15)
    driver = EngineDriver(clear_keys=True)
    driver.pipe(s)
    (pin,) = driver.pins()
    assert (pin.span_id, pin.mention.key, pin.mention.type) == ("t1", "no6jo3", "reservation")


def test_prices_and_ratings_in_a_tool_result_are_not_identifiers() -> None:
    s = SessionScript()
    s.add("t1", '{"hotel": "x", "price": 1268, "stars": 4}', role="tool")
    s.add("u1", "1268 is too much, and 4 stars is fine")
    s.score(("t1", 0.1), ("u1", 0.9))
    s.evict(threshold=0.15)
    driver = EngineDriver()
    driver.pipe(s)
    assert driver.pins() == []


def test_the_name_book_survives_a_restore_at_every_cut() -> None:
    lines = venue_session().lines()
    expected = run_whole(lines)
    assert any(b'"span.pinned"' in line for line in expected)
    for cut in range(len(lines) + 1):
        assert run_split(lines, cut) == expected, f"cut at {cut}"
