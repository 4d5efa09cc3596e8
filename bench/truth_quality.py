"""Detection quality of the engine, judged by the independent reference model.

The simulator (``spanguard.streams.sim``) makes fleets with injected faults; the engine and
the reference model (``spanguard.streams.reference``, written from the contract alone) both
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
import multiprocessing
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanguard.schemas import DEFAULT_SEVERITY, FaultKind, Severity
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.reference.compare import outcomes_of, semantics
from spanguard.streams.reference.model import ReferenceModel
from spanguard.streams.sim import SimConfig, simulate

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
    detected: Counter[str] = field(default_factory=Counter)
    """Injected faults the engine raised at exactly their event (recall vs the injections)."""
    engine_pairs: Counter[str] = field(default_factory=Counter)
    """(session, kind) pairs the engine raised."""
    engine_uninjected: Counter[str] = field(default_factory=Counter)
    """...of which no fault of that kind was injected in the session."""
    decisions: int = 0
    decisions_agreed: int = 0
    pins_agreed: int = 0
    needed: int = 0
    needed_committed: int = 0
    requests_needing: int = 0
    """Eviction requests that would have destroyed a live referent without the gate."""
    requests_needing_harmed: int = 0
    """...of which the engine's decision still committed a needed span."""
    serious_engine: Counter[str] = field(default_factory=Counter)
    serious_reference: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        """Add ``other``'s counts to these."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _serious(kind: str) -> bool:
    return DEFAULT_SEVERITY[FaultKind(kind)] in (Severity.WARNING, Severity.CRITICAL)


def _identity(line: bytes) -> tuple[str, str]:
    """The line's ``session_id`` and ``event_id`` ("" for a malformed line)."""
    try:
        data = json.loads(line)
    except ValueError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("session_id", "")), str(data.get("event_id", ""))


def _chunks(sessions: int, seed: int, fault_rate: float, long_every: int) -> list[SimConfig]:
    """The fleet as configurations of at most :data:`CHUNK` sessions (bounded memory)."""
    return [
        SimConfig(
            sessions=min(CHUNK, sessions - done),
            seed=seed + index,
            fault_rate=fault_rate,
            max_injections=3,
            long_every=long_every,
        )
        for index, done in enumerate(range(0, sessions, CHUNK))
    ]


def run(tally: Tally, configs: list[SimConfig], jobs: int) -> None:
    """Simulate every chunk (``jobs`` processes) and add both models' counts to ``tally``."""
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for counted in pool.imap(_count, configs):
            tally.add(counted)


def _count(config: SimConfig) -> Tally:
    """Simulate one chunk and count both models' outcomes."""
    tally = Tally()
    fault_rate = config.fault_rate
    fleet = simulate(config)
    engine = Engine()
    model = ReferenceModel()
    found: set[tuple[str, str]] = set()  # (session, kind) the reference reported
    raised: set[tuple[str, str]] = set()  # (session, kind) the engine raised
    raised_at: set[tuple[str, str]] = set()  # (event id, kind) the engine raised
    for index, line in enumerate(fleet.lines):
        produced = semantics(outcomes_of(engine.process_raw(line, Source("sim", 0, index))))
        expected = semantics(model.process(line))
        tally.events += 1
        session, event_id = _identity(line)
        for kind, _ in expected.faults:
            tally.reference[kind] += 1
            found.add((session, kind))
            if fault_rate == 0.0 and _serious(kind):
                tally.serious_reference[kind] += 1
        for kind, _ in produced.faults:
            tally.engine[kind] += 1
            raised.add((session, kind))
            raised_at.add((event_id, kind))
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
        tally.requests_needing += bool(expected.pins) and bool(expected.decisions)
        tally.requests_needing_harmed += bool(expected.pins & committed)
    injected: set[tuple[str, str]] = set()
    for truth in fleet.truth.sessions:
        tally.sessions += 1
        for fault in truth.faults:
            tally.injected[fault.kind] += 1
            tally.confirmed[fault.kind] += (truth.session_id, fault.kind) in found
            tally.detected[fault.kind] += (fault.at_event_id, fault.kind) in raised_at
            injected.add((truth.session_id, fault.kind))
    for _, kind in found - injected:
        tally.uninjected[kind] += 1
    for _, kind in raised:
        tally.engine_pairs[kind] += 1
    for _, kind in raised - injected:
        tally.engine_uninjected[kind] += 1

    return tally


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "-"


