"""Envelope rules: validation, rejections, seq, duplicates, closed sessions."""

import base64

import orjson
import pytest

from spanguard.schemas import FaultKind, RejectReason, text_sha256
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript


def one_rejection(raw: bytes, **settings: object) -> tuple[str, str]:
    d = EngineDriver(**settings)
    [out] = d.pipe([raw])
    [rej] = d.rejections()
    assert rej is out
    assert base64.b64decode(rej.raw) == raw[: 64 * 1024]
    return rej.reason.value, rej.detail


def valid() -> dict:  # type: ignore[type-arg]
    s = SessionScript()
    s.add("a", "hello")
    return s.raw[0]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: e.pop("seq"), RejectReason.MISSING_FIELD),
        (lambda e: e.update(seq=None), RejectReason.MISSING_FIELD),
        (lambda e: e.update(seq=-1), RejectReason.INVALID_FIELD),
        (lambda e: e.update(seq="3"), RejectReason.INVALID_FIELD),
        (lambda e: e.update(ts="yesterday"), RejectReason.INVALID_FIELD),
        (lambda e: e.update(ts="2026-11-30T10:00:00"), RejectReason.INVALID_FIELD),
        (lambda e: e.update(type="span.removed"), RejectReason.UNKNOWN_TYPE),
        (lambda e: e.pop("type"), RejectReason.MISSING_FIELD),
        (lambda e: e.update(schema_version=2), RejectReason.UNSUPPORTED_SCHEMA_VERSION),
        (lambda e: e.update(schema_version=True), RejectReason.UNSUPPORTED_SCHEMA_VERSION),
        (lambda e: e.update(text_sha256="ab" * 32), RejectReason.HASH_MISMATCH),
        (lambda e: e.pop("text"), RejectReason.MISSING_FIELD),
        (lambda e: e.update(event_id=""), RejectReason.INVALID_FIELD),
        (lambda e: e.update(tenant="t" * 129), RejectReason.INVALID_FIELD),
    ],
)
def test_invalid_events_are_rejected_with_reason(mutate, reason) -> None:  # type: ignore[no-untyped-def]
    event = valid()
    mutate(event)
    got, detail = one_rejection(orjson.dumps(event))
    assert got == reason.value, detail
    assert detail


def test_unknown_fields_and_nulls_are_fine() -> None:
    event = valid()
    event["x-harness"] = {"anything": [1, 2]}
    event["role"] = None
    d = EngineDriver()
    assert d.pipe([orjson.dumps(event)]) == []


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", RejectReason.INVALID_JSON),
        (b"\xff\xfe", RejectReason.INVALID_JSON),
        (b"[1, 2]", RejectReason.NOT_AN_OBJECT),
        (b'"text"', RejectReason.NOT_AN_OBJECT),
    ],
)
def test_garbage(raw: bytes, reason: RejectReason) -> None:
    assert one_rejection(raw)[0] == reason.value


def test_non_finite_score_rejects_whole_event() -> None:
    s = SessionScript()
    s.add("a", "x")
    s.score(("a", 0.5))
    line = s.lines()[1].replace(b"0.5", b"NaN")
    d = EngineDriver()
    d.pipe([*s.lines()[:1], line])
    [rej] = d.rejections()
    assert rej.reason == RejectReason.NON_FINITE_SCORE and rej.caused_by == "s1-e1"


def test_too_large_keeps_first_64k() -> None:
    raw = b'{"pad": "' + b"x" * 200_000 + b'"}'
    d = EngineDriver(max_event_bytes=100_000)
    d.pipe([raw])
    [rej] = d.rejections()
    assert rej.reason == RejectReason.TOO_LARGE and rej.raw_truncated
    assert rej.raw_size == len(raw) and len(base64.b64decode(rej.raw)) == 64 * 1024


def test_span_exists_is_rejected_and_seq_advances_silently() -> None:
    s = SessionScript()
    s.add("a", "x")
    s.add("a", "again")
    s.add("b", "y")
    d = EngineDriver()
    d.pipe(s)
    [rej] = d.rejections()
    assert rej.reason == RejectReason.SPAN_EXISTS
    assert d.faults() == []


def test_rejected_event_advances_seq_silently() -> None:
    s = SessionScript()
    s.add("a", "x")
    s.add("b", "y")
    s.add("c", "z")
    lines = s.lines()
    broken = orjson.loads(lines[1])
    broken["tokens"] = -5
    d = EngineDriver()
    d.pipe([lines[0], orjson.dumps(broken), lines[2]])
    assert [r.reason for r in d.rejections()] == [RejectReason.INVALID_FIELD]
    assert d.faults() == []


