"""Schema-Guided Dialogue (SGD) files -> :class:`~bench.referents.model.Dialogue`.

A turn's values are its ``frames[].slots`` (character spans of the utterance)
and the values of its ``frames[].actions`` that the utterance writes out (any
case; system turns state most of their offers there). Each slot belongs to a
value class (:data:`CLASS_OF`): the classes the report is broken down by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.referents.model import Dialogue, Turn, Value, contains, value_key

NAME_CLASSES = ("venue", "event", "media", "person")
"""Proper names a later turn refers back to (the issue's "all names")."""

VENUE_EVENT = ("venue", "event")

NOT_SHARED = frozenset({"city", "time", "date", "count", "amount", "category"})
"""Classes whose shared value does not make a pin right (the issue's list, plus
categories such as a cuisine or a genre, which are not referents either)."""

_SLOTS: dict[str, tuple[str, ...]] = {
    "venue": (
        "restaurant_name",
        "hotel_name",
        "attraction_name",
        "property_name",
        "place_name",
        "event_location",
    ),
    "event": ("event_name",),
    "media": ("movie_name", "song_name", "album", "title"),
    "person": (
        "artist",
        "actors",
        "starring",
        "director",
        "therapist_name",
        "recipient_name",
        "stylist_name",
        "doctor_name",
        "dentist_name",
    ),
    "product": ("car_name", "alarm_name", "new_alarm_name", "airlines"),
    "address": ("address", "address_of_location", "street_address"),
    "city": (
        "city",
        "city_of_event",
        "location",
        "area",
        "destination_city",
        "origin_city",
        "pickup_city",
        "from_location",
        "to_location",
    ),
    "place": (
        "from_station",
        "to_station",
        "pickup_location",
        "destination",
        "origin_airport_name",
        "destination_airport_name",
    ),
    "phone": ("phone_number",),
    "amount": (
        "account_balance",
        "fare",
        "price",
        "price_per_night",
        "rent",
        "ride_fare",
        "total_price",
        "transfer_amount",
    ),
    "count": (
        "number_of_days",
        "stay_length",
        "approximate_ride_duration",
        "transfer_time",
        "humidity",
        "precipitation",
        "temperature",
        "wind",
        "aggregate_rating",
        "rating",
        "star_rating",
        "year",
        "count",
        "passengers",
        "travelers",
        "transfers",
        "number_stops",
        "number_checked_bags",
    ),
}

CLASS_OF: dict[str, str] = {slot: cls for cls, slots in _SLOTS.items() for slot in slots}
"""Slot name -> value class; see :func:`class_of` for the slots not listed."""

TYPE_WORDS: dict[str, tuple[str, ...]] = {
    "restaurant_name": ("restaurant", "place", "diner", "cafe", "bistro", "eatery"),
    "hotel_name": ("hotel", "place", "property", "motel", "inn"),
    "property_name": ("property", "apartment", "apartments", "place", "house", "complex"),
    "attraction_name": ("attraction", "place", "museum", "park", "spot"),
    "place_name": ("place", "hotel", "house", "property", "attraction"),
    "event_location": ("venue", "place", "stadium", "theater", "theatre", "arena"),
    "event_name": ("event", "concert", "game", "match", "show", "play"),
    "movie_name": ("movie", "film"),
    "title": ("movie", "film", "title", "show"),
    "song_name": ("song", "track", "tune"),
    "album": ("album", "record"),
    "artist": ("artist", "singer", "band", "group"),
    "therapist_name": ("therapist", "doctor", "psychiatrist", "psychologist", "dentist"),
    "stylist_name": ("stylist", "salon"),
    "car_name": ("car", "vehicle"),
}
"""Slot -> nouns that name its type, for the "this restaurant" precision rule."""


def class_of(slot: str) -> str:
    """The value class of an SGD slot (:data:`CLASS_OF`; else ``time``/``date``
    by the slot's name, ``count`` for ``number_of_*``, ``category`` otherwise)."""
    known = CLASS_OF.get(slot)
    if known is not None:
        return known
    if slot.endswith("_time") or slot == "time":
        return "time"
    if slot.endswith("_date") or slot == "date":
        return "date"
    if slot.startswith("number_of_") or slot.startswith("num_"):
        return "count"
    return "category"


def turn_values(turn: dict[str, Any]) -> tuple[Value, ...]:
    """The values an SGD turn states: its slot spans, and the action values its
    utterance writes out (each key once, the first annotation winning)."""
    text: str = turn["utterance"]
    text_key = value_key(text)
    found: dict[str, Value] = {}
    for frame in turn["frames"]:
        for slot in frame.get("slots", ()):
            surface = text[slot["start"] : slot["exclusive_end"]]
            key = value_key(surface)
            if key and key not in found:
                found[key] = Value(key, class_of(slot["slot"]), slot["slot"], surface)
    for frame in turn["frames"]:
        for action in frame.get("actions", ()):
            if action["slot"] in ("intent", ""):
                continue
            for raw in action.get("values", ()):
                key = value_key(raw)
                if key and key not in found and contains(text_key, key):
                    found[key] = Value(key, class_of(action["slot"]), action["slot"], raw)
    return tuple(found.values())


def to_dialogue(data: dict[str, Any]) -> Dialogue:
    """One SGD dialogue as a :class:`Dialogue`: span ``t000``, ``t001``, ... per
    turn, role ``user`` (USER) or ``assistant`` (SYSTEM)."""
    turns = tuple(
        Turn(
            span_id=f"t{index:03d}",
            role="user" if turn["speaker"] == "USER" else "assistant",
            text=turn["utterance"],
            values=turn_values(turn),
        )
        for index, turn in enumerate(data["turns"])
    )
    return Dialogue(str(data["dialogue_id"]), turns, tuple(data.get("services", ())))


def dialogue_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else its ``dialogues_*.json``, sorted."""
    if path.is_file():
        return [path]
    files = sorted(path.glob("dialogues_*.json"))
    if not files:
        raise FileNotFoundError(f"no dialogues_*.json in {path}")
    return files


def load(path: Path, limit: int | None = None) -> Iterator[Dialogue]:
    """The dialogues under ``path`` (a file or an SGD split folder), in file
    order, at most ``limit``."""
    count = 0
    for file in dialogue_files(path):
        for data in json.loads(file.read_text(encoding="utf-8")):
            if limit is not None and count >= limit:
                return
            yield to_dialogue(data)
            count += 1
