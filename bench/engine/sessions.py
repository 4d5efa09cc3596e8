"""Measure 2: per-event cost on a 100- and a 10,000-span session, and a full-snapshot rewrite
(the scored sessions of a given size are shared with measure 3)."""

from __future__ import annotations

import copy
import gc
import random
import statistics
from collections import Counter
from dataclasses import dataclass

import orjson

from bench.engine.scale import BIG_EVENT_BYTES, CLOCK, SOURCE, TARGET_SIZE_RATIO, Json, Scale
from bench.engine.text import ASSISTANT_TEMPLATES, TOOL_TEMPLATES, USER_TEMPLATES, TextGen
from spanguard.schemas import (
    EvictionDecided,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine
from spanguard.streams.engine.state import SessionState
from spanguard.streams.engine.trace import SessionScript


@dataclass(slots=True)
class BuiltSession:
    """A session of ``size`` live, scored spans, processed (untimed) by ``engine``."""

    engine: Engine
    script: SessionScript
    gen: TextGen
    rng: random.Random
    size: int

    @property
    def state(self) -> SessionState:
        """The engine's state of the session."""
        state = self.engine.session(self.script.tenant, self.script.session_id)
        assert state is not None
        return state


def build_scored_session(
    size: int,
    *,
    seed: int,
    low: int = 0,
    settings: EngineSettings | None = None,
    session_id: str = "big",
) -> BuiltSession:
    """``size`` spans (mixed roles, identifiers, anaphors), every one with a score bound
    to its current text: ``low`` randomly chosen spans score in [0.001, 0.009], the
    others in [0.1, 1.0]."""
    rng = random.Random(seed)
    gen = TextGen(rng)
    engine = Engine(settings or EngineSettings())
    script = SessionScript(session_id, tenant="bench")
    templates = (USER_TEMPLATES, TOOL_TEMPLATES, ASSISTANT_TEMPLATES)
    span_ids = [f"s{i:05d}" for i in range(size)]
    for i, span_id in enumerate(span_ids):
        if i % 3 == 0:
            script.next_turn()
        script.add(span_id, gen.text(templates[i % 3]))
    low_ids = set(rng.sample(span_ids, low))
    batch = 250
    for start in range(0, size, batch):
        chunk = span_ids[start : start + batch]
        script.score(
            *[
                (s, round(rng.uniform(0.001, 0.009) if s in low_ids else rng.uniform(0.1, 1.0), 6))
                for s in chunk
            ]
        )
    for line in script.lines():
        engine.process_raw(line, SOURCE)
    built = BuiltSession(engine, script, gen, rng, size)
    state = built.state
    assert len(state.spans) == size and state.bound_count == size and not state.stale
    return built


def cycle_events(built: BuiltSession, number: int) -> None:
    """Append one steady-state cycle (7 events, net zero spans) to the script:

    four ``span.added`` (a fresh account and order, an assistant reply with
    anaphors, a tool result with a fresh ticket, a short acknowledgement), one
    ``scores.computed`` binding the four and re-scoring two random older spans,
    a threshold eviction selecting the two low-scored new spans, and an eviction
    of the other two new spans as candidates.
    """
    script, gen, rng = built.script, built.gen, built.rng
    script.next_turn()
    a, b, c, d = (f"c{number}-{x}" for x in "abcd")
    script.add(a, f"Customer on {gen.new_entity('account')} asks about {gen.new_entity('order')}")
    script.add(b, "I will check that account and the order status before replying.")
    script.add(c, f"search tickets: {gen.new_entity('ticket')} (open), no other match")
    script.add(d, "Noted, the ticket is linked.")
    older = [f"s{rng.randrange(built.size):05d}" for _ in range(2)]
    script.score(
        (a, 0.5),
        (b, 0.6),
        (c, 0.001),
        (d, 0.002),
        *[(s, round(rng.uniform(0.1, 1.0), 6)) for s in dict.fromkeys(older)],
    )
    script.evict(threshold=0.05)
    script.evict([a, b])


def measure_size(built: BuiltSession, cycles: int, runs: int) -> Json:
    """Per-event cost of ``runs`` x ``cycles`` steady-state cycles (median run)."""
    state = built.state
    size = len(state.spans)
    mark = len(built.script.raw)
    for n in range(cycles * runs):
        cycle_events(built, n)
    lines = built.script.lines()[mark:]
    per_run = len(lines) // runs
    process = built.engine.process_raw
    costs: list[float] = []
    decisions: Counter[str] = Counter()
    for run in range(runs):
        chunk = lines[run * per_run : (run + 1) * per_run]
        gc.collect()
        started = CLOCK()
        for line in chunk:
            for out in process(line, SOURCE):
                if isinstance(out, EvictionDecided):
                    decisions[out.action.value] += 1
        costs.append((CLOCK() - started) / len(chunk))
    assert len(state.spans) == size, f"steady state broken: {size} -> {len(state.spans)}"
    assert decisions == {"COMMIT": 2 * cycles * runs}, decisions
    return {
        "spans": size,
        "events_per_run": per_run,
        "runs_us_per_event": [round(c * 1e6, 2) for c in costs],
        "us_per_event": round(statistics.median(costs) * 1e6, 2),
    }


def measure_rewrite(built: BuiltSession, runs: int) -> Json:
    """Cost of one full-snapshot rewrite (two spans merged, one condensed), each run
    on a deep copy of the engine (the copy is not timed)."""
    script = built.script
    live = [span.span_id for span in built.state.order]
    merged, rest = live[:2], live[2:]
    condensed = rest[len(rest) // 2]
    context: list[Json] = [
        {
            "span_id": "rw-summary",
            "text": "Summary: " + script.texts[merged[0]],
            "derived_from": merged,
        }
    ]
    for span_id in rest:
        entry: Json = {"span_id": span_id}
        if span_id == condensed:
            entry["text"] = "(condensed) " + script.texts[span_id]
        context.append(entry)
    invalidated = [
        bound.score_id
        for s in [*merged, condensed]
        if (bound := built.state.spans[s].bound) is not None
    ]
    script.rewrite(context, declared_modified=[condensed], scores_invalidated=invalidated)
    line = orjson.dumps(script.raw[-1])
    seconds: list[float] = []
    for _ in range(runs):
        engine = copy.deepcopy(built.engine)
        gc.collect()
        started = CLOCK()
        outputs = engine.process_raw(line, SOURCE)
        seconds.append(CLOCK() - started)
        assert not any(o.type == "event.rejected" for o in outputs), outputs
    median = statistics.median(seconds)
    return {
        "snapshot_spans": len(context),
        "bytes": len(line),
        "ms_per_rewrite": round(median * 1e3, 3),
        "us_per_snapshot_span": round(median / len(context) * 1e6, 2),
    }


def measure_scaling(scale: Scale) -> Json:
    """Per-event cost at ``scale.small`` and ``scale.big`` spans, and rewrite cost."""
    settings = EngineSettings(max_event_bytes=BIG_EVENT_BYTES)
    results: dict[str, Json] = {}
    for label, size in (("small", scale.small), ("big", scale.big)):
        built = build_scored_session(size, seed=11, settings=settings, session_id=label)
        result = measure_size(built, scale.cycles, scale.size_runs)
        result["rewrite"] = measure_rewrite(built, scale.rewrite_runs)
        results[label] = result
    ratio = results["big"]["us_per_event"] / results["small"]["us_per_event"]
    rewrite_ratio = (
        results["big"]["rewrite"]["ms_per_rewrite"] / results["small"]["rewrite"]["ms_per_rewrite"]
    )
    return {
        "mix": "per cycle: 4 span.added, 1 scores.computed (6 scores), "
        "1 threshold eviction (selects 2), 1 candidates eviction (2 spans)",
        "small": results["small"],
        "big": results["big"],
        "ratio": round(ratio, 3),
        "rewrite_ratio": round(rewrite_ratio, 1),
        "target_ratio": TARGET_SIZE_RATIO,
        "met": ratio <= TARGET_SIZE_RATIO,
    }
