"""Dead letters that always fit, with the record's key and headers."""

from __future__ import annotations

import base64
import hashlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from spanguard.schemas import RejectReason
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript

MIB = 1 << 20


def reject(raw: bytes | None, source: Source | None = None, **conf: object):  # type: ignore[no-untyped-def]
    engine = Engine(EngineSettings(**conf))  # type: ignore[arg-type]
    [rej] = engine.process_raw(raw, source or Source("events", 3, 42))
    assert rej.type == "event.rejected"
    return rej


def test_key_and_headers_are_kept() -> None:
    source = Source("events", 3, 42, key=b"sess-1", headers=[("trace", b"\x00\xff"), ("a", b"")])
    rej = reject(b"[1, 2]", source)
    assert rej.reason == RejectReason.NOT_AN_OBJECT
    assert base64.b64decode(rej.key) == b"sess-1" and not rej.key_truncated
    assert [(h.key, base64.b64decode(h.value_b64)) for h in rej.headers] == [
        ("trace", b"\x00\xff"),
        ("a", b""),
    ]
    assert not rej.headers_truncated
    assert rej.raw_sha256 == hashlib.sha256(b"[1, 2]").hexdigest()


def test_keyless_record_has_no_key() -> None:
    rej = reject(b"nope")
    assert rej.key is None and rej.headers == [] and rej.reason == RejectReason.INVALID_JSON


@pytest.mark.parametrize(("value", "what"), [(None, "tombstone"), (b"", "empty value")])
def test_tombstone_is_a_clear_rejection_that_keeps_the_key(value: bytes | None, what: str) -> None:
    rej = reject(value, Source("events", 0, 7, key=b"sess-9"))
    assert rej.reason == RejectReason.INVALID_JSON and what in rej.detail
    assert base64.b64decode(rej.key) == b"sess-9"
    assert rej.raw == "" and rej.raw_size == 0 and not rej.raw_truncated


def test_any_rejected_input_over_the_limit_is_cut_with_its_hash() -> None:
    event = SessionScript().add("a", "x" * 100_000)
    event["seq"] = -1  # INVALID_FIELD, not TOO_LARGE
    raw = orjson.dumps(event)
    rej = reject(raw)
    assert rej.reason == RejectReason.INVALID_FIELD
    assert rej.raw_truncated and rej.raw_size == len(raw)
    assert base64.b64decode(rej.raw) == raw[: 64 * 1024]
    assert rej.raw_sha256 == hashlib.sha256(raw).hexdigest()
    assert rej.tenant == "acme" and rej.session_id == "s1"


def test_too_large_still_names_tenant_and_session_from_its_prefix() -> None:
    raw = (
        b'{"type": "span.added", "tenant" : "te\\"nant", "session_id":"s-7", "text": "'
        + b"x" * (2 * MIB)
        + b'"}'
    )
    rej = reject(raw)
    assert rej.reason == RejectReason.TOO_LARGE and rej.raw_truncated
    assert rej.tenant == 'te"nant' and rej.session_id == "s-7"
    assert rej.raw_size == len(raw) and len(base64.b64decode(rej.raw)) == 64 * 1024


def test_too_large_scan_is_bounded_to_the_kept_prefix() -> None:
    raw = b'{"text": "' + b"x" * (2 * MIB) + b'", "tenant": "late", "session_id": "late"}'
    rej = reject(raw)
    assert rej.tenant is None and rej.session_id is None


def test_too_large_scan_ignores_values_of_invalid_length() -> None:
    raw = b'{"tenant": "' + b"t" * 129 + b'", "session_id": "ok", "pad": "' + b"x" * MIB + b'"}'
    rej = reject(raw)
    assert rej.tenant is None and rej.session_id == "ok"


@settings(max_examples=25, deadline=None)
@given(
    raw_size=st.integers(0, 3 * MIB),
    key_size=st.one_of(st.none(), st.integers(0, 2 * MIB)),
    header_sizes=st.lists(st.integers(0, MIB), max_size=5),
    limit=st.sampled_from([1024, 64 * 1024, 192 * 1024]),
)
def test_a_dead_letter_always_fits_a_1_mib_request(
    raw_size: int, key_size: int | None, header_sizes: list[int], limit: int
) -> None:
    raw = b"{" * raw_size or None
    key = None if key_size is None else b"k" * key_size
    headers = [(f"h{i}", b"v" * n) for i, n in enumerate(header_sizes)]
    rej = reject(raw, Source("events", 0, 1, key=key, headers=headers), dead_letter_raw_limit=limit)
    encoded = encode_output(rej)
    assert len(encoded) < MIB - 4096  # with room for the record's own overhead
    assert rej.raw_truncated == (raw_size > limit)
    if key_size is not None:
        assert rej.key_truncated == (key_size > limit)


def test_the_limit_is_bounded_so_the_guarantee_holds() -> None:
    with pytest.raises(ValidationError, match="dead_letter_raw_limit"):
        EngineSettings(dead_letter_raw_limit=512 * 1024)


def test_a_record_refused_before_processing_names_whose_it_was() -> None:
    # The runtime refuses a record on the wrong partition; the dead letter still says
    # which tenant, session and event it was when the record can be read (issue 22).
    from spanguard.schemas import RejectReason
    from spanguard.streams.engine.engine import Engine, Source
    from spanguard.streams.engine.trace import SessionScript

    engine = Engine()
    script = SessionScript(session_id="s9", tenant="globex")
    script.add("a", "hi")
    (line,) = script.lines()
    rejected = engine.refuse(line, Source("t", 3, 7), RejectReason.INVALID_FIELD, "wrong partition")
    assert (rejected.tenant, rejected.session_id, rejected.caused_by) == ("globex", "s9", "s9-e0")
    unreadable = engine.refuse(b"{not json", Source("t", 3, 8), RejectReason.INVALID_FIELD, "x")
    assert (unreadable.tenant, unreadable.session_id) == (None, None)
    assert engine.sessions == {}
