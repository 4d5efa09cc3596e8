"""docs/contract.md is kept in step with the models in schemas/."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from spanguard.schemas import (
    INPUT_TYPES,
    TOPIC_OF,
    Action,
    EventRejected,
    EvictionDecided,
    FaultKind,
    FleetAlert,
    IntegrityFault,
    RefusalReason,
    RejectReason,
    ScoresRecomputeRequested,
    SpanPinned,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "contract.md"
OUTPUT_MODELS: list[type[BaseModel]] = [
    IntegrityFault,
    SpanPinned,
    ScoresRecomputeRequested,
    EvictionDecided,
    FleetAlert,
    EventRejected,
]


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _named(text: str) -> set[str]:
    """Every `code span` of the page."""
    return set(re.findall(r"`([^`\n]+)`", text))


def _property_names(schema: Any) -> Iterator[str]:
    """Every property name anywhere in a JSON Schema (nested models and $defs included)."""
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            yield from properties
        for value in schema.values():
            yield from _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _property_names(item)


def _all_fields() -> set[str]:
    models = [*INPUT_TYPES.values(), *OUTPUT_MODELS]
    return {name for model in models for name in _property_names(model.model_json_schema())}


def test_every_event_type_is_described() -> None:
    missing = {t for t in [*INPUT_TYPES, *TOPIC_OF] if f"**`{t}`**" not in _text()}
    assert missing == set()


def test_every_output_topic_is_listed() -> None:
    named = _named(_text())
    assert {f"<prefix>.{suffix}" for suffix in TOPIC_OF.values()} <= named
    assert "<prefix>.events" in named


def test_every_field_name_appears() -> None:
    text = _text()
    # A field is named as `field` or inside an object written as `{a, b}`.
    spans = " ".join(_named(text))
    words = set(re.findall(r"[a-z_][a-z0-9_]*", spans))
    assert _all_fields() - words == set()


def test_every_enumeration_value_appears() -> None:
    named = _named(_text())
    for enum in (FaultKind, RefusalReason, Action, RejectReason):
        assert {member.value for member in enum} - named == set(), enum.__name__


def _fault_table_kinds(text: str) -> list[str]:
    section = text.split("## Fault kinds", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Z_]+)` \|", section, flags=re.MULTILINE)


def test_the_fault_table_is_exactly_the_models_kinds() -> None:
    kinds = _fault_table_kinds(_text())
    assert len(kinds) == len(set(kinds))
    assert set(kinds) == {kind.value for kind in FaultKind}


def test_every_fault_kind_named_anywhere_exists() -> None:
    # An upper-case name that looks like a kind (two words or more) must be a kind,
    # a refusal, an action or a rejection reason; settings (SPANGUARD_*) aside.
    known = {m.value for e in (FaultKind, RefusalReason, Action, RejectReason) for m in e}
    named = {
        word
        for word in _named(_text())
        if re.fullmatch(r"[A-Z]+(_[A-Z]+)+", word) and not word.startswith("SPANGUARD_")
    }
    assert named - known == set()


def test_the_checks_read_the_page() -> None:
    # Guards the guards: a page without the table or the fields would fail them.
    assert _fault_table_kinds("## Fault kinds\n| `STALE_SCORE` | x | warning |\n") == [
        "STALE_SCORE"
    ]
    assert "scores_invalidated" in _all_fields()
    assert "value_b64" in _all_fields()


def test_every_word_list_of_the_extractor_is_documented_word_for_word() -> None:
    from spanguard.streams.engine import names, referents, typed_values

    modules = {"names": names, "referents": referents, "typed_values": typed_values}
    documented = dict(re.findall(r"^- `(\w+\.\w+)`: .*? Words: (.*)\.$", _text(), re.M))
    expected = {
        "names.HEAD_NOUNS", "names.COMPOUND_HEADS", "names.LOCATION_WORDS",
        "names.LOCATION_PREPOSITIONS", "names.TRAVEL_PREPOSITIONS", "names.PLACE_PREFIXES",
        "names.NAME_JOINERS", "names.VERSUS", "names.CALLING_WORDS", "names.GREETINGS",
        "referents.NEVER_ANAPHOR_TYPES", "referents.VALUE_TYPES", "referents.AMOUNT_WORDS",
        "referents.CURRENCY_WORDS", "typed_values.IDENTIFYING_FIELDS",
    }  # fmt: skip
    assert set(documented) == expected
    for name, words in documented.items():
        module, constant = name.split(".")
        value = getattr(modules[module], constant)
        in_code = {" ".join(item) if isinstance(item, tuple) else item for item in value}
        assert set(words.split(", ")) == in_code, name
