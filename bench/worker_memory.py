"""A real worker's memory per live session (issue 22, item 2): resident set size.

Starts a broker of its own (a temporary home, free ports), one worker on one input
partition (idle expiry off, fleet monitoring on, as shipped), and produces the
simulated fleet of :mod:`bench.memory` (``--sessions`` sessions of the default fleet,
their ``session.closed`` lines left out, so every session stays live) in halves, the
first half of the sessions to start and then the others (:func:`bench.memory.split_by_start`:
the second half moves the partition's clock on, so sessions go cold as they fall idle,
``cold_after`` as shipped; until 2026-12-04 the halves were split by session number, and
the second half, all of it behind the clock the first had reached, never moved it):
after each half, once the worker has committed every input record, it reads the
worker's ``VmRSS`` and its ``spanguard_live_sessions``. The marginal RSS per live
session is the growth from the first half to the second, divided by the sessions the
second half added (what the process holds once, its interpreter, libraries and the
engine's caches, falls out).

    .venv/bin/python -m bench.worker_memory --sessions 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.memory import TARGET_BYTES_PER_SESSION, open_session_lines, split_by_start
from bench.soak import committed, rss_mb, scrape
from spanguard.streams.app.processes import WorkerProcess, spawn_worker
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.topics import ensure_topics
from spanguard.streams.localbroker.broker import DEFAULT_HOME, LocalBroker, free_ports
from spanguard.streams.settings import load_settings

PREFIX = "wmem"
APP = "wmem-app"


def _env(bootstrap: str, home: Path, web_port: int, fleet: bool) -> dict[str, str]:
    return {
        "SPANGUARD_FLEET": f'{{"enabled": {"true" if fleet else "false"}}}',
        "SPANGUARD_BROKER": f"kafka://{bootstrap}",
        "SPANGUARD_TOPIC_PREFIX": PREFIX,
        "SPANGUARD_APP_ID": APP,
        "SPANGUARD_PARTITIONS": "1",
        "SPANGUARD_DATA_DIR": str(home / "data"),
        "SPANGUARD_WEB_ENABLED": "true",
        "SPANGUARD_WEB_PORT": str(web_port),
        "SPANGUARD_ENGINE__IDLE_TIMEOUT": "PT0S",
    }


def _wait_committed(bootstrap: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not asyncio.run(committed(bootstrap, APP, f"{PREFIX}.events", 1)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"input not committed after {timeout} s")
        time.sleep(0.5)


def _sample(worker: WorkerProcess, web_port: int, produced: int) -> dict[str, float]:
    """RSS and live sessions (the sessions produced when the worker serves no
    ``/metrics``: with fleet monitoring off)."""
    try:
        figures = scrape(web_port)
    except urllib.error.HTTPError:
        figures = {}
    return {
        "produced_sessions": produced,
        "rss_mb": rss_mb(worker.process.pid),
        "live_sessions": figures.get("spanguard_live_sessions", float(produced)),
        "cold_sessions": figures.get("spanguard_cold_sessions", 0.0),
    }


SETTLE_SECONDS = 2.5
"""Between two reads of a settled sample: longer than the fleet's tick (2 s), which
updates the live-sessions gauge."""


def _settled_sample(worker: WorkerProcess, web_port: int, produced: int) -> dict[str, float]:
    """A sample once the live-sessions gauge has caught up: it is set on the fleet's
    tick, so the read right after the input is committed may still count fewer
    sessions (the marginal RSS would then be divided by too few)."""
    sample = _sample(worker, web_port, produced)
    for _ in range(12):
        time.sleep(SETTLE_SECONDS)
        again = _sample(worker, web_port, produced)
        if again["live_sessions"] == sample["live_sessions"]:
            return again
        sample = again
    raise RuntimeError(f"live sessions still moving after committing: {sample}")


def measure(
    bootstrap: str, home: Path, sessions: int, timeout: float, fleet: bool = True
) -> dict[str, Any]:
    """Produce the fleet in halves to a fresh worker; RSS and live sessions after each."""
    lines = open_session_lines(sessions)
    half = sessions // 2
    first, second = split_by_start(lines, half)
    asyncio.run(ensure_topics(load_settings(broker=f"kafka://{bootstrap}", topic_prefix=PREFIX)))
    [web_port] = free_ports(1)
    worker = spawn_worker("wmem", _env(bootstrap, home, web_port, fleet), home / "worker.log")
    samples = []
    try:
        worker.wait_ready(timeout=120)
        samples.append(_sample(worker, web_port, 0))
        for produced, part in ((half, first), (sessions, second)):
            asyncio.run(produce_lines(bootstrap, f"{PREFIX}.events", part))
            _wait_committed(bootstrap, timeout)
            samples.append(_settled_sample(worker, web_port, produced))
    finally:
        worker.stop()
    grown = (samples[2]["rss_mb"] - samples[1]["rss_mb"]) * 1024 * 1024
    added = samples[2]["live_sessions"] - samples[1]["live_sessions"]
    marginal = grown / added if added > 0 else float("nan")
    return {
        "sessions": sessions,
        "fleet": fleet,
        "events": len(lines),
        "samples": samples,
        "marginal_rss_bytes_per_session": round(marginal),
        "target": TARGET_BYTES_PER_SESSION,
        "met": marginal <= TARGET_BYTES_PER_SESSION,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Start a broker of its own, measure, stop it, print the figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.worker_memory", description=__doc__)
    parser.add_argument("--sessions", type=int, default=2_000, help="simulated sessions")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per half")
    parser.add_argument("--no-fleet", action="store_true", help="fleet monitoring off")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spanguard-wmem-", ignore_cleanup_errors=True) as tmp:
        home = Path(tmp)
        port, controller = free_ports(2)
        broker = LocalBroker(
            home=home / "kafka",
            port=port,
            controller_port=controller,
            lib_dir=DEFAULT_HOME / "lib",
            stop_with_parent=True,
        )
        broker.fetch()
        bootstrap = broker.start(timeout=120)
        try:
            report = measure(bootstrap, home, args.sessions, args.timeout, not args.no_fleet)
        finally:
            broker.stop()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
