"""null_free_core_schema: a model's core schema less its null-removing step, only."""

from typing import Any

import pytest

from spanguard.schemas import INPUT_TYPES, SessionClosed
from spanguard.schemas.inputs import null_free_core_schema
from spanguard.streams.engine.decode import fresh_validator
from tests.contract.records import session_closed


def _functions(node: Any) -> list[object]:
    if isinstance(node, list):
        return [f for item in node for f in _functions(item)]
    if not isinstance(node, dict):
        return []
    found = []
    if str(node.get("type")).startswith("function-"):
        function = node["function"]
        found.append(function["function"] if isinstance(function, dict) else function)
    return found + [f for value in node.values() for f in _functions(value)]


@pytest.mark.parametrize("name", sorted(INPUT_TYPES))
def test_only_the_null_step_is_gone(name: str) -> None:
    model = INPUT_TYPES[name]
    before = _functions(model.__pydantic_core_schema__)
    after = _functions(null_free_core_schema(model))
    assert before.count(model._nulls_are_absent) == 1
    assert after == [f for f in before if f != model._nulls_are_absent]


def test_without_the_step_a_null_is_no_longer_absent() -> None:
    record = session_closed(x=None)
    assert SessionClosed.model_validate(record).model_extra == {}
    validator = fresh_validator(null_free_core_schema(SessionClosed))
    assert validator.validate_python(record).model_extra == {"x": None}
