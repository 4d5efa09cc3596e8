"""The checked-in JSON Schemas match the pydantic models; the models match the contract."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from spanguard.schemas import (
    CONTRACT_ADAPTER,
    INPUT_ADAPTER,
    INPUT_TYPES,
    TOPIC_OF,
    EventRejected,
    SpanAdded,
)
from spanguard.schemas.export import JSON_DIR, render_schemas
from tests.contract.records import session_closed


def test_checked_in_schemas_match_models() -> None:
    rendered = render_schemas()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in Path(JSON_DIR).glob("*.json")}
    assert set(on_disk) == set(rendered), "run: python -m spanguard.schemas.export"
    for name, text in rendered.items():
        assert on_disk[name] == text, (
            f"{name} drifted from its model; run: python -m spanguard.schemas.export"
        )


def test_one_schema_per_event_type() -> None:
    assert set(render_schemas()) == {f"{t}.json" for t in [*INPUT_TYPES, *TOPIC_OF]}


def test_contract_field_names() -> None:
    assert set(SpanAdded.model_fields) >= {
        "type",
        "schema_version",
        "event_id",
        "session_id",
        "tenant",
        "seq",
        "turn",
        "ts",
        "span_id",
        "position",
        "tokens",
        "role",
        "text",
        "text_sha256",
        "derived_from",
        "introduces",
        "mentions",
    }
    assert set(EventRejected.model_fields) >= {
        "rejection_id",
        "reason",
        "detail",
        "raw",
        "raw_size",
        "raw_truncated",
        "tenant",
        "session_id",
        "topic",
        "partition",
        "offset",
    }


def test_unknown_fields_are_kept() -> None:
    event = INPUT_ADAPTER.validate_python(session_closed(harness={"v": 2}))
    assert event.model_dump()["harness"] == {"v": 2}


def test_one_union_over_inputs_and_outputs() -> None:
    out = CONTRACT_ADAPTER.validate_python(
        {
            "type": "event.rejected",
            "rejection_id": "r",
            "reason": "INVALID_JSON",
            "detail": "x",
            "raw": "",
            "raw_size": 0,
            "ts": "2026-11-30T10:00:00Z",
        }
    )
    assert isinstance(out, EventRejected)
    with pytest.raises(ValidationError):
        CONTRACT_ADAPTER.validate_python({"type": "nope"})
