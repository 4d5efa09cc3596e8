"""Property-based invariants of the engine over random event sequences."""

from __future__ import annotations

import base64

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from spanguard.schemas import (
    EvictionDecided,
    FaultKind,
    IntegrityFault,
    ScoresRecomputeRequested,
    SpanPinned,
    text_sha256,
)
from spanguard.schemas.codec import decode_output, encode_output
from spanguard.streams.cli.replay import _lines
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.engine import Engine, Source
from tests.engine.scripts import actions, build

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(actions())
def test_gate_invariants(script_actions: list[tuple]) -> None:  # type: ignore[type-arg]
    s = build(script_actions)
    engine = Engine()
    requests = 0
    for line in s.lines():
        state = engine.session("acme", "s1")
        stale_before = set(state.stale) if state else set()
        scored_stale = {
            sid
            for sid, span in (state.spans.items() if state else ())
            if span.stale_rewrites > 0 and span.bound is not None
        }
        assert not scored_stale, "a stale span must never carry a bound score"
        outputs = engine.process_raw(line, Source("t", 0, 0))
        is_request = b'"eviction.requested"' in line
        decisions = [o for o in outputs if isinstance(o, EvictionDecided)]
        if not is_request:
            assert decisions == []
            continue
        requests += 1
        assert len(decisions) == 1, "each accepted request yields exactly one decision"
        decision = decisions[0]
        assert outputs[-1] is decision, "the decision comes after its faults and pins"
        pinned = {o.span_id for o in outputs if isinstance(o, SpanPinned)}
        assert not pinned & set(decision.committed), "a pinned span is never committed"
        assert not pinned & set(decision.dropped), "a pinned span is never dropped"
        assert set(decision.pins) == {o.pin_id for o in outputs if isinstance(o, SpanPinned)}
        assert set(decision.faults) == {
            o.fault_id for o in outputs if isinstance(o, IntegrityFault)
        }
        if decision.action == "FREEZE":
            assert decision.committed == []
            assert stale_before, "a FREEZE needs a stale span"
            recompute = [o for o in outputs if isinstance(o, ScoresRecomputeRequested)]
            assert decision.recompute_id == recompute[0].recompute_id
            assert stale_before <= set(recompute[0].span_ids)
            assert not set(decision.dropped) & set(recompute[0].span_ids), (
                "a span dropped by a decision is never named in its recompute request"
            )
        if decision.basis == "score":
            assert not (set(decision.committed) & stale_before), "a stale span is never ranked"
            if stale_before:
                assert decision.action == "FREEZE"
    state = engine.session("acme", "s1")
    if state is not None:
        assert state.live_tokens == sum(sp.tokens for sp in state.spans.values())
        assert state.bound_count == sum(
            1
            for sp in state.spans.values()
            if sp.bound is not None and sp.span_id not in state.poisoned_pending
        )
        assert state.stale == {
            sid
            for sid, sp in state.spans.items()
            if sp.stale_rewrites > 0 and sid not in state.poisoned_pending
        }
        assert len(state.order) == len(state.spans)


@PROPS
@given(actions())
def test_summary_faults_follow_their_rules(script_actions: list[tuple]) -> None:  # type: ignore[type-arg]
    # A plain re-statement of contract 1.1's two rules, checked on every rewrite.
    conf = EngineSettings()
    engine = Engine(conf)
    for line in build(script_actions).lines():
        event = orjson.loads(line)
        state = engine.session("acme", "s1")
        before = {
            sid: (sp.text_sha256, sp.tokens) for sid, sp in (state.spans.items() if state else ())
        }
        outputs = engine.process_raw(line, Source("t", 0, 0))
        faults = {o.kind: o for o in outputs if isinstance(o, IntegrityFault)}
        if event["type"] != "context.rewritten":
            assert FaultKind.SUMMARY_BALLOONING not in faults
            assert FaultKind.EMPTY_SUMMARY not in faults
            continue
        context = event["context"]
        in_snapshot = {e["span_id"] for e in context}
        named = {p for e in context for p in e.get("derived_from", ())}
        merged = {sid for sid in before if sid not in in_snapshot and sid in named}
        balloon, empty = [], []
        for entry in context:
            sid, tokens = entry["span_id"], entry["tokens"]
            parents = list(dict.fromkeys(entry.get("derived_from", ())))
            if sid in before:
                old_hash, old_tokens = before[sid]
                if old_hash != text_sha256(entry["text"]):
                    sources = old_tokens + sum(before[p][1] for p in parents if p in merged)
                    if tokens > conf.balloon_ratio * sources:
                        balloon.append(sid)
                continue
            if not parents:
                continue
            parent_tokens = sum(before[p][1] for p in parents if p in before)
            if all(p in before for p in parents) and tokens > conf.balloon_ratio * parent_tokens:
                balloon.append(sid)
            floor = conf.min_summary_tokens
            if len(parents) >= 2 and (
                entry["text"] == ""
                or (tokens < floor and parent_tokens >= conf.empty_summary_parent_factor * floor)
            ):
                empty.append(sid)
        got_balloon = faults.get(FaultKind.SUMMARY_BALLOONING)
        got_empty = faults.get(FaultKind.EMPTY_SUMMARY)
        assert sorted(got_balloon.span_ids if got_balloon else []) == sorted(balloon)
        assert (got_empty.span_ids if got_empty else []) == empty


def fields_sets(value: object) -> object:
    """The fields-set of a model and of every model inside it (equality ignores them)."""
    if isinstance(value, BaseModel):
        return (value.model_fields_set, [fields_sets(v) for v in value.__dict__.values()])
    if isinstance(value, list):
        return [fields_sets(v) for v in value]
    return None


@PROPS
@given(actions())
def test_replay_is_byte_identical(script_actions: list[tuple]) -> None:  # type: ignore[type-arg]
    lines = build(script_actions).lines()

    def run() -> bytes:
        engine = Engine()
        out = []
        for i, line in enumerate(lines):
            for o in engine.process_raw(line, Source("t", 0, i)):
                raw = encode_output(o)
                # Outputs are assembled without validation: each must equal its own
                # validated round trip, with its fields in declaration order.
                assert o == decode_output(raw)
                assert list(o.__dict__) == list(type(o).model_fields)
                assert fields_sets(o) == fields_sets(decode_output(raw))
                out.append(raw)
        return b"\n".join(out)

    first = run()
    assert first == run()
    for raw in filter(None, first.split(b"\n")):
        # Every output validates against its contract model and serialises back the same.
        assert encode_output(decode_output(raw)) == raw


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(raw: bytes) -> None:
    engine = Engine()
    for i, line in enumerate(_lines(iter(raw.split(b"\n")))):  # type: ignore[arg-type]
        if not line:
            continue
        [out] = engine.process_raw(line, Source("fuzz", 0, i))
        assert out.type == "event.rejected"
        assert base64.b64decode(out.raw) == line  # type: ignore[union-attr]


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
        ),
        max_leaves=20,
    )
)
def test_arbitrary_json_never_crashes(value: object) -> None:
    import json

    raw = json.dumps(value).encode()
    outputs = Engine().process_raw(raw, Source("fuzz", 0, 0))
    assert len(outputs) == 1 and outputs[0].type == "event.rejected"


def test_fault_kinds_all_reachable_by_unit_tests() -> None:
    # Guard: every contract fault kind has a default severity (the table is complete).
    from spanguard.schemas import DEFAULT_SEVERITY

    assert set(DEFAULT_SEVERITY) == set(FaultKind)
    assert EngineDriver().engine.settings.severity(FaultKind.STALE_SCORE) == "warning"
