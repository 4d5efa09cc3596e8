"""What a dead letter keeps of a rejected record, bounded so it always fits.

A dead letter carries the input (base64), the record's Kafka key and headers.
Each part is capped at ``dead_letter_raw_limit`` bytes (64 KiB by default, at
most 192 KiB), so that even a 1 MiB input, a huge key and huge headers give a
dead letter well inside a producer's 1 MiB request; ``raw_sha256`` and
``raw_size`` still identify the whole input.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from spanguard.schemas import RejectedHeader

_FIELD = re.compile(
    rb'"(tenant|session_id)"[ \t\r\n]{0,16}+:[ \t\r\n]{0,16}+"((?:[^"\\]|\\.){1,1024}+)"'
)
"""A top-level-looking ``"tenant": "..."`` or ``"session_id": "..."`` (bounded)."""
_LIMITS = {"tenant": 128, "session_id": 256}


@dataclass(frozen=True, slots=True)
class Kept:
    """The bounded parts of a rejected record, ready for ``event.rejected``."""

    raw: str
    raw_truncated: bool
    raw_sha256: str
    key: str | None
    key_truncated: bool
    headers: list[RejectedHeader]
    headers_truncated: bool


def keep(raw: bytes, key: bytes | None, headers: Sequence[tuple[str, bytes]], limit: int) -> Kept:
    """Cut ``raw``, ``key`` and the headers' values to ``limit`` bytes each (the
    headers: in order, while their values add up to at most ``limit``)."""
    kept_headers: list[RejectedHeader] = []
    used = 0
    headers_truncated = False
    for name, value in headers:
        size = len(value) + len(name)
        if used + size > limit:
            headers_truncated = True
            break
        used += size
        kept_headers.append(RejectedHeader(key=name, value_b64=_b64(value)))
    return Kept(
        raw=_b64(raw[:limit]),
        raw_truncated=len(raw) > limit,
        raw_sha256=hashlib.sha256(raw).hexdigest(),
        key=None if key is None else _b64(key[:limit]),
        key_truncated=key is not None and len(key) > limit,
        headers=kept_headers,
        headers_truncated=headers_truncated,
    )


def scan_identity(prefix: bytes) -> tuple[str | None, str | None]:
    """``(tenant, session_id)`` read from the start of an input too large to parse.

    A bounded scan: one pass of a possessive pattern over ``prefix`` (the caller
    passes at most ``dead_letter_raw_limit`` bytes), taking the first occurrence
    of each key whose value is a JSON string of a valid length.
    """
    found: dict[str, str] = {}
    for match in _FIELD.finditer(prefix):
        name = match.group(1).decode("ascii")
        if name in found:
            continue
        try:
            value = orjson.loads(b'"' + match.group(2) + b'"')
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, str) and 0 < len(value) <= _LIMITS[name]:
            found[name] = value
        if len(found) == 2:
            break
    return found.get("tenant"), found.get("session_id")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
