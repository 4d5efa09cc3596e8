"""Which span holds each arrival (:class:`SessionChanges`): a list from a base, with the
few old spans that stay in a dict, must answer as the dict of arrival -> span id it
replaced, and stay small as old arrivals are vacated."""

from __future__ import annotations

import random
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.changes import (
    BLOCK_SPANS,
    SLOT_BYTES,
    SPILL_EVERY,
    SPILLED_BYTES,
    SessionChanges,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from tests.engine.test_persist import Changelog

Op = tuple[Literal["place", "reload", "vacate", "compact"], int]

arrivals = st.integers(min_value=0, max_value=3 * SPILL_EVERY + 5)
ops = st.lists(
    st.tuples(st.sampled_from(["place", "reload", "vacate", "vacate", "compact"]), arrivals),
    max_size=200,
)


def _slots(changes: SessionChanges) -> int:
    """Arrivals the list has a slot for (private: what the compact form is about)."""
    return len(changes._ids)


def _span_at(changes: SessionChanges, arrival: int) -> str | None:
    """The span holding ``arrival``, as a drain reads it (None: vacated, never placed)."""
    found = changes.span_ids(arrival, arrival + 1)
    return found[0] if found else None


def _spilled(changes: SessionChanges) -> int:
    return len(changes._spilled or ())


def _check(changes: SessionChanges, model: dict[int, str], top: int) -> None:
    assert list(changes.placed()) == sorted(model.items())
    for arrival in range(-1, top + 2):
        assert _span_at(changes, arrival) == model.get(arrival)
    for start in range(0, top + 2, BLOCK_SPANS // 2):
        for stop in (start, start + 1, start + BLOCK_SPANS, top + 2):
            expected = [model[a] for a in range(start, stop) if a in model]
            assert changes.span_ids(start, stop) == expected


def _apply(changes: SessionChanges, model: dict[int, str], op: Op, n: int) -> None:
    kind, arrival = op
    if kind == "place":
        changes.place(arrival, f"s{n}")
        model[arrival] = f"s{n}"
    elif kind == "reload":
        changes.reload(arrival, f"s{n}")
        model[arrival] = f"s{n}"
    elif kind == "vacate":
        changes.vacate(arrival)
        model.pop(arrival, None)
    else:
        changes.compact()


@settings(max_examples=300, deadline=None)
@given(ops)
def test_any_places_and_vacates_answer_as_a_dict(script: list[Op]) -> None:
    changes, model = SessionChanges(), dict[int, str]()
    top = 3 * SPILL_EVERY + 5
    for n, op in enumerate(script):
        _apply(changes, model, op, n)
        _check(changes, model, top)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=60),
    st.randoms(use_true_random=False),
)
def test_a_restore_in_any_order_with_gaps_answers_as_a_dict(
    blocks: list[int], rnd: random.Random
) -> None:
    """Restoring places whole blocks in record order, sparse where spans were forgotten."""
    changes, model = SessionChanges(), dict[int, str]()
    for block in dict.fromkeys(blocks):
        for arrival in range(block * BLOCK_SPANS, (block + 1) * BLOCK_SPANS):
            if rnd.random() < 0.3:
                changes.reload(arrival, f"s{arrival}")
                model[arrival] = f"s{arrival}"
    changes.compact()
    _check(changes, model, 41 * BLOCK_SPANS)
    # New spans keep coming after a restore.
    for arrival in range(41 * BLOCK_SPANS, 41 * BLOCK_SPANS + 2 * SPILL_EVERY):
        changes.place(arrival, f"s{arrival}")
        model[arrival] = f"s{arrival}"
    _check(changes, model, 41 * BLOCK_SPANS + 2 * SPILL_EVERY)


def test_a_new_span_marks_its_block_once_persisted_and_a_reload_does_not() -> None:
    changes = SessionChanges()
    changes.persisted_below = 2 * BLOCK_SPANS
    changes.reload(3, "a")
    assert not changes.dirty_blocks
    changes.place(BLOCK_SPANS + 1, "b")
    changes.vacate(3)
    assert changes.dirty_blocks == {0, 1}
    changes.place(5 * BLOCK_SPANS, "c")  # in the header's tail: no block
    assert changes.dirty_blocks == {0, 1}


