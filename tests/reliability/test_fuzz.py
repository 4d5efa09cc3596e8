"""20,000 hostile records through the engine (the short variant of ``python -m bench.fuzz``)."""

from __future__ import annotations

from random import Random

import pytest

from bench import fuzz
from bench.fuzz import MUTATIONS, FuzzSessions, Hostile, garbage_mix, hostile_records, run_fuzz
from spanguard.schemas import EventRejected, RejectReason
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine

COUNT = 20_000


def test_twenty_thousand_hostile_records_no_crash_all_answered_neighbours_unchanged() -> None:
    report = run_fuzz(COUNT, seed=1, valid_sessions=60)
    assert report.crashes == []
    assert report.unanswered == []
    assert report.valid_mismatches == []
    assert report.hostile == COUNT
    assert report.valid_records > 3000
    # every category was exercised, and the must-reject ones were all rejected
    assert all(tally.get("records", 0) > 0 for tally in report.by_category.values())
    for name in ("truncated", "oversized", "invalid_utf8", "tombstone", "unknown_type"):
        tally = report.by_category[name]
        assert tally["rejected"] == tally["records"], name
    assert report.reasons["TOO_LARGE"] > 0 and report.reasons["NON_FINITE_SCORE"] > 0


def test_the_inputs_are_deterministic() -> None:
    def first(seed: int) -> list[bytes]:
        return [
            item.raw if isinstance(item, Hostile) else item for item in hostile_records(seed, 500)
        ]

    assert first(3) == first(3)
    assert first(3) != first(4)


def test_a_crash_is_caught_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = Engine.process_raw

    def fragile(self: Engine, raw: bytes, source: fuzz.Source) -> list:  # type: ignore[type-arg]
        if raw == b"":
            raise RuntimeError("boom on a tombstone")
        return real(self, raw, source)

    monkeypatch.setattr(Engine, "process_raw", fragile)
    report = run_fuzz(2_000, seed=2, valid_sessions=5)
    assert report.crashes and {c["category"] for c in report.crashes} == {"tombstone"}
    assert not report.ok


def test_a_hostile_record_that_touches_a_valid_session_is_detected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a "hostile" record that re-uses a valid session's id shifts its seq: the
    # mixed run's outputs for that session then differ from the clean run's
    def hijack(rng: Random, event: dict, raw: bytes, _: FuzzSessions) -> tuple[bytes, None]:  # type: ignore[type-arg]
        valid_session = "s2007-00000"
        return (
            b'{"type":"session.closed","schema_version":1,"event_id":"x","session_id":"'
            + valid_session.encode()
            + b'","tenant":"acme","seq":0,"turn":0,"ts":"2026-11-30T09:00:00Z"}',
            None,
        )

    monkeypatch.setitem(MUTATIONS, "truncated", (hijack, 1000))
    report = run_fuzz(500, seed=2, valid_sessions=5)
    assert report.valid_mismatches
    assert not report.ok


def test_garbage_mix_is_ten_percent_must_reject_garbage() -> None:
    valid = [b'{"session_id": "v%d"}' % i for i in range(900)]
    mixed, garbage = garbage_mix(valid, share=0.1, seed=5)
    assert len(garbage) == 100 and len(mixed) == 1000
    assert [line for line in mixed if line in set(valid)] == valid  # order kept
    assert all(item.expected for item in garbage)
    assert {"oversized", "truncated", "tombstone"} <= {item.category for item in garbage}
    engine = Engine(EngineSettings(max_event_bytes=fuzz.MAX_EVENT_BYTES))
    for item in garbage:
        [rejected] = engine.process_raw(item.raw, fuzz.Source("mix", 0, item.index))
        assert isinstance(rejected, EventRejected)
        assert rejected.reason in (item.expected or ())


def test_garbage_mix_without_too_large() -> None:
    valid = [b'{"session_id": "v%d"}' % i for i in range(900)]
    _, garbage = garbage_mix(valid, share=0.1, seed=5, too_large=False)
    assert len(garbage) == 100
    assert not any(RejectReason.TOO_LARGE in (item.expected or ()) for item in garbage)
