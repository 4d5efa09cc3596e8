"""SessionState's bulk paths leave exactly the state of the one-by-one paths."""

from __future__ import annotations

import copy
from datetime import timedelta
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.schemas import FaultKind, IntegrityFault
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.changes import SessionChanges
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.referent_index import Mention, ReferentIndex, holders_of, order_of
from spanguard.streams.engine.rewrite import resolve_in_order
from spanguard.streams.engine.state import (
    Links,
    SessionState,
    SpanState,
    _link,
    _unlink,
    members,
    rank_key,
)
from spanguard.streams.engine.trace import SessionScript
from tests.engine.scripts import actions, build


def snapshot(state: SessionState) -> tuple[object, ...]:
    index = state.referents
    _check_key_holders(index)
    return (
        list(state.spans.items()),
        sorted(state.gone.items()),
        list(state.order),
        {q: [rank_key(span) for span in r] for q, r in state.scores.items()},
        state.stale,
        {p: set(members(c)) for p, c in state.children.items() if c},
        {c: set(members(s)) for c, s in state.call_spans.items()},
        {k: list(holders_of(v)) for k, v in index.key_holders.items()},
        {k: set(v) for k, v in index.key_mentioners.items()},
        {k: list(v) for k, v in index.type_holders.items()},
        {k: list(v) for k, v in index.anaphors.items()},
        state.live_tokens,
        state.bound_sum,
        state.bound_count,
        state.poisoned_pending,
        None if state.changes is None else _dirty(state),
    )


def _check_key_holders(index: ReferentIndex) -> None:
    # ``KeyHolders``: a key's one holder is the span itself, two or more a list of them
    # in context order (a one-item list would read the same and cost 64 B more).
    for key, entry in index.key_holders.items():
        holders = holders_of(entry)
        if len(holders) == 1:
            assert entry is holders[0] and isinstance(entry, SpanState), key
        else:
            assert isinstance(entry, list), key
            assert entry == sorted(entry, key=order_of), key
            assert all(isinstance(span, SpanState) for span in entry), key


def _dirty(state: SessionState) -> set[int]:
    changes = state.changes
    assert isinstance(changes, SessionChanges)
    return changes.dirty_blocks


