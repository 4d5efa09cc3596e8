"""State records: a session rebuilt from its changelog records behaves the same."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.changes import CHUNK_IDS
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.dedup import event_digest
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


def run_split(
    lines: list[bytes], cut: int, window: int = 10_000, cold_after: timedelta | None = None
) -> list[bytes]:
    """Process lines[:cut], restore a fresh engine from the changelog, process the rest
    (``cold_after``: the engines' setting, None for its default)."""
    packing = {} if cold_after is None else {"cold_after": cold_after}
    conf = EngineSettings(dedup_window=window, **packing)
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


def added(count: int) -> list[bytes]:
    s = SessionScript()
    for i in range(count):
        s.add(f"a{i}")
    return s.lines()


def with_redeliveries(lines: list[bytes]) -> list[bytes]:
    """``lines`` with a redelivery after every 9th: an event 0 to 39 events back (a
    duplicate inside the window, else a new event: rejected, ``SPAN_EXISTS``)."""
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i % 9 == 8:
            out.append(lines[i - (i * 7) % 40])
    return out


def window_digests(engine: Engine) -> list[int]:
    """The session's duplicate window, oldest first."""
    window = engine.windows[("acme", "s1")]
    return window.between(0, len(window))


def run_drained(
    lines: list[bytes], window: int, cadence: int, cuts: Iterable[int] = ()
) -> tuple[list[bytes], Engine, Changelog]:
    """Drain every ``cadence`` events; at each cut (a drain point) restore a fresh
    engine from the compacted changelog and go on with it."""
    conf = EngineSettings(dedup_window=window)
    log = Changelog()
    engine = Engine(conf, track_changes=True)
    out = []
    for i, line in enumerate(lines):
        if i in cuts:
            engine = Engine(conf, track_changes=True)
            engine.restore(log.items())
        out.extend(encode_output(o) for o in engine.process_raw(line, Source("t", 0, i)))
        if (i + 1) % cadence == 0:
            log.apply(engine.drain_changes())
    return out, engine, log


@pytest.mark.parametrize("window", [1, 5, 15, 16, 17, 40])
@pytest.mark.parametrize("cadence", [1, 7, 23, 64])
def test_duplicate_window_survives_restore_after_it_wrapped(window: int, cadence: int) -> None:
    # 150 events: the window has wrapped many times over, and with a drain every 23 or
    # 64 events a chunk can leave the window before the drain after it fills (not
    # written) or be partly out of it (its newest digests written).
    lines = added(150)
    engine = Engine(EngineSettings(dedup_window=window), track_changes=True)
    log = Changelog()
    for i, line in enumerate(lines):
        engine.process_raw(line, Source("t", 0, i))
        if (i + 1) % cadence:
            continue
        log.apply(engine.drain_changes())
        restored = Engine(EngineSettings(dedup_window=window), track_changes=True)
        restored.restore(log.items())
        assert window_digests(restored) == window_digests(engine), (window, cadence, i)
        assert len(window_digests(engine)) == min(i + 1, window)
        if i + 1 < len(lines):
            # The restored engine writes the chunks filled after the restore, no others.
            restored.process_raw(lines[i + 1], Source("t", 0, i + 1))
            chunks = [k for k, _ in restored.drain_changes() if orjson.loads(k)[2] == "d"]
            assert len(chunks) == ((i + 2) % CHUNK_IDS == 0)
        for key, value in log.items():
            kind, data = orjson.loads(key)[2], orjson.loads(value)
            digests = data[1] if kind == "d" else data.get("chunk", []) if kind == "h" else []
            assert all(isinstance(d, int) for d in digests) and len(digests) <= CHUNK_IDS
    whole = run_drained(with_redeliveries(lines), window, 1)[0]
    assert whole == run_whole_with(with_redeliveries(lines), window)
    for cuts in ({100 // cadence * cadence}, set(range(cadence, 180, 3 * cadence))):  # drains
        out = run_drained(with_redeliveries(lines), window, cadence, cuts)[0]
        assert out == whole, (window, cadence, cuts)


def run_whole_with(lines: list[bytes], window: int) -> list[bytes]:
    engine = Engine(EngineSettings(dedup_window=window))
    return [
        encode_output(o)
        for i, raw in enumerate(lines)
        for o in engine.process_raw(raw, Source("t", 0, i))
    ]


def old_format(log: Changelog, event_ids: Iterable[str], *, header: bool = True) -> Changelog:
    """``log`` as written before the window's digests were stable: its chunk records and
    (``header``) its header's open chunk hold the event ids, not their digests."""
    ids = {event_digest(event_id): event_id for event_id in event_ids}
    old = Changelog()
    for key, value in log.items():
        kind = orjson.loads(key)[2]
        data = orjson.loads(value)
        if kind == "d":
            value = orjson.dumps([data[0], [ids[d] for d in data[1]]])
        elif kind == "h" and header and "chunk" in data:
            value = orjson.dumps({**data, "chunk": [ids[d] for d in data["chunk"]]})
        old[key] = value
    return old


@pytest.mark.parametrize("window", [16, 17, 40, 10_000])
def test_a_changelog_of_event_ids_written_before_still_restores(window: int) -> None:
    # The previous code wrote every chunk whole, at the drain after it filled, and the
    # open chunk in the header: drained after every event, the records hold what it wrote,
    # ids in the place of digests. Restored, the window is the same and so are outputs.
    lines = with_redeliveries(added(100))
    event_ids = [orjson.loads(line)["event_id"] for line in lines]
    expected = run_whole_with(lines, window)
    for cut in (0, 15, 16, 33, 50, 79, 111):
        first, engine, log = run_drained(lines[:cut], window, 1)
        for header in (True, False):  # False: an old chunk ring under a newer header
            before = old_format(log, event_ids, header=header)
            if cut >= CHUNK_IDS:
                assert any(b'"s1-e' in value for value in before.values())
            restored = Engine(EngineSettings(dedup_window=window), track_changes=True)
            restored.restore(before.items())
            if cut:
                assert window_digests(restored) == window_digests(engine), (window, cut)
            out = list(first)
            for i, line in enumerate(lines[cut:], start=cut):
                out.extend(encode_output(o) for o in restored.process_raw(line, Source("t", 0, i)))
                before.apply(restored.drain_changes())
            assert out == expected, (window, cut, header)
            # What the restored engine wrote since holds digests only.
            again = Engine(EngineSettings(dedup_window=window), track_changes=True)
            again.restore(before.items())
            assert window_digests(again) == window_digests(restored)


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
