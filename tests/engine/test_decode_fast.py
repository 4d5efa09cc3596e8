"""decode's fast path (the decoder derived from the models) against the pydantic path.

:func:`decode` decodes a record with the msgspec decoder derived from the models
(:mod:`spanguard.streams.engine.fastdecode`) and leaves every record it does not take to
:func:`decode_slowly` (the models' own validation). On any record the two must agree:
the same event (every field of the model, with the same values and types, nested
ones included) or the same rejection (reason, detail, identity). The records are
generated: valid and invalid, with nulls, upper-case hex, NaN and Infinity, integers
beyond 64 bits, numbers spelled in every JSON way, bad types, extras, missing and
duplicate fields, odd whitespace and escapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, field_validator, model_validator

import spanguard.streams.engine.decode as decoding
from spanguard.schemas import INPUT_TYPES, text_sha256
from spanguard.schemas.common import ContractModel
from spanguard.streams.engine.decode import Invalid, decode, decode_slowly
from spanguard.streams.engine.fastdecode import STRUCTS, TWINS, decode_fast
from spanguard.streams.engine.trace import SessionScript
from tests.golden.traces import golden_traces

LIMIT = 1 << 20
MODEL_OF = {struct: model for model, struct in STRUCTS.items()}


# -- comparing outcomes ------------------------------------------------------


def readable(item: object) -> object:
    """What the engine can read of a decoded value: every field of a model (by the
    model's field names, for a Struct too), repr of a scalar (int/float, -0.0), a
    time's instant, offset and spelling."""
    model = MODEL_OF.get(type(item)) or (type(item) if isinstance(item, BaseModel) else None)
    if model is not None:
        return (
            model.__name__,
            {name: readable(getattr(item, name)) for name in model.model_fields},
        )
    if isinstance(item, list):
        return [readable(x) for x in item]
    if isinstance(item, dict):
        return {k: readable(v) for k, v in item.items()}
    if isinstance(item, datetime):
        return (item, item.utcoffset(), item.isoformat())
    return repr(item)


def outcome(result: object) -> tuple[object, ...]:
    """What a caller of decode can see of a result."""
    if isinstance(result, Invalid):
        return ("rejected", result.reason, result.detail, result.identity)
    return ("accepted", readable(result), getattr(result, "content_hash", None))


def assert_same(raw: bytes, where: str = "") -> None:
    assert outcome(decode(raw, LIMIT)) == outcome(decode_slowly(raw)), (where, raw)


# -- writing JSON in every spelling ------------------------------------------


class Token:
    """A JSON token written as it is (a number in one spelling, NaN, garbage)."""

    def __init__(self, text: bytes) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Token({self.text!r})"


NUMBERS = [
    b"1",
    b"1.0",
    b"1e0",
    b"1E+0",
    b"10e-1",
    b"-0",
    b"-0.0",
    b"0.5",
    b"5e-1",
    b"1e400",
    b"-1e400",
    b"1e-400",
    b"18446744073709551615",
    b"18446744073709551616",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"123456789012345678901234567890",
    b"0.30000000000000004",
    b"0.1000000000000000055511151231257827021181583404541015625",
    b"NaN",
    b"Infinity",
    b"-Infinity",
]
"""Numbers in every spelling JSON has (and the three the standard library reads)."""
NOT_JSON = [b"nan", b"-NaN", b"infinity", b"01", b"1.", b".5", b"+1", b"0x10", b"True", b"None"]
WHITESPACE = [b"", b"", b"", b" ", b"\n", b"\t", b"\r\n"]
NOT_WHITESPACE = [b"\x0b", b"\xc2\xa0", b"\x00"]


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` 19 times in 20 (a record has a dozen fields or more)."""
    return st.integers(0, 19).flatmap(lambda n: good if n else bad)


@st.composite
def spellings(draw: Callable[..., Any]) -> tuple[bool, bool]:
    """Whether to write non-ASCII escaped, and whether a bad byte may slip in."""
    return draw(st.booleans()), draw(st.integers(0, 19)) == 0


def write(value: Any, draw: Callable[..., Any], how: tuple[bool, bool] = (True, False)) -> bytes:
    """``value`` as JSON text, in a spelling drawn at random."""
    escape, sloppy = how

    def ws() -> bytes:
        pick: bytes = draw(st.sampled_from(WHITESPACE))
        if sloppy and draw(st.integers(0, 9)) == 0:
            pick = draw(st.sampled_from(NOT_WHITESPACE))
        return pick

    if isinstance(value, Token):
        return value.text
    if value is None:
        return b"null"
    if value is True:
        return b"true"
    if value is False:
        return b"false"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        if value != value:
            return b"NaN"
        if value in (float("inf"), float("-inf")):
            return b"Infinity" if value > 0 else b"-Infinity"
        return repr(value).encode()
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=escape).encode("utf-8", "surrogatepass")
    if isinstance(value, list):
        return b"[" + b",".join(ws() + write(v, draw, how) + ws() for v in value) + b"]"
    assert isinstance(value, dict)
    pairs = list(value.items())
    if pairs and draw(st.integers(0, 9)) == 0:
        # a key twice: the last one is what JSON readers keep
        key = draw(st.sampled_from([k for k, _ in pairs]))
        pairs.insert(draw(st.integers(0, len(pairs))), (key, draw(JSON_VALUES)))
    members = (
        ws() + write(k, draw, how) + ws() + b":" + ws() + write(v, draw, how) for k, v in pairs
    )
    return b"{" + b",".join(members) + b"}"


# -- records -----------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 0, -1]),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(NUMBERS).map(Token),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value (nulls, NaN, numbers beyond 64 bits included)."""
ODD = mostly(JSON_VALUES, st.sampled_from(NOT_JSON).map(Token))
"""A value of the wrong type, now and then no JSON at all."""
HEX = "0123456789abcdef"
IDS = mostly(
    st.text(min_size=1, max_size=12) | st.text(alphabet="abc-_0123", min_size=1, max_size=8),
    st.sampled_from(["", "x" * 128, "x" * 129, "y" * 256, "y" * 257, "\ud800"]) | ODD,
)
COUNTS = mostly(
    st.integers(0, 50) | st.sampled_from([2**63, 2**64 - 1]),
    st.sampled_from([-1, 2**64, True, "3"]) | st.sampled_from(NUMBERS).map(Token) | ODD,
)


@st.composite
def spelled_times(draw: Callable[..., Any]) -> str:
    """A time in any of the spellings the two readers know or nearly know: separators,
    zero to nine digits of a second (msgspec rounds a seventh, pydantic cuts it off),
    offsets of every length, a day that does not exist."""
    day = draw(st.sampled_from(["2026-11-30", "2026-02-29", "2024-02-29", "0001-01-01"]))
    clock = draw(st.sampled_from(["09:00:00", "23:59:59", "00:00:60", "24:00:00", "09:00"]))
    digits = draw(st.text(alphabet="0123456789", max_size=9))
    fraction = draw(st.sampled_from(["." + digits, "." + digits, "", ",5", "."]))
    offset = draw(
        st.sampled_from(["Z", "Z", "z", "+00:00", "-05:30", "+0100", "+01", "", "+24:00"])
    )
    return day + draw(st.sampled_from("TTt _")) + clock + fraction + offset


TIMES = mostly(
    spelled_times()
    | st.sampled_from(
        [
            "2026-11-30T09:00:00Z",
            "2026-11-30T09:00:00.123456Z",
            "2026-11-30T09:00:00.1234567Z",
            "2026-11-30T09:00:00.9999995Z",
            "2026-11-30T09:00:00.123456+01:00",
            "2026-11-30T09:00:00.1234565+01:00",
            "2026-11-30T09:00:00.123456789-0530",
            "2026-11-30T10:00:00+01:00",
            "2026-11-30T09:00:00-00:00",
            "2026-11-30t09:00:00z",
            "2026-11-30 09:00:00Z",
            "1700000000",
        ]
    )
    # escaped: the JSON is longer than the text, never shorter
    | st.sampled_from(
        [b'"2026-11-30T09:00:00\\u005a"', b'"2026-11-30T09:00:00.123456\\u0037Z"']
    ).map(Token),
    st.sampled_from(["2026-11-30T09:00:00", "2026-11-30", "yesterday", "", 1700000000, 1.5, True])
    | st.sampled_from([b"1700000000", b"1e9"]).map(Token)
    | ODD,
)
SCORES = mostly(
    st.floats(-2, 2) | st.integers(-5, 5),
    st.floats()
    | st.sampled_from(["0.5", True, 10**30])
    | st.sampled_from(NUMBERS).map(Token)
    | ODD,
)
VERSIONS = mostly(
    st.just(1),
    st.sampled_from([2, 0, True, "1"]) | st.sampled_from(NUMBERS[:5]).map(Token) | ODD,
)


@st.composite
def hex_digests(draw: Callable[..., Any], text: str | None = None) -> object:
    """Mostly a good digest (of ``text``, if given), in any letter case."""
    good = draw(st.integers(0, 9))
    if good >= 2:
        digest = text_sha256(text) if text is not None and good >= 4 else None
        digest = digest or "".join(draw(st.lists(st.sampled_from(HEX), min_size=64, max_size=64)))
        case = draw(st.sampled_from([str.lower, str.lower, str.upper, str.swapcase, str.title]))
        return case(digest)
    if good == 1:
        return draw(st.sampled_from(["", "ab" * 31, "ab" * 33, "g" * 64, "\u212a" * 64, "İ" * 64]))
    return draw(st.text(alphabet=HEX + "ABCDEF\n ", min_size=63, max_size=65) | ODD)


def envelope(draw: Callable[..., Any], kind: str) -> dict[str, Any]:
    return {
        "type": kind,
        "schema_version": draw(VERSIONS),
        "event_id": draw(IDS),
        "session_id": draw(IDS),
        "tenant": draw(IDS),
        "seq": draw(COUNTS),
        "turn": draw(COUNTS),
        "ts": draw(TIMES),
    }


def text_and_hash(draw: Callable[..., Any], into: dict[str, Any]) -> None:
    text = draw(st.text(max_size=30))
    which = draw(st.integers(0, 5))
    if which != 1:
        into["text"] = text
    if which in (1, 2, 3):
        into["text_sha256"] = draw(hex_digests(text))


def referents(draw: Callable[..., Any]) -> list[object]:
    one = st.fixed_dictionaries({"key": IDS, "type": IDS}) | st.fixed_dictionaries(
        {}, optional={"key": IDS, "type": IDS, "surface": IDS}
    )
    return draw(st.lists(one, max_size=2))


def span_added(draw: Callable[..., Any], event: dict[str, Any]) -> None:
    event.update(span_id=draw(IDS), position=draw(COUNTS), tokens=draw(COUNTS))
    text_and_hash(draw, event)
    if draw(st.booleans()):
        event["role"] = draw(IDS)
    if draw(st.booleans()):
        event["derived_from"] = draw(st.lists(IDS, max_size=2))
    for name in ("introduces", "mentions"):
        if draw(st.booleans()):
            event[name] = referents(draw)


def scores_computed(draw: Callable[..., Any], event: dict[str, Any]) -> None:
    event["scorer"] = draw(IDS)
    event["scores"] = []
    for _ in range(draw(st.integers(0, 6))):
        score: dict[str, Any] = {"score_id": draw(IDS), "span_id": draw(IDS), "score": draw(SCORES)}
        if draw(st.integers(0, 3)):
            score["text_sha256"] = draw(hex_digests())
        if draw(st.integers(0, 3)) == 0:
            score["query_sha256"] = draw(hex_digests())
        event["scores"].append(score)


def context_rewritten(draw: Callable[..., Any], event: dict[str, Any]) -> None:
    event["rewrite_id"] = draw(IDS)
    event["context"] = []
    for _ in range(draw(st.integers(0, 3))):
        entry: dict[str, Any] = {"span_id": draw(IDS), "tokens": draw(COUNTS)}
        text_and_hash(draw, entry)
        if draw(st.booleans()):
            entry["score"] = {"score_id": draw(IDS), "score": draw(SCORES | JSON_VALUES)}
            if draw(st.booleans()):
                entry["score"]["text_sha256"] = draw(hex_digests())
        if draw(st.booleans()):
            entry["derived_from"] = draw(st.lists(IDS, max_size=2))
        event["context"].append(entry)
    if draw(st.booleans()):
        event["base_seq"] = draw(COUNTS)
    if draw(st.booleans()):
        event["declared_modified"] = draw(st.lists(IDS, max_size=2))


def eviction_requested(draw: Callable[..., Any], event: dict[str, Any]) -> None:
    event["request_id"] = draw(IDS)
    choice = draw(st.integers(0, 3))
    if choice in (0, 2):
        event["candidates"] = draw(st.lists(IDS, max_size=2))
    if choice in (1, 2):
        event["policy"] = draw(
            st.fixed_dictionaries({"threshold": SCORES})
            | st.fixed_dictionaries({"keep_top_k": COUNTS})
            | st.fixed_dictionaries({}, optional={"threshold": SCALARS, "keep_top_k": SCALARS})
        )
    if draw(st.booleans()):
        event["basis"] = draw(mostly(st.sampled_from(["score", "recency"]), ODD))
    if draw(st.booleans()):
        event["query_sha256"] = draw(hex_digests())


BODIES: dict[str, Callable[[Callable[..., Any], dict[str, Any]], None]] = {
    "span.added": span_added,
    "scores.computed": scores_computed,
    "context.rewritten": context_rewritten,
    "eviction.requested": eviction_requested,
    "session.closed": lambda draw, event: None,
}


@st.composite
def records(draw: Callable[..., Any]) -> bytes:
    """One input record (as bytes): mostly valid, else a few steps from valid."""
    kind = draw(mostly(st.sampled_from(sorted(BODIES)), st.sampled_from(["span.removed", ""])))
    event = envelope(draw, kind)
    BODIES.get(kind, BODIES["span.added"])(draw, event)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        mutate(draw, event)
    return write(event, draw, draw(spellings()))


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item)


def mutate(draw: Callable[..., Any], event: dict[str, Any]) -> None:
    """One change somewhere in the event: a field dropped, nulled, retyped or added."""
    target = draw(st.sampled_from(list(_objects(event))))
    op = draw(st.sampled_from(["drop", "null", "null", "set", "extra", "extra"]))
    if op in ("drop", "null", "set") and target:
        key = draw(st.sampled_from(sorted(target)))
        if op == "drop":
            del target[key]
        else:
            target[key] = None if op == "null" else draw(JSON_VALUES)
    else:
        name = draw(st.text(max_size=8) | st.sampled_from(["x-harness", "type"]))
        target[name] = draw(JSON_VALUES)


# -- the tests ---------------------------------------------------------------


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(records())
def test_the_fast_path_agrees_on_generated_records(raw: bytes) -> None:
    assert_same(raw)


@st.composite
def json_texts(draw: Callable[..., Any]) -> bytes:
    return write(draw(JSON_VALUES), draw, draw(spellings()))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | json_texts())
def test_the_fast_path_agrees_on_anything(raw: bytes) -> None:
    assert_same(raw)


def sample_lines() -> list[bytes]:
    s = SessionScript()
    s.add("a", "account 8841-C", introduces=[{"key": "8841-C", "type": "account"}])
    s.add("b", "did that account clear?", mentions=[{"type": "account"}], role="user")
    s.add("c", hash_only=True, text="only a hash")
    s.score(("a", 0.1), ("b", 1), query_sha256="AB" * 32)
    s.rewrite([{"span_id": "a", "text": "merged", "score": {"score_id": "x", "score": 0.5}}])
    s.evict(["b"])
    s.evict(threshold=0.2)
    s.close()
    return s.lines()


EDGE_CASES = {
    "schema_version 1.0": (rb'"schema_version":1', rb'"schema_version":1.0'),
    "schema_version true": (rb'"schema_version":1', rb'"schema_version":true'),
    "schema_version 1e0": (rb'"schema_version":1', rb'"schema_version":1e0'),
    "seq beyond 64 bits": (rb'"seq":\d+', rb'"seq":18446744073709551616'),
    "seq at 64 bits": (rb'"seq":\d+', rb'"seq":18446744073709551615'),
    "an extra beyond 64 bits": (rb'"type":"', rb'"x":[1,{"y":-9223372036854775809}],"type":"'),
    "an extra at 64 bits": (rb'"type":"', rb'"x":[1,{"y":-9223372036854775808}],"type":"'),
    "an extra NaN": (rb'"type":"', rb'"x":NaN,"type":"'),
    "an extra -Infinity": (rb'"type":"', rb'"x":{"y":[-Infinity]},"type":"'),
    "a nested null": (rb'"type":"', rb'"x":{"y":[null,{"z":null}]},"type":"'),
    "a null field": (rb'"tenant":"acme"', rb'"tenant":null,"tenant":"acme"'),
    "a lone surrogate": (rb'"type":"', rb'"x":"\\ud800","type":"'),
    "a surrogate pair": (rb'"type":"', rb'"x":"\\ud83d\\ude00","type":"'),
    "a duplicate key": (rb'"seq":', rb'"seq":-1,"seq":'),
    "a duplicate type": (rb'"type":"', rb'"type":"span.added","type":"'),
    "trailing data": (rb"}$", rb"} {}"),
    "a JSON value beyond 64 bits": (rb'"score":0.5', rb'"score":[1,18446744073709551616]'),
    "a JSON value with a null": (rb'"score":0.5', rb'"score":{"a":null,"b":[null]}'),
    "a JSON value NaN": (rb'"score":0.5', rb'"score":NaN'),
}
ONLY_IN = {"a JSON value beyond 64 bits", "a JSON value with a null", "a JSON value NaN"}
"""Edge cases of the snapshot's score (the one JSON value of the contract)."""


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_the_fast_path_agrees_on_edge_cases(name: str) -> None:
    pattern, replacement = EDGE_CASES[name]
    for line in sample_lines():
        changed = re.sub(pattern, replacement, line, count=1)
        assert changed != line or (name in ONLY_IN and b"context.rewritten" not in line)
        assert_same(changed)


def test_upper_case_hex_is_lower_cased_on_the_fast_path() -> None:
    for line in sample_lines():
        upper = re.sub(rb"[0-9a-f]{64}", lambda m: m[0].upper(), line)
        assert_same(upper)
        if upper != line:
            assert outcome(decode(upper, LIMIT)) == outcome(decode(line, LIMIT))


def test_the_fast_path_agrees_on_every_golden_input() -> None:
    for name, lines in golden_traces().items():
        for line in lines:
            assert_same(line, name)


def test_the_fast_path_takes_every_valid_golden_record(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = sample_lines() + [line for trace in golden_traces().values() for line in trace]
    upper_case_hex = re.compile(rb'"[0-9a-fA-F]*[A-F][0-9a-fA-F]*"')
    valid = [
        line
        for line in lines
        if not isinstance(decode_slowly(line), Invalid) and not upper_case_hex.search(line)
    ]
    assert len(valid) > 1000
    slow: list[bytes] = []

    def counted(raw: bytes) -> object:
        slow.append(raw)
        return decode_slowly(raw)

    monkeypatch.setattr(decoding, "decode_slowly", counted)
    for line in valid:
        assert not isinstance(decode(line, LIMIT), Invalid)
    assert slow == []
    for line in sample_lines():  # one upper-case digest each: the models lower-case it
        decode(re.sub(rb"[0-9a-f]{64}", lambda m: m[0].upper(), line, count=1), LIMIT)
    assert len(slow) == sum(bool(re.search(rb"[0-9a-f]{64}", line)) for line in sample_lines())


def test_every_input_type_and_model_it_holds_is_derived() -> None:
    assert set(INPUT_TYPES.values()) <= set(STRUCTS)
    for model, struct in STRUCTS.items():
        assert [f.name for f in msgspec.structs.fields(struct)] == [
            name
            for name in model.model_fields
            if not (model in INPUT_TYPES.values() and name == "type")
        ]


def test_a_validator_without_a_twin_fails_the_derivation() -> None:
    from spanguard.streams.engine.fastdecode import _Derivation

    class Checked(ContractModel):
        n: int

        @model_validator(mode="after")
        def _odd(self) -> Checked:
            return self

    class FieldChecked(ContractModel):
        n: int

        @field_validator("n")
        @classmethod
        def _small(cls, n: int) -> int:
            return n

    assert "_odd" not in TWINS
    with pytest.raises(TypeError, match="_odd"):
        _Derivation().struct(Checked)
    with pytest.raises(TypeError, match="_small"):
        _Derivation().struct(FieldChecked)


def test_a_refused_record_is_none() -> None:
    line = sample_lines()[0]
    assert decode_fast(line) is not None
    assert decode_fast(line.replace(b'"seq":0', b'"seq":"0"')) is None
    assert decode_fast(b"\xff" + line) is None