def report(faulty: Tally, healthy: Tally) -> dict[str, Any]:
    """Print the tables and return the figures."""
    kinds = sorted(set(faulty.reference) | set(faulty.engine) | set(faulty.injected))
    print(f"faulty fleet: {faulty.sessions} sessions, {faulty.events} events")
    print("against the injections (the truth file): recall = injected faults the engine")
    print("raised at their event; precision = (session, kind) the engine raised that were injected")
    print(
        f"{'kind':30} {'injected':>8} {'found':>6} {'recall':>7} {'raised':>7} "
        f"{'precision':>9} | {'reference':>9} {'engine':>7} {'agree':>6} {'recall':>7} "
        f"{'precision':>9}"
    )
    rows = {}
    for kind in kinds:
        ref, eng, both = faulty.reference[kind], faulty.engine[kind], faulty.agreed[kind]
        inj, hit = faulty.injected[kind], faulty.detected[kind]
        pairs, stray = faulty.engine_pairs[kind], faulty.engine_uninjected[kind]
        rows[kind] = {
            "injected": inj,
            "engine_found_at_event": hit,
            "engine_pairs": pairs,
            "engine_pairs_without_injection": stray,
            "reference": ref,
            "engine": eng,
            "agree": both,
            "confirmed_by_reference": faulty.confirmed[kind],
            "reference_without_injection": faulty.uninjected[kind],
        }
        print(
            f"{kind:30} {inj:8} {hit:6} {_ratio(hit, inj):>7} {pairs:7} "
            f"{_ratio(pairs - stray, pairs):>9} | {ref:9} {eng:7} {both:6} "
            f"{_ratio(both, ref):>7} {_ratio(both, eng):>9}"
        )
    print("(right: (event, kind, span) items against the reference model, written from the")
    print(" contract; a rewrite that drops two referents is one injection and two items)")
    print(f"decisions agreeing: {faulty.decisions_agreed}/{faulty.decisions}")
    print(
        f"live-referent evictions: without the gate {faulty.requests_needing} requests, "
        f"{faulty.needed} spans; with the gate (the engine) "
        f"{faulty.requests_needing_harmed} requests, {faulty.needed_committed} spans"
    )
    print(f"healthy fleet: {healthy.sessions} sessions, {healthy.events} events")
    print(
        f"  warning/critical faults: engine {sum(healthy.serious_engine.values())} "
        f"{dict(healthy.serious_engine)}, reference {sum(healthy.serious_reference.values())} "
        f"{dict(healthy.serious_reference)}"
    )
    print(f"  decisions agreeing: {healthy.decisions_agreed}/{healthy.decisions}")
    print(
        f"  live-referent evictions: without the gate {healthy.requests_needing} requests, "
        f"{healthy.needed} spans; with the gate {healthy.requests_needing_harmed} requests, "
        f"{healthy.needed_committed} spans"
    )
    return {
        "faulty": {
            "sessions": faulty.sessions,
            "events": faulty.events,
            "kinds": rows,
            "decisions": faulty.decisions,
            "decisions_agreed": faulty.decisions_agreed,
            "needed_without_gate": faulty.needed,
            "needed_committed_by_engine": faulty.needed_committed,
            "requests_needing_without_gate": faulty.requests_needing,
            "requests_needing_committed_by_engine": faulty.requests_needing_harmed,
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
            "requests_needing_without_gate": healthy.requests_needing,
            "requests_needing_committed_by_engine": healthy.requests_needing_harmed,
        },
    }


def main() -> None:
    """Run both fleets and write ``bench/results/truth_quality.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000, help="faulty sessions")
    parser.add_argument("--healthy", type=int, default=10_000, help="healthy sessions")
    parser.add_argument("--seed", type=int, default=1400)
    parser.add_argument(
        "--long-every", type=int, default=250, help="every Nth faulty session runs 500+ turns"
    )
    parser.add_argument(
        "--healthy-long-every", type=int, default=1000, help="the same in the healthy fleet"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--jobs", type=int, default=2, help="processes (chunks in parallel)")
    args = parser.parse_args()
    started = time.monotonic()
    faulty = Tally()
    run(faulty, _chunks(args.sessions, args.seed, 1.0, args.long_every), args.jobs)
    healthy = Tally()
    healthy_fleet = _chunks(args.healthy, args.seed + 100_000, 0.0, args.healthy_long_every)
    run(healthy, healthy_fleet, args.jobs)
    figures = report(faulty, healthy)
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["command"] = (
        f"python -m bench.truth_quality --sessions {args.sessions} "
        f"--healthy {args.healthy} --seed {args.seed} --long-every {args.long_every} "
        f"--healthy-long-every {args.healthy_long_every}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out} in {figures['seconds']} s")


if __name__ == "__main__":
    main()
