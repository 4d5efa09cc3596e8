"""Raw bytes -> a validated input event, or the reason it is rejected.

The project decodes input itself (not Faust) so that every bad record gets a
precise dead-letter reason and the worker never stops on it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, cast

import orjson
from pydantic import ValidationError

from spanguard.schemas import INPUT_TYPES, InputEvent, RejectReason
from spanguard.schemas.inputs import NO_NULLS
from spanguard.streams.engine.fastdecode import decode_fast


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

    A record is first decoded by the decoder derived from the models
    (:mod:`~spanguard.streams.engine.fastdecode`, an event that reads as its model); one
    that it does not take, by :func:`decode_slowly`, which alone says why.
    """
    if len(raw) > max_bytes:
        return Invalid(
            RejectReason.TOO_LARGE, f"{len(raw)} bytes, the limit is {max_bytes}", Identity()
        )
    event = decode_fast(raw)
    return decode_slowly(raw) if event is None else event


def decode_slowly(raw: bytes) -> InputEvent | Invalid:
    """:func:`decode` by the path that finds every reason (no size check).

    orjson (the standard library for NaN and Infinity), the checks of ``type``
    and ``schema_version``, then the model's own validator. :func:`decode` takes
    it for every record the derived decoder does not take, so that a reason and
    its detail are always this path's.
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
        model = INPUT_TYPES[type_name]
        event = model.model_validate(data, context=_WITH_NULLS if b"null" in raw else _NO_NULLS)
        return cast(InputEvent, event)  # INPUT_TYPES maps each name to its member of the union
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
