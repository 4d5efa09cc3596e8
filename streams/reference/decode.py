"""Raw input line -> a validated event, or the contract's rejection reason.

Validation itself is the contract's pydantic models in :mod:`schemas` (the
contract says they implement it exactly); this module only names the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from spanguard.schemas import INPUT_ADAPTER, INPUT_TYPES, InputEvent

MAX_EVENT_BYTES = 1 << 20
"""Inputs larger than this are ``TOO_LARGE`` (the contract's 1 MiB request)."""


@dataclass(frozen=True, slots=True)
class Refused:
    """A line that is not a valid event: its reason, and the session and ``seq``
    it names when they are readable (a rejected event still moves ``seq``)."""

    reason: str
    tenant: str | None = None
    session_id: str | None = None
    seq: int | None = None


def read_line(raw: bytes) -> InputEvent | Refused:
    """Decode and validate one input line."""
    if len(raw) > MAX_EVENT_BYTES:
        return Refused("TOO_LARGE")
    try:
        # The stdlib parser reads NaN / Infinity, so a NaN score is named as such.
        data: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Refused("INVALID_JSON")
    if not isinstance(data, dict):
        return Refused("NOT_AN_OBJECT")
    tenant, session_id, seq = _identity(data)
    try:
        return INPUT_ADAPTER.validate_python(data)
    except ValidationError as error:
        return Refused(_reason(data, error), tenant, session_id, seq)


def _identity(data: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    tenant = data.get("tenant")
    session_id = data.get("session_id")
    seq = data.get("seq")
    valid = (
        isinstance(tenant, str)
        and 1 <= len(tenant) <= 128
        and isinstance(session_id, str)
        and 1 <= len(session_id) <= 256
        and type(seq) is int
        and seq >= 0
    )
    if not valid:
        return None, None, None
    return tenant, session_id, seq


def _reason(data: dict[str, Any], error: ValidationError) -> str:
    """The rejection reason for a line that failed validation."""
    kind = data.get("type")
    if kind is None:
        return "MISSING_FIELD"
    if kind not in INPUT_TYPES:
        return "UNKNOWN_TYPE"
    if "schema_version" in data and data["schema_version"] is not None:
        version = data["schema_version"]
        if version != 1 or type(version) is not int:
            return "UNSUPPORTED_SCHEMA_VERSION"
    types = {str(item["type"]) for item in error.errors()}
    for name, reason in (
        ("non_finite_score", "NON_FINITE_SCORE"),
        ("hash_mismatch", "HASH_MISMATCH"),
    ):
        if name in types:
            return reason
    if any(item["type"] == "missing" for item in error.errors()):
        return "MISSING_FIELD"
    return "INVALID_FIELD"
