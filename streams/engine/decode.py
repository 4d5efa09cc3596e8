"""Raw bytes -> a validated input event, or the reason it is rejected.

The project decodes input itself (not Faust) so that every bad record gets a
precise dead-letter reason and the worker never stops on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import CoreSchema, SchemaValidator, core_schema

from spanguard.schemas import INPUT_TYPES, InputEvent, RejectReason
from spanguard.schemas.inputs import NO_NULLS, null_free_core_schema


@dataclass(frozen=True, slots=True)
class Identity:
    """What could be read of a record's origin, even when the record is invalid."""

    tenant: str | None = None
    session_id: str | None = None
    event_id: str | None = None
    seq: int | None = None
    ts: str | None = None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A record that cannot be processed: why, in words a harness author can act on."""

    reason: RejectReason
    detail: str
    identity: Identity


_REASON_OF_ERROR = {
    "hash_mismatch": RejectReason.HASH_MISMATCH,
    "non_finite_score": RejectReason.NON_FINITE_SCORE,
    "missing": RejectReason.MISSING_FIELD,
}
_NO_NULLS = {NO_NULLS: True}
_WITH_NULLS: dict[str, bool] = {}
_VALIDATORS = {name: model.__pydantic_validator__ for name, model in INPUT_TYPES.items()}
_REASON_RANK = [
    RejectReason.HASH_MISMATCH,
    RejectReason.NON_FINITE_SCORE,
    RejectReason.MISSING_FIELD,
]


def decode(raw: bytes, max_bytes: int) -> InputEvent | Invalid:
    """Parse and validate one input record.

    Never raises: every failure comes back as :class:`Invalid` with a reason from
    the contract (``TOO_LARGE``, ``INVALID_JSON``, ``NOT_AN_OBJECT``,
    ``MISSING_FIELD``, ``UNKNOWN_TYPE``, ``UNSUPPORTED_SCHEMA_VERSION``,
    ``INVALID_FIELD``, ``HASH_MISMATCH``, ``NON_FINITE_SCORE``).

    A record is first validated straight from its bytes (the fast path below);
    one that it refuses, by :func:`decode_slowly`, with the same result.
    """
    if len(raw) > max_bytes:
        return Invalid(
            RejectReason.TOO_LARGE, f"{len(raw)} bytes, the limit is {max_bytes}", Identity()
        )
    try:
        return _FROM_JSON.validate_json(raw)  # type: ignore[no-any-return]
    except ValidationError:
        return decode_slowly(raw)


def decode_slowly(raw: bytes) -> InputEvent | Invalid:
    """:func:`decode` by the path that finds every reason (no size check).

    orjson (the standard library for NaN and Infinity), the checks of ``type``
    and ``schema_version``, then the model's own validator. :func:`decode` takes
    it for every record its fast path refuses, so that a reason and its detail
    are always this path's.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        data = _lenient_json(raw)
        if data is None:
            return Invalid(RejectReason.INVALID_JSON, str(exc), Identity())
    if not isinstance(data, dict):
        return Invalid(
            RejectReason.NOT_AN_OBJECT,
            f"expected a JSON object, got {type(data).__name__}",
            Identity(),
        )
    # The identity is read only for a record that is rejected (most are not).
    type_name = data.get("type")
    if type_name is None:
        return Invalid(RejectReason.MISSING_FIELD, "type: field required", read_identity(data))
    if not isinstance(type_name, str) or type_name not in INPUT_TYPES:
        known = ", ".join(sorted(INPUT_TYPES))
        return Invalid(
            RejectReason.UNKNOWN_TYPE,
            f"type {type_name!r} is not one of {known}",
            read_identity(data),
        )
    version = data.get("schema_version")
    if version is None:
        return Invalid(
            RejectReason.MISSING_FIELD, "schema_version: field required", read_identity(data)
        )
    if type(version) is not int or version != 1:
        return Invalid(
            RejectReason.UNSUPPORTED_SCHEMA_VERSION,
            f"schema_version {version!r} is not supported (only 1)",
            read_identity(data),
        )
    try:
        # The type is known to be valid: its model validates directly (what the
        # discriminated union would pick, without the union's dispatch).
        validator = _VALIDATORS[type_name]
        return validator.validate_python(  # type: ignore[no-any-return]
            data, context=_WITH_NULLS if b"null" in raw else _NO_NULLS
        )
    except ValidationError as exc:
        return Invalid(*_explain(exc), read_identity(data))
    except RecursionError:
        return Invalid(RejectReason.INVALID_FIELD, "nested too deeply", read_identity(data))


def _lenient_json(raw: bytes) -> Any:
    # orjson refuses NaN and Infinity; the standard library reads them, so that a
    # NaN score is reported as NON_FINITE_SCORE rather than as broken JSON.
    try:
        data = json.loads(raw.decode("utf-8"))
        if _SURROGATE_ESCAPE.search(raw):
            # the standard library also reads a lone surrogate ("\ud800"), which is no
            # Unicode text: an id holding one could never be written out again (outputs,
            # state). It stays INVALID_JSON, as orjson said.
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        return data
    except (ValueError, RecursionError):  # includes Unicode errors
        return None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def read_identity(data: dict[str, Any]) -> Identity:
    """Read tenant, session, event id, seq and ts where they have valid shapes."""

    def text(name: str, limit: int) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) and 0 < len(value) <= limit else None

    seq = data.get("seq")
    return Identity(
        tenant=text("tenant", 128),
        session_id=text("session_id", 256),
        event_id=text("event_id", 128),
        seq=seq if type(seq) is int and seq >= 0 else None,
        ts=text("ts", 64),
    )


