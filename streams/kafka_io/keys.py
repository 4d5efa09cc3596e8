"""The Kafka key of an input line: its session, found even in a broken line.

The producers key by it, and the worker's partition check recomputes it for a
record that arrived without a key.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from spanguard.streams.kafka_io.partitioning import partition_for


def line_partition(raw: bytes, partitions: int) -> int:
    """The input partition a line lands on when produced keyed by its session (Kafka's
    murmur2 partitioner; a line with no readable session goes to 0, as replay reads
    the contract for a record with no key)."""
    key = session_key(raw)
    return 0 if key is None else partition_for(key, partitions)


def session_key(raw: bytes) -> bytes | None:
    """The Kafka key of an input line: its ``session_id`` (UTF-8), or None when it has none.

    Every line is keyed by its session when one can be found, valid or not, so a
    bad line lands on its session's partition (and its dead letter and ``seq``
    accounting stay with the session). The search is lenient: strict JSON first,
    then JSON with ``NaN``/``Infinity`` (which the engine reads, to report
    ``NON_FINITE_SCORE``), then, for truncated or otherwise broken lines, the
    first ``"session_id": "..."`` string in the text.
    """
    data = _parse_leniently(raw)
    if data is _UNPARSABLE:
        match = _SESSION_FIELD.search(raw)
        if match is None:
            return None
        try:
            session = json.loads(b'"' + match.group(1) + b'"')
        except ValueError:  # includes invalid UTF-8
            return None
    else:
        session = data.get("session_id") if isinstance(data, dict) else None
    if not isinstance(session, str) or not session:
        return None
    try:
        return session.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape: no session can have that id
        return None


_UNPARSABLE = object()
#: ``"session_id" : "<JSON string body>"``, for lines that do not parse as a whole.
_SESSION_FIELD = re.compile(rb'"session_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _parse_leniently(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)  # reads NaN and Infinity, like the engine's decoder
    except (ValueError, RecursionError):
        return _UNPARSABLE
