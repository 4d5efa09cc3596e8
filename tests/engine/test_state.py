"""SessionState's bulk paths leave exactly the state of the one-by-one paths."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.engine.engine import Engine, Source
from streams.engine.referent_index import Mention
from streams.engine.rewrite import resolve_in_order
from streams.engine.state import SessionState
from tests.engine.scripts import actions, build


def snapshot(state: SessionState) -> tuple[object, ...]:
    index = state.referents
    return (
        list(state.spans.items()),
        sorted(state.gone.items()),
        list(state.order),
        {q: list(r) for q, r in state.scores.items()},
        state.stale,
        {p: set(c) for p, c in state.children.items() if c},
        {k: list(v) for k, v in index.key_holders.items()},
        {k: set(v) for k, v in index.key_mentioners.items()},
        {k: list(v) for k, v in index.type_holders.items()},
        {k: list(v) for k, v in index.anaphors.items()},
        state.live_tokens,
        state.bound_sum,
        state.bound_count,
        state.poisoned_pending,
        state.dirty_blocks,
    )


@settings(max_examples=100, deadline=None)
@given(actions(), st.data())
def test_bulk_removal_equals_one_by_one(script_actions: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    engine = Engine()
    for i, line in enumerate(build(script_actions).lines()):
        engine.process_raw(line, Source("t", 0, i))
    state = engine.session("acme", "s1")
    if state is None or not state.spans:
        return
    state.persisted_below = data.draw(st.integers(0, state.arrivals + 1))
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
        asked += tuple(Mention(key=k) for s in state.spans.values() for k, _ in s.holds)
        wanted = {span_id: asked for span_id in state.spans}
        found = resolve_in_order(state, wanted)
        for span_id, span in state.spans.items():
            expected = [state.referents.resolve(span.order_key, m) for m in asked]
            assert found.get(span_id, []) == (expected if asked else [])
