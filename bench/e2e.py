"""End-to-end benchmarks on the project's local Kafka broker, side by side in one run.

    .venv/bin/python -m bench.e2e            # full run (several minutes)
    .venv/bin/python -m bench.e2e --quick    # small smoke run
    .venv/bin/python -m bench.e2e --latency-only 3   # the gate's latency, 3 runs each
    .venv/bin/python -m bench.e2e --latency-only 2 --baseline /tmp/base
        # ... and, run for run alternately, the workers of another checkout (e.g. a git
        # worktree of the commit before a change): before and after on one broker
    .venv/bin/python -m bench.e2e --gate-tail --baseline /tmp/base
        # issue 26's table in one command (bench/gate_tail.py): at-least-once at 1,000
        # and 2,000 events/s and at half capacity, disk and tmpfs, before and after,
        # each row with the broker's floor; exactly-once against its commit interval
        # and the transactions/s it costs; the targets met or not met

1. a raw aiokafka consume->produce passthrough of the same records on the same
   broker (L0), and against it: the worker as shipped (fleet monitoring on; target
   >= 0.20), with fleet monitoring off, as 2 processes, and the runtime alone with
   the engine replaced by a stub that replays the real engine's outputs and state
   changes (target >= 0.5);
2. state records written per input event (target <= 2.5) and changelog bytes;
3. gate latency from ``eviction.requested`` produced to ``eviction.decided``
   consumed over 1,000 live sessions, p50/p95/p99, at-least-once and exactly-once, at
   1,000 events/s (target p99 <= 50 ms) and at half the measured capacity (target
   p99 <= 250 ms), with the broker floor measured alongside; once with the broker's
   log on disk and once on tmpfs (``/dev/shm``), since this VM's disk stalls the
   broker's appends during writeback;
4. the time a fresh worker needs from start to ready with N sessions in the changelog.

Results: ``bench/results/e2e.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.fuzz import garbage_mix
from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.streams.app.processes import WorkerProcess, spawn_worker
from spanguard.streams.app.topology import runtime_config
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.kafka_io.keys import session_key
from spanguard.streams.kafka_io.outputs import OutputReader
from spanguard.streams.kafka_io.partitioning import partition_for
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.topics import create_topics, ensure_topics
from spanguard.streams.localbroker.broker import DEFAULT_HOME, LocalBroker, free_ports
from spanguard.streams.runtime.config import changelog_topic
from spanguard.streams.runtime.kafka_transport import KafkaTransport
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.settings import load_settings
from spanguard.streams.sim.scenarios import demo_fleet

RESULTS = Path(__file__).resolve().parent / "results"


def save_results(name: str, results: object) -> None:
    """Write ``results`` as bench/results/<name> (JSON) and say so."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote bench/results/{name}")


PARTITIONS = 4


class Bench:
    """A broker of its own and fresh topic prefixes for each measurement."""

    def __init__(self, home: Path) -> None:
        port, controller = free_ports(2)
        self.home = home
        self.broker = LocalBroker(
            home=home / "kafka",
            port=port,
            controller_port=controller,
            lib_dir=DEFAULT_HOME / "lib",
            stop_with_parent=True,
        )
        self.bootstrap = ""
        self.runs = 0
        self.log_medium = "tmpfs" if _on_tmpfs(home) else "disk"
        """Where the broker's log lives: the VM's disk stalls appends for 50-200 ms
        during writeback (BENCHMARKS.md), so the latency is measured on both."""

    def __enter__(self) -> Bench:
        self.broker.fetch()
        self.bootstrap = self.broker.start(timeout=120)
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker.stop()

    def prefix(self, name: str) -> str:
        self.runs += 1
        return f"b{self.runs}-{name}"

    def env(self, prefix: str, name: str, **extra: str) -> dict[str, str]:
        return {
            "SPANGUARD_BROKER": f"kafka://{self.bootstrap}",
            "SPANGUARD_TOPIC_PREFIX": prefix,
            "SPANGUARD_APP_ID": f"{prefix}-app",
            "SPANGUARD_PARTITIONS": str(PARTITIONS),
            "SPANGUARD_DATA_DIR": str(self.home / f"data-{prefix}-{name}"),
            "SPANGUARD_WEB_ENABLED": "false",
            "SPANGUARD_SESSION_TIMEOUT": "6",
            **extra,
        }

    def workers(
        self, prefix: str, count: int, tree: Path | None = None, **extra: str
    ) -> list[WorkerProcess]:
        """Start ``count`` workers (of the checkout ``tree``, this one by default)."""
        started = [
            spawn_worker(
                f"w{i}",
                self.env(prefix, f"w{i}", **extra),
                self.home / f"{prefix}-w{i}.log",
                cwd=tree,
            )
            for i in range(count)
        ]
        try:
            for worker in started:
                worker.wait_ready()
        except BaseException:  # none left running behind a failed bench
            for worker in started:
                worker.kill()
            raise
        return started

    async def topics(self, prefix: str) -> None:
        settings = load_settings(
            broker=f"kafka://{self.bootstrap}", topic_prefix=prefix, partitions=PARTITIONS
        )
        await ensure_topics(settings)


