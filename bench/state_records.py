"""State records per input event: what the changelog costs the engine.

The runtime keeps one ``Engine(track_changes=True)`` per input partition and
writes ``drain_changes()`` to a compacted changelog at every checkpoint. This
prints, on the simulator's workload (200 sessions, interleaved), the records and
bytes per input event when draining after every event (the worst case) and
every 10 events; and, for one session grown to 100 and to 10,000 spans, the
bytes per event of its next 200 events (flat in the session's size)::

    python -m bench.state_records [--sessions 200] [--output bench/results/state_records.json]
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.sim import SimConfig, simulate

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_RECORDS = 2.5
TARGET_FLAT = 1.1


def drained(lines: Sequence[bytes], every: int) -> dict[str, Any]:
    """Records and bytes per event with a drain every ``every`` events."""
    engine = Engine(track_changes=True)
    records = size = 0
    kinds: collections.Counter[str] = collections.Counter()
    for offset, line in enumerate(lines):
        engine.process_raw(line, Source("bench", 0, offset))
        if (offset + 1) % every == 0 or offset == len(lines) - 1:
            for key, value in engine.drain_changes():
                records += 1
                size += len(key) + len(value or b"")
                kinds[orjson.loads(key)[2]] += 1
    return {
        "drain_every": every,
        "events": len(lines),
        "records": records,
        "records_per_event": records / len(lines),
        "bytes_per_event": size / len(lines),
        "records_by_kind": dict(sorted(kinds.items())),
    }


def per_event_bytes(size: int, events: int = 200) -> dict[str, Any]:
    """A session grown to ``size`` spans, then ``events`` more of a turn-scoring cycle
    (add, add, score, evict), drained after each: bytes and records per event."""
    engine = Engine(track_changes=True)
    s = SessionScript(f"size-{size:05d}")  # ids of one length for both sizes
    for i in range(size):
        s.add(f"a{i:05d}", f"turn {i} about account A-{i:05d}")
    s.score(*[(f"a{i:05d}", 0.5 + (i % 7) / 100) for i in range(size)])
    for offset, line in enumerate(s.lines()):
        engine.process_raw(line, Source("bench", 0, offset))
    engine.drain_changes()
    first = len(s.raw)
    cycle = 0
    while len(s.raw) - first < events:
        a, b = f"n{cycle:05d}a", f"n{cycle:05d}b"
        s.add(a, f"new turn {cycle} about account A-{cycle:05d}")
        s.add(b, f"reply {cycle}")
        s.score((a, 0.9), (b, 0.1))
        s.evict([b])
        cycle += 1
    records = size_bytes = 0
    for offset, line in enumerate(s.lines()[first : first + events], start=first):
        engine.process_raw(line, Source("bench", 0, offset))
        for key, value in engine.drain_changes():
            records += 1
            size_bytes += len(key) + len(value or b"")
    return {
        "spans": size,
        "events": events,
        "records_per_event": records / events,
        "bytes_per_event": size_bytes / events,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run, print, write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--output", type=Path, default=RESULTS / "state_records.json")
    args = parser.parse_args(argv)
    lines = simulate(SimConfig(sessions=args.sessions)).lines
    cadences = [drained(lines, every) for every in (1, 10)]
    small, large = per_event_bytes(100), per_event_bytes(10_000)
    flat = large["bytes_per_event"] / small["bytes_per_event"]
    report = {
        "workload": f"simulator, {args.sessions} sessions ({len(lines)} events)",
        "cadences": cadences,
        "target_records_per_event": TARGET_RECORDS,
        "records_met": cadences[0]["records_per_event"] <= TARGET_RECORDS,
        "session_size": {"small": small, "large": large, "bytes_ratio": flat},
        "flat_met": flat <= TARGET_FLAT,
    }
    for c in cadences:
        print(
            f"drain every {c['drain_every']:>2} event(s): "
            f"{c['records_per_event']:.2f} records/event, "
            f"{c['bytes_per_event']:.0f} bytes/event  {c['records_by_kind']}"
        )
    print(
        f"target <= {TARGET_RECORDS} records/event (drained after every event): "
        f"{'met' if report['records_met'] else 'NOT met'}"
    )
    for row in (small, large):
        print(
            f"{row['spans']:>6}-span session: {row['records_per_event']:.2f} records/event, "
            f"{row['bytes_per_event']:.0f} bytes/event"
        )
    print(
        f"10,000 vs 100 spans: {flat:.3f}x bytes/event (target <= {TARGET_FLAT}x): "
        f"{'met' if report['flat_met'] else 'NOT met'}"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
