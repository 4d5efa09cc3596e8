"""Outputs built on the fast path (BaseModel's slots set directly) against pydantic's
public ``model_construct``: the engine gives the same objects either way.

:mod:`spanguard.streams.engine.construct` takes the fast path only under the pydantic
minor it was tested with. Here every golden trace is replayed twice, once with the
emitters on the public path, and every output must match: the same bytes, the same
values in the same order, the same fields-set (nested models too), none shared.
"""

from __future__ import annotations

import pydantic
import pytest
from pydantic import BaseModel

import spanguard.streams.engine.emit as emit
import spanguard.streams.engine.gate as gate
from spanguard.schemas import OutputEvent
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine import construct
from spanguard.streams.engine.engine import Engine, Source
from tests.golden.traces import golden_traces

TRACES = golden_traces()


def outputs(lines: list[bytes]) -> list[OutputEvent]:
    engine = Engine()
    return [
        out
        for offset, line in enumerate(lines)
        for out in engine.process_raw(line, Source("spanguard.events", 0, offset))
    ]


def shape(value: object) -> object:
    """Field names in stored order and the fields-set, of a model and every model in it
    (model equality ignores both)."""
    if isinstance(value, BaseModel):
        inner = [shape(v) for v in value.__dict__.values()]
        return (type(value), list(value.__dict__), value.model_fields_set, inner)
    if isinstance(value, list):
        return [shape(v) for v in value]
    return None


def models(value: object) -> list[BaseModel]:
    """``value`` and every model nested in its fields and lists."""
    if isinstance(value, BaseModel):
        return [value, *(m for inner in value.__dict__.values() for m in models(inner))]
    if isinstance(value, list):
        return [m for v in value for m in models(v)]
    return []


def test_the_fast_path_is_on_under_the_tested_pydantic() -> None:
    tested = pydantic.VERSION.startswith(construct.TESTED_PYDANTIC + ".")
    assert construct.FAST is tested
    assert (construct.construct is construct.construct_fast) is tested


@pytest.mark.parametrize("name", sorted(TRACES))
def test_fast_and_public_paths_give_the_same_outputs(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = TRACES[name]
    monkeypatch.setattr(emit, "construct", construct.construct_fast)
    monkeypatch.setattr(emit, "assemble", construct.construct_fast)
    monkeypatch.setattr(gate, "assemble", construct.construct_fast)
    fast = outputs(lines)
    monkeypatch.setattr(emit, "construct", construct.construct_public)
    monkeypatch.setattr(emit, "assemble", construct.construct_public)
    monkeypatch.setattr(gate, "assemble", construct.construct_public)
    public = outputs(lines)
    assert len(fast) == len(public)
    for got, want in zip(fast, public, strict=True):
        assert got == want
        assert shape(got) == shape(want)
        assert encode_output(got) == encode_output(want)
    # No fields-set is shared between models (the gate's pins may share one mention
    # model, never changed once built), so changing one changes no other.
    built = {id(m): m for out in fast for m in models(out)}.values()
    assert len({id(m.__pydantic_fields_set__) for m in built}) == len(built)


def test_a_model_the_fast_path_cannot_build_is_refused() -> None:
    class WithPostInit(BaseModel):
        value: int

        def model_post_init(self, context: object, /) -> None:
            pass

    with pytest.raises(TypeError, match="model_post_init"):
        construct.construct_fast(WithPostInit, {"value": 1})