@settings(max_examples=100, deadline=None)
@given(actions(), st.data())
def test_bulk_removal_equals_one_by_one(script_actions: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    engine = Engine(track_changes=True)
    for i, line in enumerate(build(script_actions).lines()):
        engine.process_raw(line, Source("t", 0, i))
    engine.drain_changes()
    state = engine.session("acme", "s1")
    if state is None or not state.spans:
        return
    changes = state.changes
    assert isinstance(changes, SessionChanges)
    changes.persisted_below = data.draw(st.integers(0, state.arrivals + 1))
    removal = data.draw(st.lists(st.sampled_from(sorted(state.spans)), unique=True))
    one, bulk = copy.deepcopy(state), copy.deepcopy(state)
    one.remove_spans(removal, 99, bulk=False)
    bulk.remove_spans(removal, 99, bulk=True)
    assert snapshot(bulk) == snapshot(one)


@settings(max_examples=100, deadline=None)
@given(actions())
def test_resolving_in_one_pass_equals_resolving_each_mention(script_actions: list) -> None:  # type: ignore[type-arg]
    engine = Engine()
    for i, line in enumerate(build(script_actions).lines()):
        engine.process_raw(line, Source("t", 0, i))
        state = engine.session("acme", "s1")
        if state is None:
            continue
        # Every live span asks about every mention any span makes (hits and misses).
        asked = tuple(dict.fromkeys(m for s in state.spans.values() for m in s.mentions))
        asked += tuple(Mention(key=k) for s in state.spans.values() for k in s.holds[::2])
        wanted = {span_id: asked for span_id in state.spans}
        found = resolve_in_order(state, wanted)
        for span_id, span in state.spans.items():
            expected = [state.referents.resolve(span, m) for m in asked]
            assert found.get(span_id, []) == (expected if asked else [])


@settings(max_examples=200, deadline=None)
@given(actions())
def test_order_keeping_rewrites_equal_full_rebuilds(script_actions: list) -> None:  # type: ignore[type-arg]
    # A rewrite that keeps the live spans' order re-keys the referent index and
    # resolves only the mentions it could affect; with that path switched off, every
    # rewrite rebuilds and resolves everything. Same outputs, same state.
    lines = build(script_actions).lines()
    fast, full = Engine(), Engine()
    for i, line in enumerate(lines):
        source = Source("t", 0, i)
        expected = [encode_output(o) for o in fast.process_raw(line, source)]
        with patch("spanguard.streams.engine.rewrite._keeps_order", return_value=False):
            assert [encode_output(o) for o in full.process_raw(line, source)] == expected
        state, rebuilt = fast.session("acme", "s1"), full.session("acme", "s1")
        assert (state is None) == (rebuilt is None)
        if state is not None and rebuilt is not None:
            assert snapshot(state) == snapshot(rebuilt)


def test_a_rewrite_that_reorders_rebuilds_the_referent_index() -> None:
    # s1's anaphor was bound by s0; the snapshot moves s1 in front of every holder of
    # "account" (and s2 in front of s0): the dropped referent is found, and the
    # holders are listed in their new order.
    script = SessionScript()
    script.add("s0", "s0 v0", introduces=[{"key": "A-1", "type": "account"}])
    script.add("s1", "s1 v0", mentions=[{"type": "account"}])
    script.add("s2", "s2 v0", introduces=[{"key": "A-1", "type": "account"}])
    script.rewrite([{"span_id": "s1"}, {"span_id": "s2"}, {"span_id": "s0"}])
    engine = Engine()
    outputs = [
        o
        for i, line in enumerate(script.lines())
        for o in engine.process_raw(line, Source("t", 0, i))
    ]
    assert [o.kind for o in outputs if isinstance(o, IntegrityFault)] == [
        FaultKind.REFERENT_DROPPED
    ]
    state = engine.session(script.tenant, script.session_id)
    assert state is not None
    assert [span.span_id for span in state.referents.type_holders["account"]] == ["s2", "s0"]


@given(st.lists(st.tuples(st.booleans(), st.sampled_from("pq"), st.sampled_from(["ab", "c"]))))
def test_one_to_few_links_read_as_lists_of_distinct_members(
    steps: list[tuple[bool, str, str]],
) -> None:
    # ``children`` and ``call_spans`` keep a member or a tuple of them: the members a
    # list with the same links and unlinks would hold, in the same order, and no name
    # without a member.
    index: dict[str, Links] = {}
    model: dict[str, list[str]] = {}
    for linking, name, member in steps:
        expected = model.setdefault(name, [])
        if linking:
            _link(index, name, member)
            if member not in expected:
                expected.append(member)
        else:
            _unlink(index, name, member)
            if member in expected:
                expected.remove(member)
        if not expected:
            del model[name]
        assert {n: list(members(m)) for n, m in index.items()} == model
        assert all(isinstance(m, str) for m in index.values() if len(members(m)) == 1)


def test_a_session_keeps_one_string_per_span_id_and_call_id() -> None:
    # Parents are named by the spans' own id strings (also once gone), and a tool
    # result's call id is its call's: ids decoded again from each event are not kept.
    from bench.memory import SOURCE, open_session_lines

    engine = Engine(EngineSettings(idle_timeout=timedelta(0)))
    for line in open_session_lines(30):
        engine.process_raw(line, SOURCE)
    parents = answers = 0
    for state in engine.sessions.values():
        ids = {span_id: span_id for span_id in [*state.spans, *state.gone]}
        calls = {call: call for span in state.spans.values() for call in span.calls}
        for span in state.spans.values():
            for parent in span.derived_from:
                if parent in ids:
                    assert ids[parent] is parent
                    parents += 1
            if span.answers in calls:
                assert calls[span.answers] is span.answers
                answers += 1
    assert parents and answers
