"""State records: a session rebuilt from its changelog records behaves the same."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from tests.engine.scripts import actions, build


def seed_like_session() -> SessionScript:
    s = SessionScript()
    s.add("t12", "It is account 8841-C, the one flagged last week.")
    s.add("x", "filler")
    s.add("p", "summary v0", derived_from=["x"])
    s.score(("t12", 0.11), ("x", 0.05), ("p", 0.5))
    s.rewrite([{"span_id": "t12"}, {"span_id": "x"}, {"span_id": "p", "text": "v1"}])
    s.add("t19", "did that account clear KYC?")
    return s


def tail_session(s: SessionScript) -> SessionScript:
    s.score(("p", 0.4), ("t19", 0.9))
    s.evict(threshold=0.15)
    s.rewrite([{"span_id": "t19"}])
    s.evict(["t19"])
    return s


class Changelog(dict[bytes, bytes]):
    def apply(self, records: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            if value is None:
                self.pop(key, None)
            else:
                self[key] = value


def run_split(lines: list[bytes], cut: int, window: int = 10_000) -> list[bytes]:
    """Process lines[:cut], restore a fresh engine from the changelog, process the rest."""
    conf = EngineSettings(dedup_window=window)
    log = Changelog()
    first = Engine(conf, track_changes=True)
    out = []
    for i, line in enumerate(lines[:cut]):
        out.extend(encode_output(o) for o in first.process_raw(line, Source("t", 0, i)))
        log.apply(first.drain_changes())
    second = Engine(conf, track_changes=True)
    second.restore(log.items())
    for i, line in enumerate(lines[cut:], start=cut):
        out.extend(encode_output(o) for o in second.process_raw(line, Source("t", 0, i)))
        log.apply(second.drain_changes())
    return out


def run_whole(lines: list[bytes]) -> list[bytes]:
    engine = Engine()
    return [
        encode_output(o)
        for i, raw in enumerate(lines)
        for o in engine.process_raw(raw, Source("t", 0, i))
    ]


def test_restored_engine_continues_identically() -> None:
    lines = tail_session(seed_like_session()).lines()
    expected = run_whole(lines)
    for cut in range(len(lines) + 1):
        assert run_split(lines, cut) == expected, f"cut at {cut}"


def test_duplicate_window_survives_restore() -> None:
    s = SessionScript()
    for i in range(5):
        s.add(f"a{i}")
    lines = s.lines()
    replayed = [*lines, lines[3], lines[4]]
    out = run_split(replayed, 5, window=3)
    assert out == []  # both repeats are inside the 3-event window after restore
    out = run_split([*lines, lines[0]], 5, window=3)
    assert len(out) == 1  # outside the window: processed as new (SPAN_EXISTS rejection)


@pytest.mark.parametrize("window", [1, 15, 16, 17, 40])
def test_duplicate_window_across_chunk_boundaries_survives_restore(window: int) -> None:
    s = SessionScript()
    for i in range(70):
        s.add(f"a{i}")
    lines = s.lines()
    for cut in (16, 33, 50, 70):
        # After the cut, replay the last 45 events: exactly those inside the window
        # are duplicates; the older ones are new (and rejected as SPAN_EXISTS).
        replayed = lines[cut - min(cut, 45) : cut]
        out = run_split([*lines[:cut], *replayed], cut, window=window)
        assert len(out) == max(0, len(replayed) - window), (window, cut)


def test_closed_session_stays_closed_after_restore() -> None:
    s = SessionScript()
    s.add("a")
    s.close()
    s.add("b")
    out = run_split(s.lines(), 2)
    assert b"SESSION_CLOSED" in out[0]


def grown_session(engine: Engine, size: int, name: str | None = None) -> SessionScript:
    s = SessionScript(name or f"s{size}")
    for i in range(size):
        s.add(f"a{i}", f"turn {i}")
    for i, line in enumerate(s.lines()):
        engine.process_raw(line, Source("t", 0, i))
    engine.drain_changes()
    return s


def test_changes_are_proportional_to_what_changed() -> None:
    # The next 64 turns of a 100-span and of a 10,000-span session, drained after
    # each: the same number of records, and bytes flat in the session's size.
    engine = Engine(track_changes=True)
    figures = {}
    for size in (100, 10_000):
        s = grown_session(engine, size, name=f"size-{size:05d}")  # ids of one length
        records = 0
        size_bytes = 0
        for i in range(64):
            s.add(f"new{i}", "one more turn")
            engine.process_raw(s.lines()[-1], Source("t", 0, size + i))
            drained = engine.drain_changes()
            # The header and the clock; now and then the tail's block(s) (two at a
            # boundary) and a chunk.
            assert 1 <= len(drained) <= 5
            records += len(drained)
            size_bytes += sum(len(k) + len(v or b"") for k, v in drained)
        figures[size] = (records, size_bytes)
    assert figures[100][0] == figures[10_000][0]
    assert figures[10_000][1] <= 1.1 * figures[100][1]
    # Per drain: the header, the clock (contract 1.2's idle expiry), now and then more.
    assert figures[100][0] / 64 < 2.5


def test_a_score_rewrites_only_the_block_of_its_span() -> None:
    engine = Engine(track_changes=True)
    s = grown_session(engine, 1_000)
    s.score(("a500", 0.3))
    engine.process_raw(s.lines()[-1], Source("t", 0, 1_000))
    keys = [orjson.loads(k) for k, _ in engine.drain_changes()]
    assert keys == [
        ["", "", "c", ""],  # the partition's clock (idle expiry)
        ["acme", "s1000", "h", ""],
        ["acme", "s1000", "b", str(501 // 8)],
    ]


def test_closing_deletes_exactly_the_records_that_exist() -> None:
    log = Changelog()
    engine = Engine(EngineSettings(dedup_window=40), track_changes=True)
    s = SessionScript()
    for i in range(100):
        s.add(f"a{i}")
    s.close()
    lines = s.lines()
    for i, line in enumerate(lines[:-1]):
        engine.process_raw(line, Source("t", 0, i))
        log.apply(engine.drain_changes())
    live_keys = set(log)
    engine.process_raw(lines[-1], Source("t", 0, len(lines)))
    closing = engine.drain_changes()
    deleted = {k for k, v in closing if v is None}
    clock = orjson.dumps(["", "", "c", ""])
    assert deleted == live_keys - {orjson.dumps(["acme", "s1", "h", ""]), clock}
    log.apply(closing)
    assert orjson.loads(log[orjson.dumps(["acme", "s1", "h", ""])]) == {
        "closed": 100,
        "at": "2026-11-30T09:01:40+00:00",  # the clock at the close
    }
    assert set(log) == {orjson.dumps(["acme", "s1", "h", ""]), clock}


def run_cadenced(lines: list[bytes], cadence: int, cuts: set[int]) -> list[bytes]:
    """Drain every ``cadence`` events; at each cut (a drain point) restore a fresh
    engine from the compacted changelog and go on with it."""
    log = Changelog()
    engine = Engine(track_changes=True)
    out = []
    for i, line in enumerate(lines):
        if i in cuts:
            engine = Engine(track_changes=True)
            engine.restore(log.items())
        out.extend(encode_output(o) for o in engine.process_raw(line, Source("t", 0, i)))
        if (i + 1) % cadence == 0:
            log.apply(engine.drain_changes())
    return out


@settings(max_examples=60, deadline=None)
@given(actions(), st.integers(1, 6), st.sets(st.integers(0, 12), max_size=4))
def test_restore_at_drain_points_over_several_events(
    script_actions: list,
    cadence: int,
    drains: set[int],  # type: ignore[type-arg]
) -> None:
    lines = build(script_actions).lines()
    cuts = {d * cadence for d in drains if d * cadence <= len(lines)}
    assert run_cadenced(lines, cadence, cuts) == run_whole(lines)


@settings(max_examples=60, deadline=None)
@given(actions(), st.integers(0, 40))
def test_restore_at_any_point_gives_same_output(script_actions: list, cut: int) -> None:  # type: ignore[type-arg]
    lines = build(script_actions).lines()
    assert run_split(lines, min(cut, len(lines))) == run_whole(lines)


def test_redelivered_events_of_a_closed_session_are_duplicates() -> None:
    # At-least-once: after a crash the input is re-read from the last committed
    # offset, which can be before the session's close. Those events were processed:
    # they are duplicates, not new events of a closed session.
    s = SessionScript()
    s.add("a")
    s.evict(["a"])
    s.close()
    lines = s.lines()
    s.add("late")
    out = run_split([*lines, *lines, s.lines()[-1]], len(lines))
    reasons = [orjson.loads(o).get("reason") for o in out if b"event.rejected" in o]
    assert reasons == ["SESSION_CLOSED"]
