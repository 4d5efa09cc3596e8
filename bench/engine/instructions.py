"""Where an event's instructions go, per input type of the mixed workload (callgrind).

``python -m bench.engine.instructions [--sessions N] [--unique] [--public-construct]``

Instruction counts are the same whatever else the machine runs (CPU time on a shared
machine drifts by 20% and more), so this is the figure to split an event by. The
mixed workload of ``--sessions`` sessions (``bench.engine``'s, built here, natively) is
run by child processes under valgrind's callgrind, the engine as the worker runs it
(change tracking on, drained every ``commit_every`` records). callgrind gives each C
function's inclusive count, so each thing to count is called through a C function of
its own, one the engine never calls: an ``itertools`` iterator (``starmap_next``,
``takewhile_next``, ...) or ``functools.reduce``.

- ``types``: each event through the marker of its input type, each drain of the
  changelog through ``functools_reduce``: instructions per event of each type;
- ``untracked``: the same with change tracking off (the difference is what tracking
  costs inside an event; the drains are outside any event);
- ``parts``, one child per input type: that type's events are counted (each through
  ``operator.call``, whose C function toggles collection on and off; the others
  run uncounted), each part of the engine through its marker: decode, extraction
  (``HoldingsBuilder.build``), the gate (``gate.decide``), output building inside
  the gate and elsewhere (the emitter's methods and the gate's mention models).

What is left of an event (dispatch, duplicate window, ``seq``, state apply) is the
whole less the parts. A marked call costs a few hundred instructions more than the
bare call, charged to what it marks.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import operator
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import replace
from itertools import accumulate, dropwhile, filterfalse, starmap, takewhile
from pathlib import Path
from typing import Any

import spanguard.streams.engine.construct as construct_module
import spanguard.streams.engine.emit as emit_module
import spanguard.streams.engine.engine as engine_module
import spanguard.streams.engine.gate as gate_module
from bench.engine.mixed import DEFAULT_COMMIT_EVERY, build_mixed
from bench.engine.scale import FULL, SOURCE
from spanguard.streams.cli.process import tune_gc
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.engine import Engine
from spanguard.streams.engine.holdings import HoldingsBuilder

TOGGLE = "_operator_call"
MARKERS = (
    "starmap_next",
    "takewhile_next",
    "dropwhile_next",
    "filterfalse_next",
    "accumulate_next",
)
"""C functions that call a Python function and that the engine never runs."""
DRAIN = "functools_reduce"
PARTS = dict(zip(("decode", "extraction", "gate", "emit in gate", "emit"), MARKERS, strict=True))
"""Each part's marker in a ``parts`` child."""
EMITTERS = ("fault", "pin", "recompute", "compacted", "decision")


def _through(marker: str, thunk: Callable[[], Any]) -> Any:
    """``thunk()``, called from inside the C function ``marker``."""
    box: list[Any] = []

    def run(*_: object) -> bool:
        box.append(thunk())
        return marker == "takewhile_next"  # each iterator then yields its one item

    if marker == "starmap_next":
        next(starmap(run, ((),)))
    elif marker == "takewhile_next":
        next(takewhile(run, (0,)))
    elif marker == "dropwhile_next":
        next(dropwhile(run, (0,)))
    elif marker == "filterfalse_next":
        next(filterfalse(run, (0,)))
    elif marker == "accumulate_next":
        calls = accumulate((0, 0), run)
        next(calls)
        next(calls)  # the second item calls run
    else:
        functools.reduce(run, (0, 0))
    return box[0]


