"""The compacted changelog of 100,000 live spans: records, bytes per span, restore time.

100 sessions of 1,000 scored spans (the mixed workload's texts), drained every 50 events
into a compacted changelog (latest value per key, tombstones removed), then restored into
a fresh engine (CPU time)::

    python -m bench.state_stored
"""

from __future__ import annotations

import random
import time

from bench.engine.text import TOOL_TEMPLATES, USER_TEMPLATES, TextGen
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript, interleave

SESSIONS = 100
SPANS = 1_000


def main() -> None:
    """Build, drain, compact, restore; print the figures."""
    gen = TextGen(random.Random(5))
    templates = (USER_TEMPLATES, TOOL_TEMPLATES)
    scripts = []
    for n in range(SESSIONS):
        s = SessionScript(f"mem-{n:04d}", tenant=f"tenant-{n % 4}")
        for i in range(SPANS):
            if i % 3 == 0:
                s.next_turn()
            s.add(f"s{i:05d}", gen.text(templates[i % 2]))
        for start in range(0, SPANS, 250):
            s.score(*[(f"s{i:05d}", 0.1 + (i % 9) / 10) for i in range(start, start + 250)])
        scripts.append(s)
    engine = Engine(track_changes=True)
    log: dict[bytes, bytes] = {}

    def drain() -> None:
        for key, value in engine.drain_changes():
            if value is None:
                log.pop(key, None)
            else:
                log[key] = value

    for offset, line in enumerate(interleave(scripts)):
        engine.process_raw(line, Source("bench", 0, offset))
        if offset % 50 == 49:
            drain()
    drain()
    size = sum(len(k) + len(v) for k, v in log.items())
    spans = SESSIONS * SPANS
    started = time.process_time()
    restored = Engine(track_changes=True).restore(list(log.items()))
    seconds = time.process_time() - started
    print(f"{len(log):,} records, {size:,} bytes: {size / spans:.0f} B per live span")
    print(f"restore: {restored} sessions in {seconds:.2f} s CPU")


if __name__ == "__main__":
    main()
