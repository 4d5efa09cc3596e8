"""SGD turns and generated agent runs as the benchmark's dialogues."""

from __future__ import annotations

import json
from typing import Any

from bench.referents import agent_traces
from bench.referents.sgd import class_of, to_dialogue, turn_values


def sgd_turn(utterance: str, slots: list[dict[str, Any]], actions: list[dict[str, Any]]) -> Any:
    return {
        "speaker": "SYSTEM",
        "utterance": utterance,
        "frames": [{"slots": slots, "actions": actions}],
    }


def test_slot_spans_and_the_action_values_the_text_writes_out() -> None:
    text = "How about Sino in San Jose at 11:30 am for 2?"
    turn = sgd_turn(
        text,
        [{"slot": "restaurant_name", "start": 10, "exclusive_end": 14}],
        [
            {"act": "OFFER", "slot": "restaurant_name", "values": ["Sino"]},
            {"act": "OFFER", "slot": "location", "values": ["san jose"]},
            {"act": "OFFER", "slot": "number_of_seats", "values": ["2"]},
            {"act": "OFFER", "slot": "date", "values": ["2019-03-01"]},
            {"act": "INFORM_INTENT", "slot": "intent", "values": ["ReserveRestaurant"]},
        ],
    )
    values = {(v.key, v.cls, v.surface) for v in turn_values(turn)}
    assert values == {
        ("sino", "venue", "Sino"),
        ("san jose", "city", "san jose"),
        ("2", "count", "2"),
    }


def test_slot_classes() -> None:
    assert [class_of(s) for s in ("hotel_name", "song_name", "artist", "phone_number")] == [
        "venue",
        "media",
        "person",
        "phone",
    ]
    assert [class_of(s) for s in ("pickup_time", "dropoff_date", "number_of_rooms")] == [
        "time",
        "date",
        "count",
    ]
    assert class_of("has_wifi") == "category"


def test_a_dialogue_has_one_span_per_turn() -> None:
    data = {
        "dialogue_id": "1_00000",
        "services": ["Hotels_1"],
        "turns": [
            {"speaker": "USER", "utterance": "Hi", "frames": []},
            sgd_turn("Ok", [], []),
        ],
    }
    dialogue = to_dialogue(data)
    assert [(t.span_id, t.role) for t in dialogue.turns] == [
        ("t000", "user"),
        ("t001", "assistant"),
    ]


def test_agent_runs_are_deterministic_and_annotated_truthfully() -> None:
    first = list(agent_traces.generate(15, seed=3))
    assert first == list(agent_traces.generate(15, seed=3))
    assert first != list(agent_traces.generate(15, seed=4))
    classes: set[str] = set()
    for dialogue in first:
        calls: set[str] = set()
        assert dialogue.turns[0].protected
        for turn in dialogue.turns:
            for value in turn.values:
                assert value.surface.casefold() in turn.text.casefold()
                classes.add(value.cls)
            calls.update(turn.tool_call_ids)
            if turn.role == "tool":
                assert turn.tool_call_id in calls
                json.loads(turn.text)
    assert classes == {"id", "phone", "email", "name", "amount", "rating", "city"}


def test_agent_runs_repeat_values_in_another_case_or_format() -> None:
    other_form = 0
    for dialogue in agent_traces.generate(30, seed=1):
        first = dialogue.first_introductions()
        for position, turn in enumerate(dialogue.turns):
            for value in turn.values:
                intro_position, intro = first[value.key]
                if intro_position < position and value.surface != intro.surface:
                    other_form += 1
    assert other_form >= 30
