"""Engine crashes found by bench/fuzz.py, each pinned by the input that caused it."""

from __future__ import annotations

import pytest

from spanguard.schemas import EventRejected, RejectReason
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.engine import Engine, Source

EVENT = (
    b'{"type":"span.added","schema_version":1,"event_id":"e1","session_id":"SESSION",'
    b'"tenant":"t","seq":0,"turn":0,"ts":"2026-01-01T00:00:00Z","span_id":"a",'
    b'"position":0,"tokens":1,"text":"TEXT"EXTRA}'
)


def event(session: bytes = b"s1", text: bytes = b"hello", extra: bytes = b"") -> bytes:
    return EVENT.replace(b"SESSION", session).replace(b"TEXT", text).replace(b"EXTRA", extra)


@pytest.mark.parametrize(
    "raw",
    [
        # fuzz seed 9, category lone_surrogate: the id came back in an output that could
        # not be encoded (PydanticSerializationError: surrogates not allowed)
        event(session=b"s\\udfff1"),
        event(session=b"s\\ud800", extra=b',"x":NaN'),
        event(text=b"x\\udbff\\u0041y"),
    ],
)
def test_a_lone_surrogate_is_invalid_json(raw: bytes) -> None:
    engine = Engine()
    [rejected] = engine.process_raw(raw, Source("t", 0, 0))
    assert isinstance(rejected, EventRejected)
    assert rejected.reason is RejectReason.INVALID_JSON
    encode_output(rejected)
    # the session's next (valid) event is processed as usual
    assert engine.process_raw(event(), Source("t", 0, 1)) == []


def test_a_surrogate_pair_is_text() -> None:
    engine = Engine()
    assert engine.process_raw(event(text=b"smile \\ud83d\\ude00"), Source("t", 0, 0)) == []
    # through the lenient reader too (a NaN in an unknown field sends it there)
    lenient = event(session=b"s2", text=b"\\ud83d\\ude00", extra=b',"y":NaN')
    assert engine.process_raw(lenient, Source("t", 0, 1)) == []
    session = engine.session("t", "s2")
    assert session is not None and "a" in session.spans
