"""``python -m bench.referents PATH``: referents on real dialogues (SGD) and on
generated agent runs; see :mod:`bench.referents` and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from bench.referents import agent_traces, sgd
from bench.referents.drive import POLICIES
from bench.referents.measure import Tally
from bench.referents.model import Dialogue
from bench.referents.report import (
    AGENT_ROWS,
    SGD_ROWS,
    agent_targets,
    class_table,
    miss_text,
    pin_text,
    sample_misses,
    sample_pins,
    sgd_targets,
    tally_json,
    volume_table,
)
from bench.referents.runner import run_policy, write_settings


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.referents", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument("path", type=Path, help="an SGD split folder (dialogues_*.json) or file")
    parser.add_argument("--policy", choices=[*POLICIES, "both"], default="both")
    parser.add_argument("--limit", type=int, default=None, help="at most N SGD dialogues")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--sample", type=int, default=40, help="SGD pins printed for a reader")
    parser.add_argument(
        "--misses", type=int, default=20, help="lost name cases printed for a reader"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the sample and agent runs")
    parser.add_argument(
        "--agent-sessions", type=int, default=300, help="generated agent runs (0: none)"
    )
    parser.add_argument(
        "--write-traces",
        type=Path,
        default=None,
        metavar="DIR",
        help="write each trace (sgd-<policy>.jsonl, agent-<policy>.jsonl) and a "
        "spanguard.toml for `spanguard replay --config`",
    )
    return parser.parse_args(argv)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _run(
    name: str,
    dialogues: list[Dialogue],
    policies: list[str],
    traces: Path | None,
    wrong: frozenset[str],
) -> dict[str, Tally]:
    """Run ``dialogues`` under each policy (writing ``<name>-<policy>.jsonl`` into
    ``traces`` when given)."""
    tallies: dict[str, Tally] = {}
    for policy in policies:
        with ExitStack() as stack:
            sink: IO[bytes] | None = None
            if traces is not None:
                sink = stack.enter_context((traces / f"{name}-{policy}.jsonl").open("wb"))
            tallies[policy] = run_policy(
                dialogues, policy, tenant=name, wrong_mentions=wrong, trace=sink
            )
    return tallies


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report; 0 when every target is met, else 1."""
    args = _args(argv)
    policies = list(POLICIES) if args.policy == "both" else [args.policy]
    started = time.perf_counter()
    dialogues = list(sgd.load(args.path, args.limit))
    agents = list(agent_traces.generate(args.agent_sessions, args.seed))
    if args.write_traces is not None:
        write_settings(args.write_traces)
    sgd_tallies = _run("sgd", dialogues, policies, args.write_traces, frozenset())
    agent_tallies = _run(
        "agent", agents, policies, args.write_traces, frozenset(agent_traces.NOT_IDENTIFIERS)
    )
    elapsed = time.perf_counter() - started
    turns = sum(len(d.turns) for d in dialogues)
    print(f"# Referents on real dialogues (commit {_commit()})")
    print(f"\nSGD: {len(dialogues)} dialogues, {turns} turns from {args.path}\n")
    print(class_table(sgd_tallies, SGD_ROWS))
    print()
    print(volume_table(sgd_tallies))
    print(f"\nAgent-style runs (generated, seed {args.seed}): {len(agents)} sessions\n")
    print(class_table(agent_tallies, AGENT_ROWS))
    print()
    print(volume_table(agent_tallies))
    targets = sgd_targets(sgd_tallies) + agent_targets(agent_tallies)
    print("\n## Targets\n")
    for target in targets:
        print(f"- {target.line()}")
    cases = [c for t in sgd_tallies.values() for c in t.pin_cases]
    sample = sample_pins(cases, args.sample, args.seed)
    print(f"\n## {len(sample)} SGD pins drawn at random (seed {args.seed}) of {len(cases)}\n")
    for number, case in enumerate(sample, 1):
        print(pin_text(case, number))
    lost = [m for t in sgd_tallies.values() for m in t.misses if m.value.cls in sgd.NAME_CLASSES]
    missed = sample_misses(lost, args.misses, args.seed)
    print(f"\n## {len(missed)} lost name cases drawn at random (seed {args.seed}) of {len(lost)}\n")
    for number, miss in enumerate(missed, 1):
        print(miss_text(miss, number))
    lost_ids = [
        m
        for t in agent_tallies.values()
        for m in t.misses
        if m.value.cls in agent_traces.ID_CLASSES
    ]
    missed_ids = sample_misses(lost_ids, min(args.misses, 10), args.seed)
    print(
        f"\n## {len(missed_ids)} lost agent-run identifier cases drawn at random "
        f"(seed {args.seed}) of {len(lost_ids)}\n"
    )
    for number, miss in enumerate(missed_ids, 1):
        print(miss_text(miss, number))
    print(f"\nelapsed {elapsed:.1f} s")
    if args.write_traces is not None:
        print(
            f"traces in {args.write_traces}/: spanguard replay "
            f"{args.write_traces}/sgd-{policies[0]}.jsonl --config "
            f"{args.write_traces}/spanguard.toml --out out.jsonl"
        )
    if args.json is not None:
        data = {
            "commit": _commit(),
            "path": str(args.path),
            "dialogues": len(dialogues),
            "turns": turns,
            "agent_sessions": len(agents),
            "seed": args.seed,
            "elapsed_s": round(elapsed, 1),
            "sgd": {p: tally_json(t) for p, t in sgd_tallies.items()},
            "agent": {p: tally_json(t) for p, t in agent_tallies.items()},
            "targets": [{"name": t.name, "value": t.value, "met": t.met} for t in targets],
            "sample": [c.to_json() for c in sample],
            "misses": [m.to_json() for m in missed],
            "agent_misses": [m.to_json() for m in missed_ids],
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0 if all(t.met for t in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
