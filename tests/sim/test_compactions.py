"""Contract 1.2 in the simulator: tool pairs and protected spans in honest traffic, the
four compaction injections, and their healthy look-alikes (which must raise nothing,
in the engine and in the reference model)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson
import pytest

from spanguard.schemas import OutputEvent
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.reference.compare import first_divergence
from spanguard.streams.sim import SimConfig, SimulatedFleet, simulate
from spanguard.streams.sim.injections import LOOKALIKES, REGISTRY
from spanguard.streams.sim.quality import evaluate

NEW_KINDS = (
    "TOOL_PAIR_SPLIT",
    "PROTECTED_SPAN_REWRITTEN",
    "SUMMARY_LOST_KEYS",
    "COMPACTION_THRASHING",
)


class Feed:
    """``Engine.process_raw`` as an (index, line) -> outputs callable."""

    def __init__(self) -> None:
        self.engine = Engine()

    def __call__(self, index: int, line: bytes) -> Sequence[OutputEvent]:
        return self.engine.process_raw(line, Source("sim", 0, index))


def _outputs(fleet: SimulatedFleet) -> list[dict[str, Any]]:
    driver = EngineDriver()
    driver.pipe(fleet.lines)
    return [orjson.loads(encode_output(o)) for o in driver.outputs]


@pytest.fixture(scope="module")
def healthy() -> SimulatedFleet:
    return simulate(SimConfig(sessions=50, seed=31, fault_rate=0.0, lookalike_rate=1.0))


@pytest.fixture(scope="module")
def faulty() -> SimulatedFleet:
    mix = tuple((kind, 1) for kind in NEW_KINDS)
    return simulate(SimConfig(sessions=40, seed=32, fault_rate=1.0, faults=mix, max_injections=1))


def test_honest_sessions_carry_tool_pairs_and_protected_spans(healthy: SimulatedFleet) -> None:
    events = {e["event_id"]: e for e in map(json.loads, healthy.lines)}  # re-deliveries once
    added = [e for e in events.values() if e["type"] == "span.added"]
    # Call ids are the session's own (call_1, call_2...): a pair is (session, call id).
    calls = {(e["session_id"], c) for e in added for c in e.get("tool_call_ids") or ()}
    answers = [(e["session_id"], e["tool_call_id"]) for e in added if e.get("tool_call_id")]
    assert len(calls) > 200 and set(answers) <= calls
    protected = Counter(e["role"] for e in added if e.get("protected"))
    sessions = len(healthy.truth.sessions)
    assert protected == {"system": sessions, "user": sessions}
    rewrites = [json.loads(line) for line in healthy.lines if b"context.rewritten" in line]
    assert {r.get("strategy") for r in rewrites} >= {"summarize", "sliding_window"}


def test_the_gate_refuses_protected_spans_and_half_pairs_in_honest_sessions(
    healthy: SimulatedFleet,
) -> None:
    outputs = _outputs(healthy)
    reasons = Counter(
        r["reason"] for o in outputs if o["type"] == "eviction.decided" for r in o["refused"]
    )
    assert reasons["PROTECTED"] > 20
    assert reasons["TOOL_PAIR"] > 0
    held = [
        r
        for o in outputs
        if o["type"] == "eviction.decided"
        for r in o["refused"]
        if r["reason"] == "TOOL_PAIR"
    ]
    assert all(r.get("held_by") for r in held)
    report = evaluate(healthy.truth, outputs)
    assert report.healthy_fault_count == 0
    assert report.decisions_matching == report.decisions_expected


def test_every_lookalike_is_placed_and_raises_nothing(healthy: SimulatedFleet) -> None:
    placed = Counter(name for s in healthy.truth.sessions for name in s.lookalikes)
    assert set(placed) == set(LOOKALIKES)
    assert all(count >= 5 for count in placed.values()), placed
    report = evaluate(healthy.truth, _outputs(healthy))
    assert report.lookalikes == {name: (placed[name], 0) for name in LOOKALIKES}
    compacted = [o for o in _outputs(healthy) if o["type"] == "context.compacted"]
    assert compacted and {o["outcome"] for o in compacted} == {"clean"}


def test_the_reference_agrees_with_the_engine_on_pairs_protection_and_lookalikes(
    healthy: SimulatedFleet, faulty: SimulatedFleet
) -> None:
    for fleet in (healthy, faulty):
        divergence = first_divergence(fleet.lines, Feed())
        assert divergence is None, divergence.describe()


def test_each_new_injection_is_found_exactly(faulty: SimulatedFleet) -> None:
    assert faulty.skipped == []
    report = evaluate(faulty.truth, _outputs(faulty))
    by_kind = {k.kind: k for k in report.kinds}
    assert set(NEW_KINDS) <= set(by_kind)
    for kind in NEW_KINDS:
        score = by_kind[kind]
        assert score.injected >= 8, score
        assert score.recall == score.precision == 1.0, score
        assert score.located == score.injected, score
    assert set(by_kind) == set(NEW_KINDS), set(by_kind) - set(NEW_KINDS)
    for session in faulty.truth.sessions:
        for name in session.injections:
            assert {f.kind for f in session.faults} == {k.value for k in REGISTRY[name].faults}


def test_a_split_names_the_half_left_live(faulty: SimulatedFleet) -> None:
    splits = [f for s in faulty.truth.sessions for f in s.faults if f.kind == "TOOL_PAIR_SPLIT"]
    assert splits
    for fault in splits:
        (span,) = fault.span_ids
        assert span[0] in "ct"  # a call (c...) or a tool result (t...)
