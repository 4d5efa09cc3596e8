"""The traces the golden-output test replays, and how their outputs are produced.

Every trace the repository has: the example traces (``examples/*.jsonl``), the
scenario fleet built from the hand-written sessions, and 200 simulated
sessions. The simulated input is checked in (``inputs/sim-200.jsonl.gz``) rather
than generated at test time, so that a change to the simulator cannot move the
baseline that proves the engine's outputs unchanged.

Regenerate the checked-in outputs (only for a deliberate behaviour change, in
its own commit) with ``python -m tests.golden.regenerate``.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.sim import SimConfig
from spanguard.streams.sim.scenarios import demo_fleet

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
INPUTS = HERE / "inputs"
OUTPUTS = HERE / "outputs"
SIM_FLEETS: dict[str, SimConfig] = {
    "sim-200": SimConfig(sessions=200),
    # Contract 1.1's summary faults, injected into every session.
    "sim-summaries-40": SimConfig(
        sessions=40,
        seed=11,
        fault_rate=1.0,
        faults=(("SUMMARY_BALLOONING", 1), ("EMPTY_SUMMARY", 1)),
    ),
}
"""The simulated fleets whose input is checked in (``inputs/<name>.jsonl.gz``)."""


def _split(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def golden_traces() -> dict[str, list[bytes]]:
    """Name -> input lines, for every trace the golden test covers."""
    traces: dict[str, list[bytes]] = {}
    for path in sorted((ROOT / "examples").glob("*.jsonl")):
        traces[f"examples-{path.stem}"] = _split(path.read_bytes())
    traces["scenarios-demo-fleet"] = demo_fleet(12)
    for path in sorted(INPUTS.glob("*.jsonl.gz")):
        traces[path.name.removesuffix(".jsonl.gz")] = _split(gzip.decompress(path.read_bytes()))
    return traces


def replay(lines: Iterable[bytes], settings: EngineSettings | None = None) -> list[bytes]:
    """Every output of a fresh engine over ``lines``, as the bytes written to Kafka."""
    engine = Engine(settings)
    return [
        encode_output(output)
        for offset, line in enumerate(lines)
        for output in engine.process_raw(line, Source("spanguard.events", 0, offset))
    ]


def output_path(name: str) -> Path:
    """Where the checked-in outputs of trace ``name`` live."""
    return OUTPUTS / f"{name}.jsonl"


def read_outputs(name: str) -> list[bytes]:
    """The checked-in outputs of trace ``name``."""
    return _split(output_path(name).read_bytes())


def replay_with_restores(lines: list[bytes], cadence: int, cuts: Iterable[int]) -> list[bytes]:
    """Like :func:`replay`, but draining state records every ``cadence`` events into a
    compacted changelog, and at each cut (a multiple of ``cadence``) continuing with
    a fresh engine restored from it, as a worker that took the partition over would."""
    cut_at = set(cuts)
    assert all(c % cadence == 0 for c in cut_at), "cuts are drain points"
    changelog: dict[bytes, bytes] = {}
    engine = Engine(track_changes=True)
    outputs: list[bytes] = []
    for offset, line in enumerate(lines):
        if offset in cut_at:
            engine = Engine(track_changes=True)
            engine.restore(changelog.items())
        source = Source("spanguard.events", 0, offset)
        outputs.extend(encode_output(o) for o in engine.process_raw(line, source))
        if (offset + 1) % cadence == 0:
            for key, value in engine.drain_changes():
                if value is None:
                    changelog.pop(key, None)
                else:
                    changelog[key] = value
    return outputs