def _explain(exc: ValidationError) -> tuple[RejectReason, str]:
    errors = exc.errors(include_url=False, include_input=False)
    reasons = [_REASON_OF_ERROR.get(err["type"], RejectReason.INVALID_FIELD) for err in errors]
    reason = next((r for r in _REASON_RANK if r in reasons), RejectReason.INVALID_FIELD)
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "event"
        parts.append(f"{loc}: {err['msg']}")
    if len(errors) > 5:
        parts.append(f"... and {len(errors) - 5} more")
    return reason, "; ".join(parts)


# -- the fast path ---------------------------------------------------------
#
# Every record is first validated straight from its bytes by one validator
# derived from the models' own core schemas. It must accept exactly what the
# path above accepts, with the same values; what it refuses goes down that
# path, which alone says why. So the derived schemas only narrow the models'
# schemas, where reading the bytes could differ from orjson.loads, the checks
# above and the null-removing step:
#
# * no JSON null anywhere (there the step would change the input; the path
#   above removes the nulls);
# * ``schema_version`` a JSON integer (the check above), where a literal read
#   from JSON also takes ``1.0`` and ``true``;
# * no integer that orjson reads as a float (beyond 64 bits), which
#   pydantic-core reads as an int: an int field then refuses the float, an
#   unknown field or a JSON value would keep a different value.
#
# Elsewhere the two JSON readers agree (duplicate keys, escapes, surrogates,
# NaN and Infinity, number spellings, whitespace): tests/engine/test_decode_fast.py
# compares the two paths on generated records.

_INT_RANGE = (-(2**63), 2**64 - 1)
"""The integers that orjson reads as integers."""


def _as_read_by_orjson(value: Any) -> Any:
    """``value`` (any JSON value) if it holds no null and orjson reads it the same."""
    if value is None:
        raise ValueError("a null")
    if type(value) is int:
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise ValueError("an integer that orjson reads as a float")
    elif type(value) is list:
        for item in value:
            _as_read_by_orjson(item)
    elif type(value) is dict:
        for item in value.values():
            _as_read_by_orjson(item)
    return value


_NOT_VALIDATION = {"metadata", "serialization"}
"""Keys of a core schema node that hold no validation (left as they are)."""


def _any_json_value() -> CoreSchema:
    return core_schema.no_info_after_validator_function(
        _as_read_by_orjson, core_schema.any_schema()
    )


def _narrowed(node: Any) -> Any:
    """A copy of a core schema node, narrowed as said above."""
    if isinstance(node, list):
        return [_narrowed(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {
        key: value if key in _NOT_VALIDATION else _narrowed(value) for key, value in node.items()
    }
    kind = node.get("type")
    if kind == "nullable":
        node = node["schema"]
    elif kind == "int":
        node["ge"] = max(node.get("ge", _INT_RANGE[0]), _INT_RANGE[0])
        node["le"] = min(node.get("le", _INT_RANGE[1]), _INT_RANGE[1])
    elif kind == "any":
        node = _any_json_value()
    elif kind == "model" and node.get("config", {}).get("extra_fields_behavior") == "allow":
        fields = node["schema"]
        if fields["type"] != "model-fields" or "extras_schema" in fields:
            raise ValueError(f"{node['cls'].__name__}: unexpected model schema")
        fields["extras_schema"] = _any_json_value()
    elif kind == "model-fields" and "schema_version" in node["fields"]:
        field = node["fields"]["schema_version"]
        field["schema"] = core_schema.chain_schema(
            [core_schema.int_schema(strict=True), field["schema"]]
        )
    return node


def _models(node: Any) -> Iterator[type[BaseModel]]:
    if isinstance(node, list):
        for item in node:
            yield from _models(item)
    elif isinstance(node, dict):
        if node.get("type") == "model":
            yield node["cls"]
        for value in node.values():
            yield from _models(value)


def fresh_validator(schema: CoreSchema) -> SchemaValidator:
    """A validator of ``schema`` exactly as written, models included.

    pydantic-core reuses a complete model's own validator wherever a schema names
    the model, which would undo any change made to a copy of its core schema: for
    the time of the build, the models it names do not say they are complete.
    """
    models = set(_models(schema))
    complete = {model: model.__dict__["__pydantic_complete__"] for model in models}
    for model in models:
        type.__setattr__(model, "__pydantic_complete__", False)
    try:
        return SchemaValidator(schema)
    finally:
        for model, flag in complete.items():
            type.__setattr__(model, "__pydantic_complete__", flag)


def _json_validator() -> SchemaValidator:
    """Every input type, validated from JSON bytes, narrowed as said above."""
    choices: dict[str, CoreSchema] = {
        name: _narrowed(null_free_core_schema(model)) for name, model in INPUT_TYPES.items()
    }
    return fresh_validator(core_schema.tagged_union_schema(choices, discriminator="type"))


_FROM_JSON = _json_validator()
