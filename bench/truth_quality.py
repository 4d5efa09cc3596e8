"""Detection quality of the engine, judged by the independent reference model.

The simulator (``streams.sim``) makes fleets with injected faults; the engine and
the reference model (``streams.reference``, written from the contract alone) both
process every line. Printed, and written to ``bench/results/truth_quality.json``:

* **per fault kind**: what the reference reports (``(event, kind, span)``
  items), what the engine reports, how many agree, and the engine's recall and
  precision against the reference; beside it, the simulator's injections of
  that kind, how many of them the reference confirms (same session, same
  kind) and the (session, kind) pairs it reports with no such injection -- a
  check of the simulator as much as of the engine;
* **decisions and pins** that agree;
* **healthy sessions** (nothing injected): warning or critical faults the engine
  and the reference raise on them (target 0);
* **live referents and the gate**: requested spans that the reference says a
  retained span needs (what a pruner without the gate would have destroyed),
  and how many of those the engine committed anyway (target 0).

    python -m bench.truth_quality                     # 2,000 faulty + 10,000 healthy sessions
    python -m bench.truth_quality --sessions 200 --healthy 500   # quick
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas import DEFAULT_SEVERITY, FaultKind, Severity
from streams.engine.engine import Engine, Source
from streams.reference.compare import outcomes_of, semantics
from streams.reference.model import ReferenceModel
from streams.sim import SimConfig, simulate

RESULTS = Path(__file__).parent / "results" / "truth_quality.json"
CHUNK = 250
"""Sessions simulated at a time (bounded memory)."""


@dataclass(slots=True)
class Tally:
    """Everything counted over one run."""

    events: int = 0
    sessions: int = 0
    reference: Counter[str] = field(default_factory=Counter)
    engine: Counter[str] = field(default_factory=Counter)
    agreed: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    confirmed: Counter[str] = field(default_factory=Counter)
    uninjected: Counter[str] = field(default_factory=Counter)
    """(session, kind) the reference reported where no fault of that kind was injected."""
    decisions: int = 0
    decisions_agreed: int = 0
    pins_agreed: int = 0
    needed: int = 0
    needed_committed: int = 0
    serious_engine: Counter[str] = field(default_factory=Counter)
    serious_reference: Counter[str] = field(default_factory=Counter)


def _serious(kind: str) -> bool:
    return DEFAULT_SEVERITY[FaultKind(kind)] in (Severity.WARNING, Severity.CRITICAL)


def _session_of(line: bytes) -> str:
    """The line's ``session_id`` ("" for a malformed line)."""
    try:
        data = json.loads(line)
    except ValueError:
        return ""
    return str(data.get("session_id", "")) if isinstance(data, dict) else ""


def _fleets(sessions: int, seed: int, fault_rate: float) -> Iterator[Any]:
    done = 0
    chunk_seed = seed
    while done < sessions:
        size = min(CHUNK, sessions - done)
        yield simulate(
            SimConfig(sessions=size, seed=chunk_seed, fault_rate=fault_rate, max_injections=3)
        )
        done += size
        chunk_seed += 1


def run(tally: Tally, sessions: int, seed: int, fault_rate: float) -> None:
    """Simulate ``sessions`` and count both models' outcomes into ``tally``."""
    for fleet in _fleets(sessions, seed, fault_rate):
        engine = Engine()
        model = ReferenceModel()
        found: set[tuple[str, str]] = set()  # (session, kind) the reference reported
        for index, line in enumerate(fleet.lines):
            produced = semantics(outcomes_of(engine.process_raw(line, Source("sim", 0, index))))
            expected = semantics(model.process(line))
            tally.events += 1
            session = _session_of(line)
            for kind, _ in expected.faults:
                tally.reference[kind] += 1
                found.add((session, kind))
                if fault_rate == 0.0 and _serious(kind):
                    tally.serious_reference[kind] += 1
            for kind, _ in produced.faults:
                tally.engine[kind] += 1
                if fault_rate == 0.0 and _serious(kind):
                    tally.serious_engine[kind] += 1
            for kind, _ in produced.faults & expected.faults:
                tally.agreed[kind] += 1
            tally.decisions += len(expected.decisions)
            tally.decisions_agreed += len(expected.decisions) * (
                produced.decisions == expected.decisions
            )
            tally.pins_agreed += produced.pins == expected.pins and bool(expected.pins)
            committed = {s for d in produced.decisions for s in d.committed}
            tally.needed += len(expected.pins)
            tally.needed_committed += len(expected.pins & committed)
        injected: set[tuple[str, str]] = set()
        for truth in fleet.truth.sessions:
            tally.sessions += 1
            for fault in truth.faults:
                tally.injected[fault.kind] += 1
                tally.confirmed[fault.kind] += (truth.session_id, fault.kind) in found
                injected.add((truth.session_id, fault.kind))
        for _, kind in found - injected:
            tally.uninjected[kind] += 1


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "-"


