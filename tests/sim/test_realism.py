"""The simulator's traffic looks like real agent loops, and its noise is harmless.

Tool-call/result pairs, paraphrases that write identifiers in a new surface
form, summaries of summaries, two scorers, late scores, re-deliveries inside the
duplicate window, long sessions: the engine must raise no fault on any of it in
a healthy fleet, and agree with the reference model event by event.
"""

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import pairwise

import pytest

from spanguard.schemas import OutputEvent
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referents import extract
from spanguard.streams.reference.compare import first_divergence, outcomes_of
from spanguard.streams.reference.outcome import Fault
from spanguard.streams.sim import SimConfig, SimulatedFleet, simulate
from spanguard.streams.sim.config import LONG_SESSION_EVENTS
from spanguard.streams.sim.steps import LIVE_BUDGET, SECOND_SCORER
from spanguard.streams.sim.texts import AgentTexts
from spanguard.streams.sim.vocab import SUPPORT

Json = dict[str, object]


@pytest.fixture(scope="module")
def healthy() -> SimulatedFleet:
    return simulate(SimConfig(sessions=60, seed=17, fault_rate=0.0))


def _events(fleet: SimulatedFleet) -> list[Json]:
    return [json.loads(line) for line in fleet.lines]


class Feed:
    """``Engine.process_raw`` as an (index, line) -> outputs callable."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __call__(self, index: int, line: bytes) -> Sequence[OutputEvent]:
        return self.engine.process_raw(line, Source("sim", 0, index))


def test_a_healthy_fleet_has_the_hard_parts(healthy: SimulatedFleet) -> None:
    events = _events(healthy)
    kinds: Counter[str] = Counter()
    first_at: dict[str, int] = {}
    per_session: defaultdict[str, list[Json]] = defaultdict(list)
    for index, event in enumerate(events):
        event_id = str(event["event_id"])
        if event_id in first_at:
            kinds["redelivered"] += 1
            session = per_session[str(event["session_id"])]
            assert event in session[-40:]  # recent: well inside the duplicate window
            continue
        first_at[event_id] = index
        per_session[str(event["session_id"])].append(event)
        if event["type"] == "scores.computed":
            kinds[str(event["scorer"])] += 1
        if event["type"] == "context.rewritten":
            for entry in event["context"]:  # type: ignore[attr-defined]
                if any(str(p).startswith("sum") for p in entry.get("derived_from") or ()):
                    kinds["summary of a summary"] += 1
    for session in per_session.values():
        added = [e for e in session if e["type"] == "span.added"]
        for call, result in pairwise(added):
            if str(call["span_id"]).startswith("c"):
                assert str(result["span_id"]).startswith("t")  # a call, then its result
                kinds["tool call/result"] += 1
    assert kinds["redelivered"] > 20
    assert kinds[SECOND_SCORER] > 20 and kinds["relevance-v1"] > 500
    assert kinds["summary of a summary"] > 10
    assert kinds["tool call/result"] > 100
    # A paraphrase wrote an identifier case-folded (``inc-4411``): the same key.
    folded = [
        t
        for t in healthy.texts
        for key, _ in t.holds
        if key in t.text and key != key.upper() and "/" not in key and any(map(str.isdigit, key))
    ]
    assert len(folded) >= 5


def test_late_scores_arrive_with_a_later_pass(healthy: SimulatedFleet) -> None:
    turn_of: dict[tuple[str, str], int] = {}
    late = 0
    for event in _events(healthy):
        session = str(event["session_id"])
        if event["type"] == "span.added":
            turn_of.setdefault((session, str(event["span_id"])), int(event["turn"]))  # type: ignore[call-overload]
        elif event["type"] == "scores.computed":
            for score in event["scores"]:  # type: ignore[attr-defined]
                added = turn_of.get((session, score["span_id"]))
                late += added is not None and added < int(event["turn"])  # type: ignore[call-overload]
    assert late > 50


def test_the_noise_raises_nothing_and_both_models_agree(healthy: SimulatedFleet) -> None:
    engine = Engine()
    faults = [
        o
        for index, line in enumerate(healthy.lines)
        for o in outcomes_of(engine.process_raw(line, Source("sim", 0, index)))
        if isinstance(o, Fault)
    ]
    assert faults == []
    assert engine.stats.duplicates > 20
    divergence = first_divergence(healthy.lines, Feed(Engine()))
    assert divergence is None, divergence.describe()


def test_a_long_session_keeps_a_bounded_context_and_agrees() -> None:
    fleet = simulate(SimConfig(sessions=1, seed=4, fault_rate=1.0, max_injections=3, long_every=1))
    events = [json.loads(line) for line in fleet.lines if line.startswith(b"{")]
    assert max(int(e["turn"]) for e in events) >= 500
    assert len(fleet.lines) >= LONG_SESSION_EVENTS
    live: set[str] = set()
    biggest = 0
    engine = Engine()
    for index, line in enumerate(fleet.lines):
        for output in engine.process_raw(line, Source("sim", 0, index)):
            if output.type == "eviction.decided":
                live -= set(output.committed) | set(output.dropped)
        event = json.loads(line) if line.startswith(b"{") else {}
        if event.get("type") == "span.added":
            live.add(str(event["span_id"]))
        elif event.get("type") == "context.rewritten":
            live = {str(e["span_id"]) for e in event["context"]}
        biggest = max(biggest, len(live))
    assert biggest < LIVE_BUDGET * 2
    divergence = first_divergence(fleet.lines, Feed(Engine()))
    assert divergence is None, divergence.describe()


def test_agent_texts_are_deterministic_and_hold_what_they_say() -> None:
    first = list(AgentTexts(3, SUPPORT).turns(30))
    assert first == list(AgentTexts(3, SUPPORT).turns(30))
    assert first != list(AgentTexts(4, SUPPORT).turns(30))
    assert {m.role for m in first} == {"user", "tool", "assistant"}
    known: set[str] = set()
    anaphors = 0
    book = NameBook()
    for message in first:
        found = extract(message.text.text, frozenset(known), book)
        held = {(i.key, i.type) for i in found.identifiers} | {(n.key, n.type) for n in found.names}
        assert held == set(message.text.holds)
        assert [a.type for a in found.anaphors] == list(message.text.anaphors)
        anaphors += len(message.text.anaphors)
        known.update(t for _, t in message.text.holds)
    assert anaphors > 3
