"""Idle expiry (contract 1.2): the partition's event-time clock expires sessions that
went quiet, rejects their later events, forgets old markers, and restores exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spanguard.schemas import EventRejected, RejectReason
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from tests.engine.test_persist import run_split, run_whole

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def at(hours: float) -> datetime:
    return START + timedelta(hours=hours)


class Partition:
    """One partition's engine, fed events from several sessions at chosen times."""

    def __init__(self, **settings: object) -> None:
        self.engine = Engine(EngineSettings(**settings))  # type: ignore[arg-type]
        self.scripts: dict[str, SessionScript] = {}
        self.offset = 0
        self.lines: list[bytes] = []

    def add(self, session: str, hours: float, received: datetime | None = None) -> list:
        script = self.scripts.setdefault(session, SessionScript(session_id=session))
        event = script.add(f"s{script.seq}", "a turn")
        event["ts"] = at(hours).isoformat().replace("+00:00", "Z")
        line = script.lines()[-1]
        self.lines.append(line)
        self.offset += 1
        return self.engine.process_raw(line, Source("t", 0, self.offset, received))


def rejection(outputs: list) -> EventRejected:
    (only,) = outputs
    assert isinstance(only, EventRejected)
    return only


def test_a_quiet_session_expires_when_the_clock_passes_it() -> None:
    p = Partition()
    p.add("a", 0)
    p.add("b", 1)
    p.add("b", 24.5)  # a is 24.5 h behind the clock: expired now
    assert p.engine.session("acme", "a") is None
    assert p.engine.stats.sessions_expired == 1
    rejected = rejection(p.add("a", 25))
    assert rejected.reason is RejectReason.SESSION_EXPIRED
    assert "2026-12-01T09:00:00+00:00" in rejected.detail  # newest ts + idle_timeout


def test_a_session_that_comes_back_after_25_hours_finds_itself_expired() -> None:
    p = Partition()
    p.add("a", 0)
    assert rejection(p.add("a", 25)).reason is RejectReason.SESSION_EXPIRED


def test_exactly_the_timeout_behind_is_not_expired() -> None:
    p = Partition()
    p.add("a", 0)
    assert not p.add("a", 24)  # strictly behind only
    assert p.engine.session("acme", "a") is not None


def test_a_first_event_is_accepted_however_old_and_expires_at_the_next_tick() -> None:
    p = Partition()
    p.add("b", 100)
    assert p.add("old", 10) == []  # accepted: a session's first event
    assert p.engine.session("acme", "old") is not None
    p.add("b", 100.5)
    assert p.engine.session("acme", "old") is None


def test_a_redelivered_event_of_an_expired_session_is_a_duplicate() -> None:
    p = Partition()
    p.add("a", 0)
    first = p.lines[0]
    p.add("b", 30)
    before = p.engine.stats.duplicates
    assert p.engine.process_raw(first, Source("t", 0, 99)) == []
    assert p.engine.stats.duplicates == before + 1


def test_a_wild_timestamp_moves_the_clock_no_further_than_the_broker_allows() -> None:
    p = Partition()
    p.add("a", 0, received=at(0))
    p.add("b", 1000, received=at(1))  # ts far ahead; broker time 1 h: clock at 2 h
    assert p.engine.session("acme", "a") is not None
    assert p.engine.lifetimes.clock == at(2)


def test_markers_are_forgotten_after_their_retention() -> None:
    p = Partition(tombstone_retention=timedelta(days=7))
    p.add("a", 0)
    p.add("b", 30)  # a expires at 24 h
    assert rejection(p.add("a", 31)).reason is RejectReason.SESSION_EXPIRED
    p.add("b", 24 + 7 * 24 + 1)  # the marker is older than 7 days: forgotten
    assert ("acme", "a") not in p.engine.markers
    assert p.add("a", 24 + 7 * 24 + 2) == []  # a new session under the old id


def test_closed_markers_are_forgotten_too() -> None:
    p = Partition(tombstone_retention=timedelta(days=1))
    p.add("a", 0)
    script = p.scripts["a"]
    script.close()
    p.engine.process_raw(script.lines()[-1], Source("t", 0, 50))
    assert ("acme", "a") in p.engine.markers.closed
    p.add("b", 30)
    assert ("acme", "a") not in p.engine.markers.closed


def test_a_zero_timeout_never_expires() -> None:
    p = Partition(idle_timeout=timedelta(0))
    p.add("a", 0)
    p.add("b", 10_000)
    assert p.engine.session("acme", "a") is not None


def test_restores_at_every_cut_expire_exactly_as_replay() -> None:
    p = Partition()
    for hours, session in [(0, "a"), (1, "b"), (2, "c"), (20, "b"), (26, "c"), (27, "a")]:
        p.add(session, hours)
    p.add("c", 30)
    p.add("b", 60)
    lines = p.lines
    expected = run_whole(lines)
    assert sum(b"SESSION_EXPIRED" in line for line in expected) == 2  # a at 27 h, b at 60 h
    for cut in range(len(lines) + 1):
        assert run_split(lines, cut) == expected, f"cut at {cut}"


def test_a_busy_session_keeps_one_entry_on_the_watch() -> None:
    # The expiry heap is as large as the live sessions, not as their events.
    p = Partition()
    for i in range(300):
        p.add("busy", i / 60)
    for name in ("a", "b", "c"):
        p.add(name, 5)
    assert p.engine.lifetimes.watching == 4
    p.add("busy", 28)
    p.add("busy", 40)  # a, b, c expire; busy's one entry moved on
    assert p.engine.lifetimes.watching == 1
    assert p.engine.stats.sessions_expired == 3