def _mark_parts() -> None:
    """Route every part through its marker (in a ``parts`` child only)."""
    in_gate = [False]

    def marked(marker: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return _through(marker, lambda: func(*args, **kwargs))

        return call

    def emitting(func: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            marker = PARTS["emit in gate" if in_gate[0] else "emit"]
            return _through(marker, lambda: func(*args, **kwargs))

        return call

    def gate(*args: Any) -> Any:
        in_gate[0] = True
        try:
            return _through(PARTS["gate"], lambda: decide(*args))
        finally:
            in_gate[0] = False

    decide = engine_module.decide
    engine_module.decode = marked(PARTS["decode"], engine_module.decode)  # type: ignore[assignment]
    engine_module.decide = gate  # type: ignore[assignment]
    HoldingsBuilder.build = marked(PARTS["extraction"], HoldingsBuilder.build)  # type: ignore[method-assign]
    for name in EMITTERS:
        setattr(Emission, name, emitting(getattr(Emission, name)))
    gate_module.assemble = emitting(gate_module.assemble)  # type: ignore[assignment]


def _child(path: Path, mode: str, kind: str) -> None:
    """Run the workload at ``path`` as ``mode`` says (``kind``: the type a ``parts``
    child counts)."""
    lines, kinds = pickle.loads(path.read_bytes())
    engine = Engine(EngineSettings(), track_changes=mode != "untracked")
    process, drain = engine.process_raw, engine.drain_changes
    every = DEFAULT_COMMIT_EVERY
    if mode == "parts":
        _mark_parts()
        call = operator.call
        for n, (line, line_kind) in enumerate(zip(lines, kinds, strict=True), 1):
            if line_kind == kind:
                call(process, line, SOURCE)
            else:
                process(line, SOURCE)
            if n % every == 0:
                drain()
        return
    marker_of = dict(zip(sorted(set(kinds)), MARKERS, strict=True))
    for n, (line, line_kind) in enumerate(zip(lines, kinds, strict=True), 1):
        _through(marker_of[line_kind], lambda line=line: process(line, SOURCE))  # type: ignore[misc]
        if n % every == 0:
            _through(DRAIN, drain)
    _through(DRAIN, drain)  # the last checkpoint, as bench.engine's run_mixed ends


def _count(path: Path, mode: str, kind: str, public: bool) -> dict[str, int]:
    """Instructions counted by one child: ``total`` (a ``parts`` child) and the
    inclusive count of every marker."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        toggle = ["--collect-atstart=no", f"--toggle-collect={TOGGLE}"] if mode == "parts" else []
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            *toggle,
            sys.executable,
            "-m",
            "bench.engine.instructions",
            "--child",
            mode,
            kind,
            str(path),
        ]
        if public:
            command.append("--public-construct")
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert found is not None, done.stderr[-2000:]
        return {"total": int(found.group(1)), **_inclusive(out)}


def _inclusive(out: Path) -> dict[str, int]:
    """Each marker's inclusive instructions, read with ``callgrind_annotate``."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts = dict.fromkeys((*MARKERS, DRAIN), 0)
    for marker in counts:
        found = re.search(rf"^\s*([\d,]+) .*:{marker} ", text, re.MULTILINE)
        if found is not None:
            counts[marker] = int(found.group(1).replace(",", ""))
    return counts


def measure(sessions: int, unique: bool, public: bool, jobs: int) -> dict[str, Any]:
    """Instructions per event of each input type, split by part (see the docstring)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("error: needs valgrind (apt-get install valgrind)")
    workload = build_mixed(replace(FULL, sessions=sessions), unique=unique)
    types = sorted(workload.input_mix)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "workload.pickle"
        path.write_bytes(pickle.dumps((workload.lines, workload.kinds)))
        runs = [("types", "-"), ("untracked", "-"), *(("parts", kind) for kind in types)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            counted = dict(
                zip(runs, pool.map(lambda run: _count(path, *run, public), runs), strict=True)
            )
    tracked, untracked = counted["types", "-"], counted["untracked", "-"]
    per_type: dict[str, Any] = {}
    for kind, marker in zip(types, MARKERS, strict=False):
        events = workload.input_mix[kind]
        whole = tracked[marker] / events
        parts = {part: counted["parts", kind][m] / events for part, m in PARTS.items()}
        split = {
            "decode": parts["decode"],
            "extraction": parts["extraction"],
            "gate": parts["gate"] - parts["emit in gate"],
            "emit": parts["emit"] + parts["emit in gate"],
            "change tracking": whole - untracked[marker] / events,
        }
        split["the rest"] = whole - sum(split.values())
        per_type[kind] = {"events": events, "whole": whole, "parts": split}
    events = len(workload.lines)
    return {
        "sessions": sessions,
        "unique_texts": unique,
        "construct": "fast" if construct_module.FAST and not public else "public",
        "events": events,
        "per_type": per_type,
        "drain_per_event": tracked[DRAIN] / events,
        "mean_per_event": (sum(tracked[m] for m in MARKERS) + tracked[DRAIN]) / events,
    }


def print_table(result: dict[str, Any]) -> None:
    """The split as a table: instructions per event, each part and the whole."""
    columns = ("decode", "extraction", "gate", "emit", "change tracking", "the rest")
    print(
        f"mixed workload, {result['sessions']} sessions, {result['events']} events, "
        f"unique texts: {result['unique_texts']}, outputs built: {result['construct']}; "
        "instructions per event (callgrind)"
    )
    header = ["input type", "events", *columns, "whole"]
    rows = [header]
    for kind, row in result["per_type"].items():
        rows.append(
            [
                kind,
                str(row["events"]),
                *(f"{row['parts'][c]:,.0f}" for c in columns),
                f"{row['whole']:,.0f}",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    print(f"changelog drains: {result['drain_per_event']:,.0f} per event (every type)")
    print(f"mean per event, drains included: {result['mean_per_event']:,.0f}")


def main(argv: Iterable[str] | None = None) -> int:
    """Measure and print; ``--child`` is what each callgrind process runs."""
    parser = argparse.ArgumentParser(prog="python -m bench.engine.instructions")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--unique", action="store_true", help="no two texts equal (no cache)")
    parser.add_argument(
        "--public-construct",
        action="store_true",
        help="outputs built by pydantic's model_construct (construct.FAST off)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="children at a time")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(None if argv is None else list(argv))
    tune_gc()
    if args.public_construct:
        emit_module.construct = construct_module.construct_public
        emit_module.assemble = construct_module.construct_public
        gate_module.assemble = construct_module.construct_public
    if args.child:
        mode, kind, path = args.child
        _child(Path(path), mode, kind)
        return 0
    print_table(measure(args.sessions, args.unique, args.public_construct, args.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