@settings(max_examples=50, deadline=None)
@given(
    window=st.integers(min_value=1, max_value=120),
    pinned=st.lists(st.integers(min_value=1, max_value=200), max_size=12, unique=True),
)
def test_memory_stays_bounded_as_the_oldest_arrivals_are_vacated(
    window: int, pinned: list[int]
) -> None:
    """A long session that forgets its old spans keeps slots for the newest ``window``
    arrivals only, whatever few old spans stay (``pinned``: live for good)."""
    changes = SessionChanges()
    kept = set(pinned)
    for arrival in range(1, 5000):
        changes.place(arrival, f"s{arrival}")
        old = arrival - window
        if old >= 1 and old not in kept:
            changes.vacate(old)
        if arrival > 1000:
            # The newest arrivals, a look's worth of slack, two partial blocks, and a
            # slot per arrival around each pinned span while it is not worth a dict entry.
            slack = window + SPILL_EVERY + 2 * BLOCK_SPANS
            sparse = len(kept) * SPILLED_BYTES // SLOT_BYTES + BLOCK_SPANS
            assert _slots(changes) <= slack + sparse
            assert _spilled(changes) <= len(kept)
    expected = {a: f"s{a}" for a in range(5000 - window, 5000)}
    expected |= {a: f"s{a}" for a in kept}
    assert dict(changes.placed()) == expected


def test_a_session_whose_first_span_stays_live_gives_up_the_slots_after_it() -> None:
    """A system prompt at arrival 1, live for good: it moves to the dict once the spans
    after it are forgotten, and the list starts past them."""
    changes = SessionChanges()
    for arrival in range(1, 10 * SPILL_EVERY + 1):
        changes.place(arrival, f"s{arrival}")
        if arrival > 21:  # all but arrival 1
            changes.vacate(arrival - 20)
    assert _span_at(changes, 1) == "s1"
    assert _spilled(changes) == 1
    assert _slots(changes) <= 20 + SPILL_EVERY + 2 * BLOCK_SPANS
    changes.vacate(1)
    assert _span_at(changes, 1) is None
    assert changes._spilled is None


def long_session(spans: int) -> SessionScript:
    """A session past several ``SPILL_EVERY`` arrivals: a first span that stays live,
    then spans added and evicted one after the other (forgotten past the gone bound),
    a few summarised."""
    s = SessionScript()
    s.add("system", "you are a careful support agent")
    for n in range(spans):
        s.add(f"s{n}", f"order {10000 + n} for account A{n}-X")
        s.evict([f"s{n}"], basis="recency")
        if n % 7 == 6:
            summary = {"span_id": f"sum{n}", "text": "summary", "derived_from": [f"s{n - 1}"]}
            s.rewrite([{"span_id": "system"}, summary])  # the new context: both
            s.evict([f"sum{n}"], basis="recency")
    return s


def _run(lines: list[bytes], conf: EngineSettings, cuts: set[int]) -> tuple[list[bytes], Engine]:
    """Drain after every event; restore a fresh engine at each of ``cuts``."""
    log = Changelog()
    engine = Engine(conf, track_changes=True)
    out: list[bytes] = []
    for i, line in enumerate(lines):
        if i in cuts:
            engine = Engine(conf, track_changes=True)
            engine.restore(log.items())
        out.extend(encode_output(o) for o in engine.process_raw(line, Source("t", 0, i)))
        log.apply(engine.drain_changes())
    return out, engine


def _changes(engine: Engine) -> SessionChanges:
    state = engine.session("acme", "s1")
    assert state is not None
    changes = state.changes
    assert isinstance(changes, SessionChanges)
    assert {span_id for _, span_id in changes.placed()} == set(state.gone) | set(state.spans)
    return changes


def test_a_long_session_restores_past_spilled_and_trimmed_arrivals() -> None:
    conf = EngineSettings(max_gone_spans=6, idle_timeout=0)
    lines = long_session(300).lines()
    whole, engine = _run(lines, conf, set())
    changes = _changes(engine)
    assert _span_at(changes, 1) == "system" and _spilled(changes) == 1
    assert _slots(changes) <= 8 + SPILL_EVERY + 2 * BLOCK_SPANS
    for cuts in ({100}, {len(lines) - 1}, set(range(50, len(lines), 97))):
        out, restored = _run(lines, conf, cuts)
        assert out == whole, cuts
        again = _changes(restored)
        assert list(again.placed()) == list(changes.placed()), cuts
        assert _spilled(again) == 1 and _slots(again) <= 8 + SPILL_EVERY + 2 * BLOCK_SPANS