def report(faulty: Tally, healthy: Tally) -> dict[str, Any]:
    """Print the tables and return the figures."""
    kinds = sorted(set(faulty.reference) | set(faulty.engine) | set(faulty.injected))
    print(f"faulty fleet: {faulty.sessions} sessions, {faulty.events} events")
    print(
        f"{'kind':30} {'reference':>9} {'engine':>7} {'agree':>6} {'recall':>7} "
        f"{'precision':>9} {'injected':>8} {'confirmed':>9} {'uninjected':>10}"
    )
    rows = {}
    for kind in kinds:
        ref, eng, both = faulty.reference[kind], faulty.engine[kind], faulty.agreed[kind]
        inj, conf, extra = faulty.injected[kind], faulty.confirmed[kind], faulty.uninjected[kind]
        rows[kind] = {
            "reference": ref,
            "engine": eng,
            "agree": both,
            "injected": inj,
            "confirmed_by_reference": conf,
            "reference_without_injection": extra,
        }
        print(
            f"{kind:30} {ref:9} {eng:7} {both:6} {_ratio(both, ref):>7} "
            f"{_ratio(both, eng):>9} {inj:8} {conf:9} {extra:10}"
        )
    print(f"decisions agreeing: {faulty.decisions_agreed}/{faulty.decisions}")
    print(
        f"requested spans a retained span needs (destroyed without the gate): "
        f"{faulty.needed}; committed by the engine: {faulty.needed_committed}"
    )
    print(f"healthy fleet: {healthy.sessions} sessions, {healthy.events} events")
    print(
        f"  warning/critical faults: engine {sum(healthy.serious_engine.values())} "
        f"{dict(healthy.serious_engine)}, reference {sum(healthy.serious_reference.values())} "
        f"{dict(healthy.serious_reference)}"
    )
    print(f"  decisions agreeing: {healthy.decisions_agreed}/{healthy.decisions}")
    return {
        "faulty": {
            "sessions": faulty.sessions,
            "events": faulty.events,
            "kinds": rows,
            "decisions": faulty.decisions,
            "decisions_agreed": faulty.decisions_agreed,
            "needed_without_gate": faulty.needed,
            "needed_committed_by_engine": faulty.needed_committed,
        },
        "healthy": {
            "sessions": healthy.sessions,
            "events": healthy.events,
            "serious_engine": dict(healthy.serious_engine),
            "serious_reference": dict(healthy.serious_reference),
            "decisions": healthy.decisions,
            "decisions_agreed": healthy.decisions_agreed,
            "needed_without_gate": healthy.needed,
            "needed_committed_by_engine": healthy.needed_committed,
        },
    }


def main() -> None:
    """Run both fleets and write ``bench/results/truth_quality.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000, help="faulty sessions")
    parser.add_argument("--healthy", type=int, default=10_000, help="healthy sessions")
    parser.add_argument("--seed", type=int, default=1400)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.monotonic()
    faulty = Tally()
    run(faulty, args.sessions, args.seed, fault_rate=1.0)
    healthy = Tally()
    run(healthy, args.healthy, args.seed + 100_000, fault_rate=0.0)
    figures = report(faulty, healthy)
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["command"] = (
        f"python -m bench.truth_quality --sessions {args.sessions} "
        f"--healthy {args.healthy} --seed {args.seed}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out} in {figures['seconds']} s")


if __name__ == "__main__":
    main()