def web_env() -> dict[str, str]:
    """A worker's environment that serves ``/readyz`` on a free port: readiness read the
    same way for this checkout and an older one (f9da150's worker logs no ready line
    with the web server off)."""
    [port] = free_ports(1)
    return {"SPANGUARD_WEB_ENABLED": "true", "SPANGUARD_WEB_PORT": str(port)}


MEMORY_DIR = Path("/dev/shm")
"""A tmpfs on Linux: the second broker of the latency measurement keeps its log here."""


def _on_tmpfs(path: Path) -> bool:
    """Whether ``path`` lies on a tmpfs (the deepest mount point that holds it)."""
    mounts = Path("/proc/mounts")
    if not mounts.is_file():
        return False
    resolved = path.resolve()
    holding = [
        (len(point), kind)
        for _, point, kind, *_ in (line.split() for line in mounts.read_text().splitlines())
        if resolved.is_relative_to(point)
    ]
    return bool(holding) and max(holding)[1] == "tmpfs"


@contextlib.contextmanager
def fresh_bench(parent: Path | None = None) -> Iterator[Bench]:
    """A broker of its own in a new temporary home under ``parent`` (the system's
    temporary directory by default), removed afterwards."""
    with (
        tempfile.TemporaryDirectory(
            prefix="spanguard-bench-", dir=parent, ignore_cleanup_errors=True
        ) as tmp,
        Bench(Path(tmp)) as bench,
    ):
        yield bench


def expected_outputs(lines: list[bytes]) -> int:
    engine = Engine()
    return sum(len(engine.process_raw(line, Source("b", 0, i))) for i, line in enumerate(lines))


async def wait_outputs(bootstrap: str, prefix: str, count: int, timeout: float) -> list[int]:
    """Timestamps (ms, producer time) of the first ``count`` output records."""
    topics = [f"{prefix}.{s}" for s in OUTPUT_SUFFIXES if s != "alerts"]
    stamps: list[int] = []
    deadline = time.monotonic() + timeout
    async with OutputReader(bootstrap, topics) as reader:
        while len(stamps) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(stamps)}/{count} outputs after {timeout}s")
            stamps.extend(r.timestamp_ms for r in await reader.poll(timeout_ms=500))
    return stamps


def worker_throughput(
    bench: Bench,
    lines: list[bytes],
    workers: int,
    label: str,
    tree: Path | None = None,
    **extra: str,
) -> dict[str, Any]:
    """Start the workers (of the checkout ``tree``, this one by default; their group
    settled), produce the records as fast as the producer goes, time first to last
    output; count the state records the run wrote to the changelog."""
    prefix = bench.prefix(label)
    asyncio.run(bench.topics(prefix))
    expected = expected_outputs(lines)
    started = bench.workers(prefix, workers, tree, **extra)
    try:
        time.sleep(1)  # the last member's join settles the assignment
        t0 = time.time()
        asyncio.run(produce_lines(bench.bootstrap, f"{prefix}.events", lines))
        stamps = asyncio.run(wait_outputs(bench.bootstrap, prefix, expected, timeout=900))
        span = (max(stamps) - min(stamps)) / 1000
        wall = time.time() - t0
    finally:
        for worker in started:
            worker.stop()
    records, size = asyncio.run(topic_totals(bench.bootstrap, changelog_topic(f"{prefix}-app")))
    return {
        "label": label,
        "worker": "current" if tree is None else str(tree),
        "workers": workers,
        "events": len(lines),
        "outputs": expected,
        "seconds_first_to_last_output": round(span, 3),
        "events_per_s": round(len(lines) / span),
        "wall_s_from_ready": round(wall, 2),
        "state_records_per_event": round(records / len(lines), 3),
        "changelog_bytes_per_event": round(size / len(lines), 1),
    }


