"""Limits a runaway harness cannot break (issue 22): live spans per session, live
sessions per partition, and the gone spans a session remembers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.schemas import (
    EventRejected,
    EvictionDecided,
    OutputEvent,
    RefusalReason,
    RejectReason,
)
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.changes import SessionChanges
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from tests.engine.test_persist import Changelog


def feed(engine: Engine, lines: list[bytes]) -> list[OutputEvent]:
    return [o for i, line in enumerate(lines) for o in engine.process_raw(line, Source("t", 0, i))]


def rejections(outputs: list[OutputEvent]) -> list[EventRejected]:
    return [o for o in outputs if isinstance(o, EventRejected)]


def test_a_span_past_the_session_limit_is_rejected_and_the_live_spans_keep_their_pins() -> None:
    engine = Engine(EngineSettings(max_live_spans=2))
    s = SessionScript()
    s.add("a", "account 8841-C is flagged")
    s.add("b", "that account needs review")
    s.add("c", "a third span")
    s.evict(["a"], basis="recency")
    out = feed(engine, s.lines())
    [rejected] = rejections(out)
    assert rejected.reason is RejectReason.LIMIT_REACHED
    assert rejected.caused_by == "s1-e2" and rejected.session_id == "s1"
    assert "max_live_spans" in rejected.detail
    state = engine.session("acme", "s1")
    assert state is not None and set(state.spans) == {"a", "b"}
    # The live spans' pins hold: b still needs a.
    [decision] = [o for o in out if isinstance(o, EvictionDecided)]
    assert [r.reason for r in decision.refused] == [RefusalReason.PINNED]


def test_a_rejected_span_leaves_no_gap_and_fits_once_room_is_made() -> None:
    engine = Engine(EngineSettings(max_live_spans=1))
    s = SessionScript()
    s.add("a", "first")
    s.add("b", "second")  # rejected
    s.evict(["a"], basis="recency")
    s.add("b", "second")  # fits now
    out = feed(engine, s.lines())
    assert [o.reason for o in rejections(out)] == [RejectReason.LIMIT_REACHED]
    assert all(o.type != "integrity.fault" for o in out)  # seq moved on silently
    state = engine.session("acme", "s1")
    assert state is not None and set(state.spans) == {"b"}


def test_a_rewrite_that_grows_past_the_limit_is_rejected_one_that_shrinks_passes() -> None:
    engine = Engine(EngineSettings(max_live_spans=3))
    s = SessionScript()
    for name in ("a", "b", "c"):
        s.add(name, f"span {name}")
    s.rewrite([{"span_id": n} for n in ("a", "b", "c", "d")])  # 4 live: rejected
    s.rewrite([{"span_id": "a"}, {"span_id": "sum", "text": "b and c", "derived_from": ["b"]}])
    out = feed(engine, s.lines())
    assert [o.caused_by for o in rejections(out)] == ["s1-e3"]
    state = engine.session("acme", "s1")
    assert state is not None and set(state.spans) == {"a", "sum"}


def test_a_session_above_a_lowered_limit_can_still_be_compacted() -> None:
    s = SessionScript()
    for name in ("a", "b", "c", "d"):
        s.add(name, f"span {name}")
    s.rewrite([{"span_id": n} for n in ("a", "b", "c")])  # shrinks: passes
    s.add("e", "one more")  # still above the limit: rejected
    log = Changelog()
    first = Engine(track_changes=True)
    feed(first, s.lines()[:4])
    log.apply(first.drain_changes())
    second = Engine(EngineSettings(max_live_spans=2))
    second.restore(log.items())
    out = [o for line in s.lines()[4:] for o in second.process_raw(line, Source("t", 0, 0))]
    assert [o.caused_by for o in rejections(out)] == ["s1-e5"]
    state = second.session("acme", "s1")
    assert state is not None and set(state.spans) == {"a", "b", "c"}


def test_a_new_session_past_the_partition_limit_is_rejected_until_one_ends() -> None:
    engine = Engine(EngineSettings(max_live_sessions=1))
    one, two = SessionScript("one"), SessionScript("two")
    one.add("a", "first")
    two.add("a", "second")
    out = feed(engine, [*one.lines(), *two.lines()])
    [rejected] = rejections(out)
    assert rejected.reason is RejectReason.LIMIT_REACHED and rejected.session_id == "two"
    assert "max_live_sessions" in rejected.detail
    assert engine.session("acme", "two") is None
    one.close()
    feed(engine, [one.lines()[-1], *two.lines()])
    assert engine.session("acme", "two") is not None
    assert engine.session("acme", "one") is None


def churn(spans: int, evict_every: int = 1) -> SessionScript:
    """A long session: ``spans`` spans added and evicted one after the other, a few
    of them summarised (their gone parents count for lineage and lost keys), late
    requests naming long-gone spans."""
    s = SessionScript()
    for n in range(spans):
        s.add(f"s{n}", f"order {10000 + n} for account A{n}-X")
        if n % evict_every == 0:
            s.evict([f"s{n}"], basis="recency")
        if n % 7 == 6:
            s.rewrite([{"span_id": f"sum{n}", "text": "summary", "derived_from": [f"s{n - 1}"]}])
            s.evict([f"s{n - 6}", f"sum{n}"], basis="recency")
        if n % 5 == 4:  # ALREADY_EVICTED while remembered, UNKNOWN_SPAN once forgotten
            s.evict([f"s{n - k}" for k in (3, 5, 8, 13) if n >= k], basis="recency")
    return s


def test_gone_spans_are_bounded_and_the_oldest_are_forgotten() -> None:
    engine = Engine(EngineSettings(max_gone_spans=8), track_changes=True)
    feed(engine, churn(40).lines())
    state = engine.session("acme", "s1")
    assert state is not None
    assert 8 <= len(state.gone) <= 9  # the bound plus its slack (one eighth)
    changes = state.changes
    assert isinstance(changes, SessionChanges)
    assert {span_id for _, span_id in changes.placed()} == set(state.gone) | set(state.spans)
    assert "s39" in state.gone and "s0" not in state.gone
    # A forgotten span is unknown, a remembered one already evicted.
    s = SessionScript()
    s.seq = 1000
    s.evict(["s0", "s39"], basis="recency")
    [decision] = [o for o in feed(engine, s.lines()) if isinstance(o, EvictionDecided)]
    reasons = {r.span_id: r.reason for r in decision.refused}
    assert reasons == {"s0": RefusalReason.UNKNOWN_SPAN, "s39": RefusalReason.ALREADY_EVICTED}


def test_no_bound_remembers_every_gone_span() -> None:
    engine = Engine(EngineSettings(max_gone_spans=0))
    feed(engine, churn(30).lines())
    state = engine.session("acme", "s1")
    assert state is not None and len(state.gone) >= 30


def run_with_restores(lines: list[bytes], conf: EngineSettings, cut: int) -> list[bytes]:
    """Drain after every event; restore a fresh engine at ``cut``. The outputs, then
    the gone spans the session remembers at the end."""
    log = Changelog()
    engine = Engine(conf, track_changes=True)
    out = []
    for i, line in enumerate(lines):
        if i == cut:
            engine = Engine(conf, track_changes=True)
            engine.restore(log.items())
        out.extend(encode_output(o) for o in engine.process_raw(line, Source("t", 0, i)))
        log.apply(engine.drain_changes())
    state = engine.session("acme", "s1")
    return [*out, repr(sorted(state.gone.items()) if state else None).encode()]


@settings(max_examples=15, deadline=None)
@given(st.integers(20, 45), st.integers(1, 3), st.integers(1, 6), st.integers(0, 8))
def test_restore_at_every_cut_of_a_long_session_with_many_evictions(
    spans: int, evict_every: int, bound: int, window: int
) -> None:
    # Gone spans forgotten by the bound, spans past the live limit rejected, a small
    # duplicate window (with re-sent events): a restore at any event gives the outputs of
    # the run that never restarted.
    conf = EngineSettings(
        max_gone_spans=bound, max_live_spans=12, dedup_window=window, idle_timeout=0
    )
    lines = churn(spans, evict_every).lines()
    lines = [*lines, *lines[-4:], *lines[:3]]  # re-deliveries, inside and past the window
    whole = run_with_restores(lines, conf, cut=-1)
    for cut in range(len(lines) + 1):
        assert run_with_restores(lines, conf, cut) == whole, cut
