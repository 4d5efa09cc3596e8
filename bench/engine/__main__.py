"""``python -m bench.engine``: run every engine measure, print the table, write the JSON."""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench.engine.mixed import MixedWorkload, build_mixed, measure_mixed, profile_mixed
from bench.engine.report import issue_targets, machine, print_report
from bench.engine.scale import (
    FULL,
    QUICK,
    RESULTS_DIR,
    Json,
    Scale,
)
from bench.engine.seed_gate import measure_gate
from bench.engine.sessions import measure_scaling
from bench.engine.text import TOOL_TEMPLATES, USER_TEMPLATES, TextGen
from bench.engine_costs import measure_decode, measure_memory
from spanguard.streams.cli.process import tune_gc


def _step(name: str, func: Callable[[], Json]) -> Json:
    started = time.perf_counter()
    print(f"[{name}] ...", file=sys.stderr, flush=True)
    result = func()
    print(f"[{name}] {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.engine", description="spanguard engine benchmarks"
    )
    parser.add_argument("--quick", action="store_true", help="small smoke run (< 20 s)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile the mixed workload (top 15 lines by own and by cumulative time)",
    )
    parser.add_argument("--output", type=Path, help="where to write the JSON results")
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    tune_gc()  # the engine as every spanguard command runs it (the mixed row adds the default)
    started = time.perf_counter()
    report: Json = {
        "benchmark": "engine",
        "mode": scale.name,
        "command": "python -m bench.engine"
        + (" --quick" if args.quick else "")
        + (" --profile" if args.profile else ""),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "figures": {},
    }
    workload = _timed_build(scale, unique=False)
    figures = report["figures"]
    figures["mixed"] = _step("mixed throughput", lambda: measure_mixed(workload, scale.mixed_runs))
    # Built and dropped within its step: the later measures need only the first one.
    figures["mixed_unique"] = _step(
        "mixed throughput, unique texts (scan cache off)",
        lambda: measure_mixed(
            _timed_build(scale, unique=True), scale.mixed_runs, default_gc_too=False
        ),
    )
    figures["size"] = _step("size scaling", lambda: measure_scaling(scale))
    figures["gate"] = _step("gate vs naive", lambda: measure_gate(scale))
    text = _text_source()
    figures["decode"] = _step("decode", lambda: measure_decode(text))
    figures["memory"] = _step(
        "memory",
        lambda: measure_memory(text, sessions=scale.memory_sessions, spans=1_000),
    )
    if args.profile:
        report["profile"] = profile_mixed(workload.lines, "tottime")
        report["profile_cumulative"] = profile_mixed(workload.lines, "cumulative")
    report["targets"] = issue_targets(figures)
    report["total_s"] = round(time.perf_counter() - started, 1)
    print_report(report)
    out = args.output or RESULTS_DIR / (
        "engine.json" if scale is FULL else f"engine-{scale.name}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nresults: {out} (total {report['total_s']} s)")
    return 0


def _text_source() -> Callable[[], str]:
    """Span texts like the mixed workload's (user and tool templates, in turn)."""
    gen = TextGen(random.Random(5))
    templates = (USER_TEMPLATES, TOOL_TEMPLATES)
    turn = itertools.count()
    return lambda: gen.text(templates[next(turn) % 2])


def _timed_build(scale: Scale, *, unique: bool) -> MixedWorkload:
    started = time.perf_counter()
    name = "build mixed workload" + (", unique texts" if unique else "")
    print(f"[{name}] ...", file=sys.stderr, flush=True)
    workload = build_mixed(scale, unique=unique)
    print(f"[{name}] {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return workload


if __name__ == "__main__":
    raise SystemExit(main())