def garbage_mix_ratio(bench: Bench, lines: list[bytes]) -> dict[str, Any]:
    """One worker on the clean stream and on the same stream with 10% garbage
    (every garbage record a dead letter): events/s of each and their ratio (issue
    target: the mix at >= 0.8 of the clean stream)."""
    mixed, garbage = garbage_mix(lines, share=0.1, too_large=False)
    off = '{"enabled": false}'
    clean = worker_throughput(bench, lines, 1, "clean", SPANGUARD_FLEET=off)
    dirty = worker_throughput(bench, mixed, 1, "garbage", SPANGUARD_FLEET=off)
    return {
        "clean_events_per_s": clean["events_per_s"],
        "mixed_events_per_s": dirty["events_per_s"],
        "garbage_records": len(garbage),
        "ratio": round(dirty["events_per_s"] / clean["events_per_s"], 3),
        "target": 0.8,
    }


async def topic_totals(bootstrap: str, topic: str) -> tuple[int, int]:
    """(records, key + value bytes) of every committed record of ``topic``."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(parts)  # before assign(): see read_changelog
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        count = size = 0
        for tp in parts:
            while await consumer.position(tp) < ends[tp]:
                batch = await consumer.getmany(tp, timeout_ms=500, max_records=10_000)
                for r in batch.get(tp, ()):
                    count += 1
                    size += len(r.key or b"") + len(r.value or b"")
        return count, size
    finally:
        await consumer.stop()


def _transport(bench: Bench, prefix: str) -> KafkaTransport:
    """The worker's transport for ``prefix`` (fleet monitoring off)."""
    settings = load_settings(
        broker=f"kafka://{bench.bootstrap}",
        topic_prefix=prefix,
        app_id=f"{prefix}-app",
        partitions=PARTITIONS,
        fleet={"enabled": False},
    )
    return KafkaTransport(
        bench.bootstrap, runtime_config(settings), settings.app_id, partitions=PARTITIONS
    )


class ReplayedEngine(Engine):
    """An engine stub: for each input it returns the outputs, and records the state
    changes, that the real engine made of it, at the cost of a dict lookup, so the
    runtime is measured without the engine's work."""

    def __init__(self, script: dict[bytes, tuple[list[Any], list[tuple[bytes, bytes | None]]]]):
        super().__init__(track_changes=True)
        self._script = script
        self._changes: list[tuple[bytes, bytes | None]] = []

    def process_raw(self, raw: bytes | None, source: Source) -> list[Any]:
        outputs, changes = self._script[raw or b""]
        self._changes.extend(changes)
        return outputs

    def drain_changes(self) -> list[tuple[bytes, bytes | None]]:
        changes, self._changes = self._changes, []
        return changes


async def runtime_alone(bench: Bench, lines: list[bytes]) -> dict[str, Any]:
    """The data path in process (aiokafka transport, real runtime), engine stubbed."""
    real = Engine(track_changes=True)
    script = {}
    for i, line in enumerate(lines):
        outputs = real.process_raw(line, Source("b", 0, i))
        script[line] = (outputs, real.drain_changes())
    prefix = bench.prefix("stub")
    await bench.topics(prefix)
    await produce_lines(bench.bootstrap, f"{prefix}.events", lines)
    transport = _transport(bench, prefix)
    runtime = Runtime(
        transport.config,
        transport,
        load_settings().engine,
        engine_factory=lambda _: ReplayedEngine(script),
    )
    await transport.start(runtime.assign, runtime.revoke)
    try:
        while not runtime.assigned.is_set():
            await runtime.step()
        started = time.perf_counter()
        while runtime.stats.processed < len(lines):
            await runtime.step()
        await runtime.close()
        elapsed = time.perf_counter() - started
    finally:
        await transport.stop()
    return {
        "events": len(lines),
        "seconds": round(elapsed, 3),
        "events_per_s": round(len(lines) / elapsed),
        "outputs": runtime.stats.outputs,
        "state_records": runtime.stats.state_records,
    }


