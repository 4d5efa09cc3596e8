"""What fleet monitoring costs the data path, measured side by side in one run.

Run from the project root::

    .venv/bin/python -m bench.fleet_combiner

1. **Per-record cost of the fleet hook.** A simulated fleet (300 sessions, 40
   events each) through ``Engine.process_raw`` alone, then with
   :class:`~spanguard.streams.fleet.combiner.FleetCombiner` observing every record and
   draining its partials every 500 records (a checkpoint); CPU time
   (``time.process_time``: the machine is shared), median of 5 runs each,
   interleaved. Prints the ratio and the hook's microseconds per record.
2. **What goes on ``<prefix>.fleet``.** The same fleet through the real runtime
   on the in-memory broker (exactly-once, checkpoints every 500 records): the
   partial records and bytes against the outputs'.

Results go to ``bench/results/fleet_combiner.json``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.fleet.combiner import FleetCombiner, partition_cycles
from spanguard.streams.fleet.metrics import FleetMetrics
from spanguard.streams.fleet.recent import RecentRecords
from spanguard.streams.runtime.memory import MemoryTransport
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.runtime.testing import RuntimeTestDriver
from spanguard.streams.sim import SimConfig, simulate

RESULTS = Path(__file__).resolve().parent / "results" / "fleet_combiner.json"
CHECKPOINT = 500
RUNS = 5


def _once(lines: list[bytes], hooked: bool) -> float:
    engine = Engine()
    combiner = (
        FleetCombiner(
            60.0, FleetMetrics(50), RecentRecords(64, 2000), partition_cycles(lambda _p: engine)
        )
        if hooked
        else None
    )
    started = time.process_time()
    for offset, line in enumerate(lines):
        outputs = engine.process_raw(line, Source("bench", 0, offset))
        if combiner is not None:
            combiner.observe(0, line, outputs)
            if offset % CHECKPOINT == CHECKPOINT - 1:
                combiner.partials(0)
    return time.process_time() - started


class _Driver(RuntimeTestDriver):
    def new_runtime(self) -> tuple[Runtime, MemoryTransport]:
        self.fleet = FleetCombiner(60.0, FleetMetrics(50), RecentRecords(64, 2000))
        return super().new_runtime()


async def _volume(lines: list[bytes]) -> dict[str, int]:
    driver = _Driver(exactly_once=True, batch_size=CHECKPOINT, commit_every=CHECKPOINT)
    driver.produce(lines)
    await driver.run()
    partials = driver.broker.read_committed("fleet")
    outputs = driver.outputs()
    return {
        "inputs": len(lines),
        "outputs": len(outputs),
        "output_bytes": sum(map(len, outputs)),
        "partials": len(partials),
        "partial_bytes": sum(map(len, partials)),
    }


def main() -> None:
    """Measure, print, write ``bench/results/fleet_combiner.json``."""
    lines = simulate(SimConfig(sessions=300, seed=7, events_per_session=40)).lines
    bare, hooked = [], []
    for _ in range(RUNS):
        bare.append(_once(lines, hooked=False))
        hooked.append(_once(lines, hooked=True))
    engine_s, with_hook_s = statistics.median(bare), statistics.median(hooked)
    per_record_us = (with_hook_s - engine_s) / len(lines) * 1e6
    volume = asyncio.run(_volume(lines))
    result = {
        "records": len(lines),
        "engine_seconds": round(engine_s, 4),
        "engine_with_combiner_seconds": round(with_hook_s, 4),
        "ratio": round(with_hook_s / engine_s, 3),
        "combiner_us_per_record": round(per_record_us, 2),
        "engine_us_per_record": round(engine_s / len(lines) * 1e6, 2),
        **volume,
    }
    print(
        f"{len(lines)} records: engine {engine_s:.3f}s, with the fleet hook {with_hook_s:.3f}s "
        f"(x{result['ratio']}); the hook costs {per_record_us:.1f} us/record "
        f"(engine {result['engine_us_per_record']} us/record)"
    )
    print(
        f"<prefix>.fleet: {volume['partials']} partial records ({volume['partial_bytes']:,} B) "
        f"for {volume['outputs']} outputs ({volume['output_bytes']:,} B) of "
        f"{volume['inputs']} inputs, checkpoints every {CHECKPOINT} records"
    )
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