def test_sequence_gap_and_out_of_order_are_faults_but_processed() -> None:
    s = SessionScript()
    s.add("a")
    s.seq = 5
    s.add("b")
    s.seq = 3
    s.add("c")
    d = EngineDriver()
    d.pipe(s)
    gap, ooo = d.faults()
    assert gap.kind == FaultKind.SEQUENCE_GAP and gap.evidence == {
        "expected": 1,
        "actual": 5,
        "missing": 4,
    }
    assert ooo.kind == FaultKind.OUT_OF_ORDER and ooo.evidence == {"expected": 6, "actual": 3}
    assert set(d.engine.session("acme", "s1").spans) == {"a", "b", "c"}  # type: ignore[union-attr]


def test_duplicates_inside_window_are_ignored_and_reprocessed_outside() -> None:
    s = SessionScript()
    s.add("a")
    s.evict(["a"])
    lines = s.lines()
    d = EngineDriver(dedup_window=2)
    first = d.pipe([lines[1]])
    assert d.pipe([lines[1]]) == []
    assert d.engine.stats.duplicates == 1
    s2 = SessionScript()
    s2.seq = 2
    s2.add("x")
    s2.add("y")
    d.pipe(s2)
    again = d.pipe([lines[1]])
    assert [o.type for o in again] == ["integrity.fault", "eviction.decided"]  # OUT_OF_ORDER too
    assert again[-1].decision_id != first[-1].decision_id  # type: ignore[union-attr]


def test_closed_session_rejects_later_events_and_nothing_crosses_tenants() -> None:
    s = SessionScript(tenant="t1")
    s.add("a")
    s.close()
    s.add("b")
    other = SessionScript(tenant="t2")
    other.add("a")
    d = EngineDriver()
    d.pipe(s)
    d.pipe(other)
    [rej] = d.rejections()
    assert rej.reason == RejectReason.SESSION_CLOSED
    assert d.engine.session("t1", "s1") is None
    assert d.engine.session("t2", "s1") is not None


def test_output_ids_are_deterministic() -> None:
    s = SessionScript()
    s.add("a")
    s.add("b")
    s.score(("a", 0.1), ("b", 0.2), no_hash=["b"])
    s.evict(["a", "b"])
    outs = [EngineDriver().pipe(s) for _ in range(2)]
    assert [o.model_dump_json() for o in outs[0]] == [o.model_dump_json() for o in outs[1]]


def _scored(score: object, **fields: object) -> bytes:
    s = SessionScript()
    s.add("a", "hello")
    s.score(("a", 0.5))
    event = s.raw[1]
    event["scores"][0].update(score=score, **fields)
    return orjson.dumps(event)


@pytest.mark.parametrize(
    ("raw", "reason", "detail"),
    [
        # the hex checks and the score's finiteness run in pydantic-core (chains):
        # the same reasons and words as the Python validators they replaced
        (
            _scored(0.5, text_sha256=7),
            "INVALID_FIELD",
            "scores.0.text_sha256: Input should be a valid string",
        ),
        (
            _scored(0.5, query_sha256="XYZ"),
            "INVALID_FIELD",
            "scores.0.query_sha256: String should match pattern '^[0-9a-f]{64}$'",
        ),
        (
            _scored("high"),
            "INVALID_FIELD",
            "scores.0.score: Input should be a valid number, unable to parse string as a number",
        ),
        (
            _scored(0.5).replace(b'"score":0.5', b'"score":Infinity'),
            "NON_FINITE_SCORE",
            "scores.0.score: score must be a finite number",
        ),
        (
            _scored(0.5).replace(b'"score":0.5', b'"score":1e999'),
            "NON_FINITE_SCORE",
            "scores.0.score: score must be a finite number",
        ),
    ],
)
def test_hash_and_score_rejections_keep_their_words(raw: bytes, reason: str, detail: str) -> None:
    assert one_rejection(raw) == (reason, detail)


def test_upper_case_hashes_are_lower_cased() -> None:
    s = SessionScript()
    s.add("a", "hello")
    event = s.raw[0]
    digest = text_sha256("hello")
    event["text_sha256"] = digest.upper()
    d = EngineDriver()
    assert d.pipe([orjson.dumps(event)]) == []
    span = d.engine.session(event["tenant"], event["session_id"])
    assert span is not None
    assert span.spans["a"].text_sha256 == digest