async def passthrough(bench: Bench, lines: list[bytes]) -> dict[str, Any]:
    """The same records through a raw aiokafka consume -> produce loop."""
    prefix = bench.prefix("raw")
    await bench.topics(prefix)
    await produce_lines(bench.bootstrap, f"{prefix}.events", lines)
    consumer = AIOKafkaConsumer(
        f"{prefix}.events",
        bootstrap_servers=bench.bootstrap,
        group_id=f"{prefix}-raw",
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=bench.bootstrap, acks="all", enable_idempotence=True
    )
    await consumer.start()
    await producer.start()
    seen = 0
    started = None
    try:
        while seen < len(lines):
            batch = await consumer.getmany(timeout_ms=500, max_records=2000)
            futures = []
            for records in batch.values():
                for r in records:
                    started = started or time.perf_counter()
                    futures.append(await producer.send(f"{prefix}.faults", r.value, key=r.key))
            await asyncio.gather(*futures)
            seen += len(futures)
        elapsed = time.perf_counter() - (started or time.perf_counter())
    finally:
        await consumer.stop()
        await producer.stop()
    return {"events": seen, "seconds": round(elapsed, 3), "events_per_s": round(seen / elapsed)}


async def gate_latency(
    bench: Bench,
    sessions: int,
    rate: float,
    guarantee: str,
    tree: Path | None = None,
    relay: bool = False,
    **extra: str,
) -> dict[str, Any]:
    """Produce a fleet at ``rate``; latency of each decision from its request's send
    (the worker of the checkout ``tree``, this one by default: ``python -m`` imports
    ``spanguard`` from the working directory first; with ``relay``, instead of a worker
    :mod:`bench.gate_relay`, the floor of the contract's order; ``extra``: more of the
    worker's environment, e.g. ``SPANGUARD_COMMIT_INTERVAL``). ``window_ms`` is the wall-clock
    span from the first record sent to the last decision read (``last_sent_ms``: the
    last record sent, so a worker that fell behind shows), and ``group`` the
    workers' consumer group (``bench.gate_tail`` counts its commits in that window).

    A probe runs alongside: a record every 10 ms through the same broker on a topic
    of its own, produced and consumed by plain aiokafka clients with no worker in
    between. Its latency is the broker floor under this load, so the row tells
    what the worker adds to it."""
    prefix = bench.prefix(f"lat-{guarantee}")
    await bench.topics(prefix)
    await create_topics(bench.bootstrap, [f"{prefix}.probe"], partitions=PARTITIONS)
    lines = demo_fleet(sessions)
    if relay:
        started: list[Any] = [await asyncio.to_thread(Relay, bench, prefix, sessions, extra)]
    else:
        started = await asyncio.to_thread(
            bench.workers, prefix, 1, tree, SPANGUARD_PROCESSING_GUARANTEE=guarantee, **extra
        )
    await asyncio.sleep(2)  # let the first assignment settle
    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    requests = [orjson.loads(line)["event_id"] for line in lines if b'"eviction.requested"' in line]
    done = asyncio.Event()

    window = [0.0, 0.0, 0.0]  # first send, last decision read, last send
    reading = asyncio.Event()

    async def consume() -> None:
        """Read the decisions as the SDK does (read committed, 20 ms fetch wait), its
        partitions assigned and positioned before the first request is sent: a
        reader still starting would add its start to the first decisions' latency."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bench.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            fetch_max_wait_ms=20,
        )
        await consumer.start()
        try:
            await _from_start(consumer, f"{prefix}.decisions")
            reading.set()
            while len(latencies) < len(requests):
                batch = await consumer.getmany(timeout_ms=100, max_records=5000)
                now = time.time()
                for records in batch.values():
                    for record in records:
                        cause = orjson.loads(record.value or b"{}")["caused_by"]
                        latencies.append(now - sent_at[cause])
                        window[1] = now
        finally:
            await consumer.stop()

    async def produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bench.bootstrap, acks="all", enable_idempotence=True, linger_ms=0
        )
        await producer.start()
        try:
            await producer.partitions_for(f"{prefix}.events")  # metadata before the clock
            t0 = time.monotonic()
            window[0] = time.time()
            for i, line in enumerate(lines):
                ahead = i / rate - (time.monotonic() - t0)
                if ahead > 0:
                    await asyncio.sleep(ahead)
                if b'"eviction.requested"' in line:
                    sent_at[orjson.loads(line)["event_id"]] = time.time()
                await producer.send(f"{prefix}.events", line, key=session_key(line))
            await producer.flush()
            window[2] = time.time()
        finally:
            await producer.stop()

    try:
        consumer = asyncio.create_task(consume())
        probing = asyncio.Event()
        probe = asyncio.create_task(broker_probe(bench.bootstrap, f"{prefix}.probe", done, probing))
        await asyncio.wait_for(asyncio.gather(reading.wait(), probing.wait()), timeout=60)
        await produce()
        await asyncio.wait_for(consumer, timeout=300)
        done.set()
        floor = await probe
    finally:
        for worker in started:
            await asyncio.to_thread(worker.stop)
    return {
        "guarantee": guarantee,
        "worker": "relay" if relay else "current" if tree is None else str(tree),
        "broker_log": bench.log_medium,
        "sessions": sessions,
        "rate": rate,
        "decisions": len(latencies),
        **percentiles([x * 1000 for x in latencies]),
        "broker_floor": percentiles(floor),
        "group": f"{prefix}-app",
        "window_ms": [round(window[0] * 1000), round(window[1] * 1000)],
        "last_sent_ms": round(window[2] * 1000),
        "worker_env": extra,
    }


class Relay:
    """:mod:`bench.gate_relay` in a process of its own, as a worker would be."""

    def __init__(self, bench: Bench, prefix: str, sessions: int, extra: dict[str, str]) -> None:
        command = [sys.executable, "-m", "bench.gate_relay", "--bootstrap", bench.bootstrap]
        command += ["--prefix", prefix, "--sessions", str(sessions)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, env={**os.environ, **extra}
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            self.stop()
            raise RuntimeError("the relay did not start (its error is above)")

    def stop(self) -> None:
        """Terminate it and wait."""
        self.process.terminate()
        self.process.wait(timeout=30)


async def _from_start(consumer: AIOKafkaConsumer, topic: str) -> None:
    """Assign every partition of ``topic`` and position the consumer at its start."""
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(parts)
    await consumer.seek_to_beginning(*parts)
    for tp in parts:
        await consumer.position(tp)


async def broker_probe(
    bootstrap: str, topic: str, done: asyncio.Event, ready: asyncio.Event | None = None
) -> list[float]:
    """Milliseconds from send to receipt of a record every 10 ms until ``done``
    (acks=all, read committed and a 20 ms fetch wait, as the SDK's decision reader);
    ``ready`` is set once its consumer is positioned, before the first send."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        fetch_max_wait_ms=20,
    )
    await producer.start()
    await consumer.start()
    await _from_start(consumer, topic)
    await producer.partitions_for(topic)
    if ready is not None:
        ready.set()
    received: list[float] = []

    async def receive() -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=100)
            now = time.time()
            received.extend(
                (now - float(r.value or b"0")) * 1000 for rs in batch.values() for r in rs
            )

    reader = asyncio.create_task(receive())
    try:
        sent = 0
        while not done.is_set():
            await producer.send(topic, repr(time.time()).encode(), key=str(sent).encode())
            sent += 1
            await asyncio.sleep(0.01)
        deadline = time.monotonic() + 10
        while len(received) < sent and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        reader.cancel()
        await producer.stop()
        await consumer.stop()
    return received


