"""Idle sessions held packed (``cold_after``): a pure memory measure. Outputs and
changelog records are those of an engine that never packs, whatever the cadence of
packing, thawing and draining; reading a cold session thaws it, counting does not."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.cold import COOL_PER_TICK, pack, unpack
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.persist import Record
from spanguard.streams.sim import SimConfig, simulate
from tests.engine.scripts import actions, build
from tests.engine.test_expiry import Partition, rejection
from tests.engine.test_persist import run_split, run_whole
from tests.engine.test_properties import PROPS

NEVER = timedelta(0)
AT_ONCE = timedelta(microseconds=1)
"""Every session idle at a tick of the clock packs: its next event thaws it."""
A, B = ("acme", "a"), ("acme", "b")


def run(
    lines: list[bytes], cold_after: timedelta, drain_every: int
) -> tuple[list[bytes], list[list[Record]], Engine]:
    """Outputs and each drain's records of one engine fed ``lines``."""
    engine = Engine(EngineSettings(cold_after=cold_after), track_changes=True)
    outputs: list[bytes] = []
    drains: list[list[Record]] = []
    for offset, line in enumerate(lines, 1):
        outputs.extend(map(encode_output, engine.process_raw(line, Source("t", 0, offset))))
        if offset % drain_every == 0:
            drains.append(engine.drain_changes())
    drains.append(engine.drain_changes())
    return outputs, drains, engine


def test_the_simulated_fleet_reads_the_same_with_sessions_packed_at_every_tick() -> None:
    lines = simulate(SimConfig(sessions=60, seed=11)).lines
    expected = run(lines, NEVER, 50)
    for cold_after in (AT_ONCE, timedelta(seconds=2)):
        outputs, drains, engine = run(lines, cold_after, 50)
        assert outputs == expected[0]
        assert drains == expected[1]
        assert engine.sessions.freezes > 0 and engine.sessions.thaws > 0
        assert len(engine.sessions) == len(expected[2].sessions)


@PROPS
@given(actions(), st.integers(1, 4))
def test_packing_at_every_tick_changes_no_output_and_no_record(
    script_actions: list[tuple],  # type: ignore[type-arg]
    drain_every: int,
) -> None:
    lines = build(script_actions).lines()
    assert run(lines, AT_ONCE, drain_every)[:2] == run(lines, NEVER, drain_every)[:2]


@PROPS
@given(actions(), st.integers(0, 40))
def test_a_restore_at_any_point_with_sessions_packed_gives_the_same_output(
    script_actions: list[tuple],  # type: ignore[type-arg]
    cut: int,
) -> None:
    lines = build(script_actions).lines()
    assert run_split(lines, min(cut, len(lines)), cold_after=AT_ONCE) == run_whole(lines)


def test_a_quiet_session_packs_after_cold_after_and_thaws_with_its_window() -> None:
    p = Partition(cold_after=timedelta(minutes=10))
    p.add("a", 0)
    p.add("b", 0.1)  # 6 minutes: a is still hot
    sessions = p.engine.sessions
    assert sessions.cold == 0
    p.add("b", 0.2)  # 12 minutes: a went cold, its window with it
    assert sessions.cold == 1 and A not in p.engine.windows
    # Counting and asking do not thaw.
    assert len(sessions) == 2 and A in sessions and sessions.cold == 1
    assert sessions.newest(A) is not None
    assert sorted(sessions) == [A, B]
    # A redelivered event of the cold session is still a duplicate: its window came back.
    assert p.engine.process_raw(p.lines[0], Source("t", 0, 99)) == []
    assert sessions.cold == 0 and sessions.thaws == 1 and A in p.engine.windows


def test_a_cold_session_expires_as_a_hot_one() -> None:
    p = Partition(cold_after=timedelta(minutes=10))
    p.add("a", 0)
    p.add("b", 1)
    assert p.engine.sessions.cold == 1
    p.add("b", 25)
    assert A not in p.engine.sessions
    assert p.engine.markers.get(A) is not None
    assert rejection(p.add("a", 25.5)).reason == "SESSION_EXPIRED"


def test_a_session_owing_records_waits_for_the_drain_to_pack() -> None:
    engine = Engine(EngineSettings(cold_after=timedelta(minutes=1)), track_changes=True)
    p = Partition()
    p.engine = engine
    p.add("a", 0)
    p.add("b", 1)  # a is idle, but its records are not drained yet
    assert engine.sessions.cold == 0
    engine.drain_changes()
    assert engine.sessions.cold == 0
    p.add("b", 1.5)  # the next tick packs a (and b, which its event thaws)
    assert engine.sessions.cold == 1 and A not in engine.windows and B in engine.windows


def test_a_tick_packs_a_bounded_number_of_sessions() -> None:
    p = Partition(cold_after=timedelta(minutes=10))
    for n in range(COOL_PER_TICK + 3):
        p.add(f"s{n}", 0)
    p.add("late", 1)
    assert p.engine.sessions.cold == COOL_PER_TICK
    p.add("late", 1.01)
    assert p.engine.sessions.cold == COOL_PER_TICK + 3


def test_a_packed_session_unpacks_equal() -> None:
    p = Partition()
    for hours in (0, 0.1, 0.2):
        p.add("a", hours)
    session = p.engine.sessions[A]
    window = p.engine.windows[A]
    again, window_again = unpack(pack(session, window))
    assert again.spans == session.spans and again.last_seq == session.last_seq
    assert window_again is not None and list(window_again.ring) == list(window.ring)


def test_the_session_of_the_event_that_moves_the_clock_is_not_packed_and_thawed() -> None:
    p = Partition(cold_after=timedelta(minutes=10))
    p.add("a", 0)
    p.add("a", 1)  # the partition was quiet for an hour: a's own event moved the clock
    sessions = p.engine.sessions
    assert (sessions.freezes, sessions.thaws) == (0, 0)
    p.add("b", 2)  # and a still goes cold when it falls idle
    assert sessions.cold == 1 and A not in p.engine.windows


def test_a_duplicate_that_moves_the_clock_leaves_its_session_watched() -> None:
    p = Partition(cold_after=timedelta(minutes=10))
    p.add("a", 0)
    first = p.lines[0]
    # the same event id redelivered with a later ts: a duplicate, yet it moves the clock
    late = first.replace(b'"ts":"2026-11-30T09:00:00Z"', b'"ts":"2026-11-30T10:00:00Z"')
    assert late != first
    assert p.engine.process_raw(late, Source("t", 0, 50)) == []
    assert p.engine.sessions.cold == 0
    p.add("b", 2)
    assert p.engine.sessions.cold == 1 and A not in p.engine.windows
