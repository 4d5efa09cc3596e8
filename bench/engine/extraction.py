"""Extraction cost per ``span.added``: the extractor of a baseline commit and today's,
same run, on unique texts (no scan cache).

``python -m bench.engine.extraction [--baseline REV] [--texts N] [--runs R]``
``python -m bench.engine.extraction --instructions [--texts N]``

The second form counts instructions instead of CPU time (valgrind's callgrind, one
child process per side and size): the same figures whatever else the machine runs,
for a shared machine where CPU time drifts by 20%.

The baseline's ``streams/engine/referents.py`` is read from git (``git show``) and
loaded as a module of its own (it imports only the standard library); today's runs
as the engine runs it: :func:`~spanguard.streams.engine.referents.scan_text`, the anaphors for
the session's known types, and the name book's repeats. Texts are the mixed
workload's (user, tool and assistant templates, bench/engine/text.py) with a serial
number each, so no cache of either side helps. Runs alternate between the two
sides (the same drift of the machine for both); the figure is the median per text.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from bench.engine.text import ASSISTANT_TEMPLATES, TOOL_TEMPLATES, USER_TEMPLATES, TextGen
from spanguard.streams.cli.process import tune_gc
from spanguard.streams.engine.names import NameBook, folded_words, match_book
from spanguard.streams.engine.referents import find_anaphors, scan_text
from spanguard.streams.engine.typed_values import find_typed
from spanguard.streams.engine.words import ORDINARY_WORDS

DEFAULT_BASELINE = "de61735"
"""The last commit before contract 1.2's extractor (issue 29)."""

KNOWN_TYPES = frozenset({"account", "ticket", "order", "invoice", "house", "hotel"})


def texts(count: int, seed: int = 5) -> list[str]:
    """Unique span texts like the mixed workload's."""
    gen = TextGen(random.Random(seed))
    templates = (USER_TEMPLATES, TOOL_TEMPLATES, ASSISTANT_TEMPLATES)
    return [f"{gen.text(templates[i % 3])} (#{i})" for i in range(count)]


def load_baseline(rev: str) -> ModuleType:
    """The referents module as it was at ``rev``, loaded under a name of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:streams/engine/referents.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_referents.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_referents", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_referents"] = module
    spec.loader.exec_module(module)
    return module


def baseline_step(module: ModuleType) -> Callable[[str], object]:
    """One text through the baseline extractor as its engine ran it."""

    def step(text: str) -> object:
        scan = module.scan_text(text)
        return module.find_anaphors(scan.phrases, KNOWN_TYPES)

    return step


def current_step() -> Callable[[str], object]:
    """One text through today's extractor as the engine runs it (with a session's
    name book that has learnt every name so far)."""
    book = NameBook()

    def step(text: str) -> object:
        scan = scan_text(text)
        anaphors = find_anaphors(scan.phrases, KNOWN_TYPES)
        repeats = match_book(scan.names, text, book.get, book.firsts.__contains__)
        book.learn(scan.names.names, str)
        return anaphors, repeats

    return step


def floor_step(module: ModuleType) -> Callable[[str], object]:
    """The least a 1.2 extractor can do per text, as a measured floor: the baseline's
    scan (identifiers and phrases, which 1.2 keeps), plus the three passes 1.2 adds
    that no rule can skip: phones and JSON values (``find_typed``), every word's
    vocabulary lookup (names in any case: one set difference, in C), and the name
    book's first-word test (one set intersection)."""
    book = NameBook()

    def step(text: str) -> object:
        baseline = module.scan_text(text)
        typed = find_typed(text)
        words = folded_words(text)
        return baseline, typed, words - ORDINARY_WORDS, words & book.firsts

    return step


def per_text_us(step: Callable[[str], object], sample: Sequence[str]) -> float:
    """CPU microseconds per text for one pass over ``sample`` (process time: other
    processes sharing the core do not count)."""
    started = time.process_time()
    for text in sample:
        step(text)
    return (time.process_time() - started) / len(sample) * 1e6


WARM_TEXTS = 300
"""Texts each side runs before the counted ones (its caches and lazy imports warm)."""


def _steps(baseline: str) -> dict[str, Callable[[str], object]]:
    old = load_baseline(baseline)
    return {"baseline": baseline_step(old), "today": current_step(), "floor": floor_step(old)}


def _child(side: str, baseline: str, count: int, generated: int) -> None:
    """Run ``count`` texts through one side (under callgrind, from :func:`_instructions`).
    ``generated`` texts are made whatever ``count`` is, so that making them cancels out."""
    step = _steps(baseline)[side]
    for text in texts(WARM_TEXTS + generated)[: WARM_TEXTS + count]:
        step(text)


def _count(side: str, baseline: str, count: int, generated: int) -> int:
    """Instructions of a child process that runs ``count`` counted texts of ``side``."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "bench.engine.extraction",
            "--child",
            side,
            "--baseline",
            baseline,
            "--texts",
            str(count),
            "--generate",
            str(generated),
        ],
        capture_output=True,
        text=True,
        check=True,
        # One string hashing for every child: set iteration orders, and with them
        # the counts, are then the same from run to run.
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found.group(1))


def _instructions(baseline: str, count: int) -> dict[str, float]:
    """Instructions per text of each side: a run of ``count`` texts less a run of none
    (start-up, imports, making the texts and warm-up cancel out)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("error: --instructions needs valgrind (apt-get install valgrind)")
    jobs = [(side, n) for side in ("baseline", "today", "floor") for n in (0, count)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        totals = dict(
            zip(
                jobs,
                pool.map(lambda job: _count(job[0], baseline, job[1], count), jobs),
                strict=True,
            )
        )
    return {side: (totals[side, count] - totals[side, 0]) / count for side, _ in jobs}


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print both sides and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m bench.engine.extraction")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare")
    parser.add_argument("--texts", type=int, default=None, help="20,000 (2,000 counted)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (callgrind)"
    )
    parser.add_argument("--child", choices=("baseline", "today", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    tune_gc()
    if args.child:
        _child(args.child, args.baseline, args.texts, args.generate)
        return 0
    if args.instructions:
        count = args.texts or 2_000
        per_text = _instructions(args.baseline, count)
        base = per_text["baseline"]
        print(f"extraction per span.added, {count} unique texts, instructions (callgrind)")
        print(f"  baseline {args.baseline}: {base:,.0f}")
        for side, label in (("today", "today:      "), ("floor", "floor of 1.2:")):
            figure = per_text[side]
            print(f"  {label}       {figure:,.0f}   {figure / base:.2f}x")
        return 0
    args.texts = args.texts or 20_000
    sample = texts(args.texts)
    old = load_baseline(args.baseline)
    before: list[float] = []
    after: list[float] = []
    floor: list[float] = []
    for _ in range(args.runs):
        before.append(per_text_us(baseline_step(old), sample))
        after.append(per_text_us(current_step(), sample))
        floor.append(per_text_us(floor_step(old), sample))
    base, now, least = (statistics.median(v) for v in (before, after, floor))
    print(f"extraction per span.added, {args.texts} unique texts, median of {args.runs} runs")
    print(f"  baseline {args.baseline}: {base:.1f} us")
    print(f"  today:            {now:.1f} us   {now / base:.2f}x (target <= 1.5x)")
    print(f"  floor of 1.2:     {least:.1f} us   {least / base:.2f}x (see floor_step)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