def percentiles(ms: list[float]) -> dict[str, float]:
    """p50, p95, p99, p99.9 and the maximum of a list of milliseconds."""
    q = statistics.quantiles(sorted(ms), n=1000)
    return {
        "p50_ms": round(q[499], 1),
        "p95_ms": round(q[949], 1),
        "p99_ms": round(q[989], 1),
        "p999_ms": round(q[998], 1),
        "max_ms": round(max(ms), 1),
    }


def restore(bench: Bench, sessions: int, spans: int) -> dict[str, Any]:
    """Write ``sessions`` sessions' records straight into a changelog, then time a
    fresh worker from start until it is ready (restored)."""
    prefix = bench.prefix("restore")
    engine = Engine(track_changes=True)
    records: list[tuple[bytes, bytes | None]] = []
    partition_of: dict[bytes, int] = {}
    for i in range(sessions):
        s = SessionScript(f"r-{i}", tenant=f"t{i % 7}")
        for j in range(spans):
            s.add(f"a{j}", f"turn {j} of order {40000 + j}")
        s.score(*[(f"a{j}", 0.5) for j in range(spans)])
        for n, line in enumerate(s.lines()):
            engine.process_raw(line, Source("b", 0, n))
        for key, value in engine.drain_changes():
            records.append((key, value))
            partition_of[key] = partition_for(s.session_id.encode(), PARTITIONS)
    asyncio.run(bench.topics(prefix))
    changelog = changelog_topic(f"{prefix}-app")

    async def write() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bench.bootstrap, linger_ms=20, max_batch_size=1 << 20
        )
        await producer.start()
        try:
            futures = [
                await producer.send(changelog, v, key=k, partition=partition_of[k])
                for k, v in records
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(_transport(bench, prefix).ensure_internal_topics())
    asyncio.run(write())
    t0 = time.monotonic()
    [worker] = bench.workers(prefix, 1, SPANGUARD_FLEET='{"enabled": false}')
    ready = time.monotonic() - t0
    log = worker.log_text()
    worker.stop()
    restored = [line for line in log.splitlines() if "restored" in line]
    return {
        "sessions": sessions,
        "spans_per_session": spans,
        "records": len(records),
        "record_bytes_mean": round(statistics.mean(len(k) + len(v or b"") for k, v in records), 1),
        "seconds_start_to_ready": round(ready, 2),
        "restored_log": restored[-PARTITIONS:],
    }


def verdicts(results: dict[str, Any]) -> list[str]:
    """Each of issue 9's targets against its figure, met or not."""
    ratios = results["throughput"]["ratio_to_passthrough"]
    shipped = results["throughput"]["workers"][0]
    rows = [
        ("worker / passthrough", ratios["shipped"], ">=", 0.20),
        ("runtime alone / passthrough", ratios["runtime-alone"], ">=", 0.5),
        ("state records per event", shipped["state_records_per_event"], "<=", 2.5),
        ("garbage mix / clean stream", results["garbage_mix"]["ratio"], ">=", 0.8),
    ]
    for row in results["latency"]:
        if row["guarantee"] == "at_least_once":
            limit = 50.0 if row["rate"] == 1000.0 else 250.0
            name = f"gate p99 ms at {row['rate']:.0f} events/s, broker log on {row['broker_log']}"
            rows.append((name, row["p99_ms"], "<=", limit))
    lines = [
        f"{name}: {value} (target {op} {target}: "
        f"{'met' if (value >= target if op == '>=' else value <= target) else 'NOT met'})"
        for name, value, op, target in rows
    ]
    lines.extend(
        f"  {row['guarantee']} at {row['rate']:.0f} events/s, broker log on {row['broker_log']}: "
        f"p50/p99 {row['p50_ms']}/{row['p99_ms']} ms, broker floor in the same run "
        f"p50/p99 {row['broker_floor']['p50_ms']}/{row['broker_floor']['p99_ms']} ms"
        for row in results["latency"]
    )
    return lines


def latency_rows(bench: Bench, sessions: int, capacity: float) -> list[dict[str, Any]]:
    """The gate's latency under both guarantees, at 1,000 events/s and at half the
    measured capacity."""
    rows = [
        asyncio.run(gate_latency(bench, sessions, rate, g))
        for g in ("at_least_once", "exactly_once")
        for rate in (1000.0, round(capacity / 2))
    ]
    print(json.dumps(rows, indent=2), flush=True)
    return rows


def latency_runs(runs: int, baseline: Path | None = None) -> None:
    """The gate's latency alone, several runs per guarantee (the p99's spread); with a
    ``baseline`` checkout, its worker and this one's alternately on the same broker."""
    rows = []
    trees: tuple[Path | None, ...] = (None,) if baseline is None else (baseline, None)
    for parent in (None, MEMORY_DIR) if MEMORY_DIR.is_dir() else (None,):
        with fresh_bench(parent) as bench:
            for _ in range(runs):
                for guarantee in ("at_least_once", "exactly_once"):
                    for tree in trees:
                        row = asyncio.run(
                            gate_latency(bench, 1000, 1000.0, guarantee, tree, **web_env())
                        )
                        row["load_avg_1m"] = round(os.getloadavg()[0], 2)
                        print(json.dumps(row), flush=True)
                        rows.append(row)
    for row in rows:
        floor = row["broker_floor"]
        print(
            f"{row['worker']:>12} {row['guarantee']:>13} broker log on {row['broker_log']:>5}: "
            f"p50/p99/p99.9 {row['p50_ms']}/{row['p99_ms']}/{row['p999_ms']} ms, broker floor "
            f"{floor['p50_ms']}/{floor['p99_ms']}/{floor['p999_ms']} ms, "
            f"load {row['load_avg_1m']}"
        )
    save_results("e2e-latency.json" if baseline is None else "e2e-latency-baseline.json", rows)


def main() -> None:
    if sys.argv[1:2] == ["--gate-tail"]:  # issue 26's table: bench/gate_tail.py
        from bench.gate_tail import main as gate_tail

        gate_tail(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--latency-only",
        type=int,
        metavar="RUNS",
        help="only the gate's latency at 1,000 events/s, RUNS times per guarantee",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="with --latency-only: also run the worker of this checkout (e.g. a git "
        "worktree of an earlier commit), alternately with this one, on the same broker",
    )
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "spanguard").is_dir():
        parser.error(f"{args.baseline} is not a spanguard checkout")
    if args.latency_only:
        latency_runs(args.latency_only, args.baseline)
        return
    fleet = 100 if args.quick else 1000
    lines = demo_fleet(fleet)
    results: dict[str, Any] = {
        "benchmark": "e2e",
        "mode": "quick" if args.quick else "full",
        "command": "python -m bench.e2e" + (" --quick" if args.quick else ""),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
    }
    off = '{"enabled": false}'
    with fresh_bench() as bench:
        raw = asyncio.run(passthrough(bench, lines))
        stub = asyncio.run(runtime_alone(bench, lines))
        runs = [
            worker_throughput(bench, lines, 1, "shipped"),
            worker_throughput(bench, lines, 1, "fleet-off", SPANGUARD_FLEET=off),
            worker_throughput(bench, lines, 2, "two-processes"),
        ]
        ratios = {r["label"]: round(r["events_per_s"] / raw["events_per_s"], 3) for r in runs}
        ratios["runtime-alone"] = round(stub["events_per_s"] / raw["events_per_s"], 3)
        results["throughput"] = {
            "passthrough": raw,
            "runtime_alone": stub,
            "workers": runs,
            "ratio_to_passthrough": ratios,
            "targets": {"shipped": 0.20, "runtime-alone": 0.5},
        }
        print(json.dumps(results["throughput"], indent=2), flush=True)
        results["garbage_mix"] = garbage_mix_ratio(bench, lines)
        print(json.dumps(results["garbage_mix"], indent=2), flush=True)
        capacity = runs[0]["events_per_s"]
        lat_sessions = 100 if args.quick else 1000
        results["latency"] = latency_rows(bench, lat_sessions, capacity)
        results["restore"] = restore(bench, 2000 if args.quick else 100_000, 3)
        print(json.dumps(results["restore"], indent=2))
    if MEMORY_DIR.is_dir():
        with fresh_bench(MEMORY_DIR) as bench:
            results["latency"] += latency_rows(bench, lat_sessions, capacity)
    results["targets"] = verdicts(results)
    for line in results["targets"]:
        print(line)
    save_results("e2e-quick.json" if args.quick else "e2e.json", results)


if __name__ == "__main__":
    main()
