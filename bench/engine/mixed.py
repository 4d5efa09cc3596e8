"""Measure 1: throughput of ``process_raw`` over 1,000 interleaved, realistic agent sessions."""

from __future__ import annotations

import cProfile
import dataclasses
import gc
import io
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.engine.scale import CLOCK, SOURCE, TARGET_EVENTS_PER_S, Json, Scale
from bench.engine.text import ASSISTANT_TEMPLATES, TOOL_TEMPLATES, USER_TEMPLATES, TextGen
from spanguard.schemas import (
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine
from spanguard.streams.engine.state import SessionState
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.runtime.config import RuntimeConfig


class Harness:
    """Plays the harness of one session: writes its events and feeds each one to a
    build-time engine, reading the outcome the way a harness knows its own context
    (which spans are live, which score ids it bound, what the engine asked for)."""

    def __init__(self, engine: Engine, script: SessionScript, outputs: list[OutputEvent]) -> None:
        self.engine = engine
        self.script = script
        self.outputs = outputs
        self.lines: list[bytes] = []
        self.recompute: list[str] = []

    def send(self, event: Json) -> list[OutputEvent]:
        """Serialise ``event`` (the line the timed run will replay) and process it."""
        line = orjson.dumps(event)
        self.lines.append(line)
        outputs = self.engine.process_raw(line, SOURCE)
        self.outputs.extend(outputs)
        for out in outputs:
            if isinstance(out, ScoresRecomputeRequested):
                self.recompute.extend(out.span_ids)
        return outputs

    @property
    def state(self) -> SessionState:
        """The build engine's state of this session."""
        state = self.engine.session(self.script.tenant, self.script.session_id)
        assert state is not None
        return state

    def live(self) -> list[str]:
        """Live span ids in context order."""
        return [span.span_id for span in self.state.order]


def build_agent_session(
    engine: Engine,
    index: int,
    turns: int,
    rng: random.Random,
    outputs: list[OutputEvent],
    *,
    unique: bool = False,
) -> list[bytes]:
    """The raw lines of one realistic agent session (processed once, untimed, by
    ``engine`` so that each step can react to the state like a real harness).

    A turn adds a user message, usually a tool result and an assistant reply,
    then scores the new spans and a few older ones for the turn's query, and
    answers any pending recompute request. Every sixth turn compacts: the three
    oldest spans are merged into a summary (``derived_from``), one span is
    condensed (declared), their score ids are invalidated (one compaction in
    seven forgets one, as in seed 000), and usually the compacted spans are
    re-scored; when they are not, the next eviction is frozen. Most turns end
    with an eviction request: by threshold, ``keep_top_k``, the two lowest
    scored candidates, or (rarely) two recency candidates. ``unique``: no two texts
    are equal (see :class:`~bench.engine.text.TextGen`).
    """
    script = SessionScript(f"sess-{index:04d}", tenant=f"tenant-{index % 7}")
    harness = Harness(engine, script, outputs)
    gen = TextGen(rng, unique=unique)
    compactions = 0
    for turn in range(turns):
        script.next_turn()
        new: list[str] = []
        for role, templates in (
            ("user", USER_TEMPLATES),
            ("tool", TOOL_TEMPLATES),
            ("assistant", ASSISTANT_TEMPLATES),
        ):
            if role != "user" and rng.random() < 0.25:
                continue
            span_id = f"t{turn}-{role}"
            harness.send(script.add(span_id, gen.text(templates), role=role))
            new.append(span_id)
        live = harness.live()
        older = [s for s in live if s not in new]
        wanted = [s for s in dict.fromkeys(harness.recompute) if s in harness.state.spans]
        harness.recompute.clear()
        rescored = rng.sample(older, min(3, len(older)))
        scored = list(dict.fromkeys(new + wanted + rescored))
        harness.send(script.score(*[(s, round(rng.uniform(0.02, 1.0), 4)) for s in scored]))

        if turn % 6 == 5 and len(live) >= 6:
            compactions += 1
            _compact(harness, rng, compactions)

        if rng.random() < 0.7:
            _request_eviction(harness, rng, turn)
    harness.send(script.close())
    return harness.lines


def _compact(harness: Harness, rng: random.Random, number: int) -> None:
    script = harness.script
    state = harness.state
    live = harness.live()
    merged, rest = live[:3], live[3:]
    condensed = rng.choice(rest)
    summary_id = f"sum-{number}"
    summary_text = "Summary: " + " / ".join(script.texts[s] for s in merged)
    parent_tokens = sum(state.spans[s].tokens for s in merged)
    context: list[Json] = [
        {
            "span_id": summary_id,
            "text": summary_text,
            "tokens": max(1, parent_tokens * 6 // 10),
            "derived_from": merged,
        }
    ]
    for span_id in rest:
        if span_id == condensed:
            context.append({"span_id": span_id, "text": "(condensed) " + script.texts[span_id]})
        else:
            context.append({"span_id": span_id})
    invalidated = [
        bound.score_id for s in [*merged, condensed] if (bound := state.spans[s].bound) is not None
    ]
    if invalidated and rng.random() < 1 / 7:
        invalidated.pop(rng.randrange(len(invalidated)))
    harness.send(
        script.rewrite(context, declared_modified=[condensed], scores_invalidated=invalidated)
    )
    if rng.random() < 0.8:
        harness.send(
            script.score(
                (summary_id, round(rng.uniform(0.3, 0.9), 4)),
                (condensed, round(rng.uniform(0.02, 1.0), 4)),
            )
        )


def _request_eviction(harness: Harness, rng: random.Random, turn: int) -> None:
    script = harness.script
    kind = turn % 4
    if kind == 0:
        harness.send(script.evict(threshold=0.15))
    elif kind == 1:
        harness.send(script.evict(keep_top_k=18))
    elif kind == 2:
        spans = harness.state.spans
        ranked = sorted((s.bound.score, s.span_id) for s in spans.values() if s.bound is not None)
        candidates = [span_id for _, span_id in ranked[:2]]
        if candidates:
            harness.send(script.evict(candidates))
    elif rng.random() < 0.3:
        harness.send(script.evict(harness.live()[:2], basis="recency"))


@dataclass(slots=True)
class MixedWorkload:
    """The pre-built lines of the mixed workload and what the build run produced."""

    lines: list[bytes]
    kinds: list[str]
    """The input type of each line."""
    unique: bool
    """No two span texts are equal: the scan cache never helps."""
    sessions: int
    input_mix: dict[str, int]
    output_mix: dict[str, int]
    build_seconds: float


def build_mixed(scale: Scale, seed: int = 7, *, unique: bool = False) -> MixedWorkload:
    """Build every session (untimed) and interleave them round-robin; ``unique``: with
    no two span texts equal."""
    started = time.perf_counter()
    rng = random.Random(seed)
    engine = Engine(EngineSettings())
    outputs: list[OutputEvent] = []
    per_session = [
        build_agent_session(engine, index, scale.turns, rng, outputs, unique=unique)
        for index in range(scale.sessions)
    ]
    lines = _round_robin(per_session)
    kinds = [orjson.loads(line)["type"] for line in lines]
    input_mix = Counter(kinds)
    return MixedWorkload(
        lines=lines,
        kinds=kinds,
        unique=unique,
        sessions=scale.sessions,
        input_mix=dict(sorted(input_mix.items())),
        output_mix=describe_outputs(outputs),
        build_seconds=time.perf_counter() - started,
    )


def _round_robin(streams: Sequence[list[bytes]]) -> list[bytes]:
    merged: list[bytes] = []
    for i in range(max((len(s) for s in streams), default=0)):
        merged.extend(s[i] for s in streams if i < len(s))
    return merged


def describe_outputs(outputs: Sequence[OutputEvent]) -> dict[str, int]:
    """Counts of output events by type, decisions by action and faults by kind."""
    counts: Counter[str] = Counter()
    for out in outputs:
        counts[out.type] += 1
        if isinstance(out, EvictionDecided):
            counts[f"decision:{out.action.value}"] += 1
        elif isinstance(out, IntegrityFault):
            counts[f"fault:{out.kind.value}"] += 1
    return dict(sorted(counts.items()))


def _default_commit_every() -> int:
    """The runtime's default checkpoint cadence, in records."""
    (default,) = (f.default for f in dataclasses.fields(RuntimeConfig) if f.name == "commit_every")
    assert isinstance(default, int)
    return default


DEFAULT_COMMIT_EVERY = _default_commit_every()


def feed(engine: Engine, lines: Sequence[bytes], drain_every: int = DEFAULT_COMMIT_EVERY) -> None:
    """Process ``lines`` as the worker does, untimed: with change tracking on, the
    changes are drained at each checkpoint (every ``drain_every`` records, by default
    ``commit_every``'s) and after the last. (The timed loops, :func:`run_mixed` and
    ``instructions``, spell it out.)"""
    tracking = engine.tracks_changes
    for n, line in enumerate(lines, 1):
        engine.process_raw(line, SOURCE)
        if tracking and n % drain_every == 0:
            engine.drain_changes()
    if tracking:
        engine.drain_changes()


def run_mixed(lines: Sequence[bytes], kinds: Sequence[str]) -> tuple[float, int, dict[str, float]]:
    """One timed pass of a fresh engine over ``lines``: (CPU seconds, outputs, seconds by
    input type). The per-type split reads the cheap wall clock (about 0.1 us per event,
    < 0.2 %); it only gives each type's share of the CPU total.

    The engine runs as the worker runs it: change tracking on, its changes drained at
    each checkpoint (every ``commit_every`` records of the runtime's defaults; the
    drains count in the total, not in any type's share)."""
    engine = Engine(EngineSettings(), track_changes=True)
    process = engine.process_raw
    drain_every = DEFAULT_COMMIT_EVERY
    clock = time.perf_counter
    by_kind = dict.fromkeys(kinds, 0.0)
    produced = 0
    gc.collect()
    started = CLOCK()
    wall = clock()
    for n, (line, kind) in enumerate(zip(lines, kinds, strict=True), 1):
        before = clock()
        produced += len(process(line, SOURCE))
        by_kind[kind] += clock() - before
        if n % drain_every == 0:
            engine.drain_changes()
    engine.drain_changes()
    cpu = CLOCK() - started
    scale = cpu / (clock() - wall)
    return cpu, produced, {kind: seconds * scale for kind, seconds in by_kind.items()}


def measure_mixed(workload: MixedWorkload, runs: int, *, default_gc_too: bool = True) -> Json:
    """Events per second of ``process_raw`` over the mixed workload (median of ``runs``),
    with the cost of each input type (from the median run). With ``default_gc_too``, each
    run is followed by one under CPython's default collector thresholds, so that both
    see the same drift of the machine (later runs of a process tend to be faster: its
    heap is warm)."""
    results = []
    default_gc = []
    for _ in range(runs):
        results.append(run_mixed(workload.lines, workload.kinds))
        if default_gc_too:
            default_gc.append(_with_default_gc(workload))
    seconds = [r[0] for r in results]
    expected = sum(n for k, n in workload.output_mix.items() if ":" not in k)
    for _, outputs, _ in results:
        assert outputs == expected, f"a timed run produced {outputs} outputs, the build {expected}"
    median = statistics.median(seconds)
    _, outputs, by_kind = sorted(results, key=lambda r: r[0])[len(results) // 2]
    total = sum(by_kind.values())
    events = len(workload.lines)
    per_type = {
        kind: {
            "events": workload.input_mix[kind],
            "us_per_event": round(spent / workload.input_mix[kind] * 1e6, 1),
            "share_of_time": round(spent / total, 3),
        }
        for kind, spent in sorted(by_kind.items(), key=lambda item: -item[1])
    }
    figures: Json = {
        "unique_texts": workload.unique,
        "sessions": workload.sessions,
        "events": events,
        "outputs": outputs,
        "runs_s": [round(s, 4) for s in seconds],
        "median_s": round(median, 4),
        "events_per_s": round(events / median),
        "best_events_per_s": round(events / min(seconds)),
        "us_per_event": round(median / events * 1e6, 2),
        "per_type": per_type,
        "input_mix": workload.input_mix,
        "output_mix": workload.output_mix,
        "build_s": round(workload.build_seconds, 2),
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "met": events / median >= TARGET_EVENTS_PER_S,
        "gc_thresholds": list(gc.get_threshold()),
    }
    if default_gc:
        default_median = statistics.median(default_gc)
        figures["python_default_gc"] = {
            "gc_thresholds": list(PYTHON_DEFAULT_GC),
            "runs_s": [round(s, 4) for s in default_gc],
            "events_per_s": round(events / default_median),
            "us_per_event": round(default_median / events * 1e6, 2),
        }
    return figures


PYTHON_DEFAULT_GC = (700, 10, 10)
"""CPython's own collector thresholds (``spanguard`` commands set their own)."""


def _with_default_gc(workload: MixedWorkload) -> float:
    """CPU seconds of one pass under CPython's default collector thresholds, for
    comparison with the thresholds the ``spanguard`` commands run the engine under."""
    kept = gc.get_threshold()
    gc.set_threshold(*PYTHON_DEFAULT_GC)
    try:
        cpu, _, _ = run_mixed(workload.lines, workload.kinds)
    finally:
        gc.set_threshold(*kept)
    return cpu


def profile_mixed(lines: Sequence[bytes], order: str = "tottime", top: int = 15) -> list[str]:
    """cProfile one pass over the mixed workload; the ``top`` lines by ``order``
    (a :mod:`pstats` sort key: ``tottime`` or ``cumulative``)."""
    engine = Engine(EngineSettings())
    profiler = cProfile.Profile()
    profiler.enable()
    for line in lines:
        engine.process_raw(line, SOURCE)
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats(order).print_stats(top)
    text = buffer.getvalue().replace(str(Path.cwd()) + "/", "")
    text = text.replace(f".venv/lib/python{sys.version_info[0]}.{sys.version_info[1]}/", "")
    keep: list[str] = []
    started = False
    for row in text.splitlines():
        if row.strip().startswith("ncalls"):
            started = True
        if started and row.strip():
            keep.append(row.rstrip())
        elif "function calls" in row:
            keep.append(row.strip())
    return keep
