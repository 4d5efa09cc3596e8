"""``request_eviction`` round trip as a harness sees it, on the local broker with a worker.

    .venv/bin/python -m bench.sdk_latency            # full run (a few minutes)
    .venv/bin/python -m bench.sdk_latency --quick    # small smoke run

One broker of its own (``bench.e2e.Bench``), one ``spanguard worker``, and a
harness session that repeatedly reports a few messages and awaits
``session.request_eviction(...)`` (the SDK's whole path: produce, the worker,
the process's one decisions consumer, correlation by request id), while the
demo fleet is published as background traffic at 10 and then 1,000 events/s.

Baselines measured in the same run, for the ratios:

* the same calls offline (the engine in process: the SDK's own cost);
* the broker's floor: one record produced and consumed back (no worker); a
  round trip through the worker needs two such hops at least.

Results: ``bench/results/sdk_latency.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.e2e import Bench, fresh_bench
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.topics import create_topics
from spanguard.streams.sdk import Decision, Message, Session, SpanguardClient
from spanguard.streams.sim.scenarios import demo_fleet

RESULTS = Path(__file__).resolve().parent / "results"


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
    return {
        "n": len(ms),
        "p50_ms": round(q[49], 2),
        "p99_ms": round(q[98], 2),
        "max_ms": round(ms[-1], 2),
    }


async def _one_request(session: Session, n: int, timeout: float) -> tuple[float, Decision]:
    """Report three messages (one referring to the first), ask to evict the first two."""
    tag = f"r{n}"
    await session.observe(
        [
            Message(f"{tag}-a", f"My account {n:04d}-C was charged twice."),
            Message(f"{tag}-b", "Small talk. " * 10),
            Message(f"{tag}-c", "Please close that account."),
        ]
    )
    t0 = time.perf_counter()
    decision = await session.request_eviction(
        [f"{tag}-a", f"{tag}-b"], basis="recency", timeout=timeout
    )
    return (time.perf_counter() - t0) * 1000, decision


async def harness(
    client: SpanguardClient,
    name: str,
    requests: int,
    timeout: float,
    until: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Up to ``requests`` sequential round trips on one session (fewer when ``until()``
    turns true first); latency and outcome counts."""
    session = client.session(name)
    latencies: list[float] = []
    timed_out = 0
    for n in range(requests):
        if until():
            break
        ms, decision = await _one_request(session, n, timeout)
        if decision.timed_out:
            timed_out += 1
            continue
        assert decision.pinned == (f"r{n}-a",), decision  # the gate's answer, not noise
        latencies.append(ms)
    return {**_summary(latencies), "timed_out": timed_out, "late": len(session.inbox.late)}


async def broker_floor(bootstrap: str, topic: str, samples: int) -> dict[str, Any]:
    """One record produced (acks=all) and consumed back: the broker's own round trip."""
    await create_topics(bootstrap, [topic])
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=20)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await consumer.start()
    await producer.start()
    latencies: list[float] = []
    try:
        part = TopicPartition(topic, 0)
        consumer.assign([part])
        await consumer.seek_to_end(part)
        await consumer.position(part)
        for n in range(samples):
            key = f"floor-{n}".encode()
            t0 = time.perf_counter()
            await producer.send_and_wait(topic, b"{}", key=key)
            while True:
                batch = await consumer.getmany(timeout_ms=1000)
                if any(r.key == key for records in batch.values() for r in records):
                    break
            latencies.append((time.perf_counter() - t0) * 1000)
    finally:
        await producer.stop()
        await consumer.stop()
    return _summary(latencies)


async def with_background(
    bench: Bench, prefix: str, rate: float, seconds: float, requests: int, timeout: float
) -> dict[str, Any]:
    """The harness measured while the demo fleet is published at ``rate`` events/s: it
    stops when the background traffic ends, so every sample saw that traffic."""
    lines = demo_fleet(max(1, int(rate * seconds) // 20 + 1))
    started = time.monotonic()
    background = asyncio.create_task(
        produce_lines(bench.bootstrap, f"{prefix}.events", lines, rate)
    )
    await asyncio.sleep(min(3.0, seconds / 4))  # let the traffic reach its rate first
    async with SpanguardClient.kafka(bench.bootstrap, prefix, timeout=timeout) as client:
        measured = await harness(client, f"bench-{int(rate)}", requests, timeout, background.done)
        sent = await background
        produced_in = time.monotonic() - started
        # The decisions of requests that timed out may still come: wait for the backlog.
        await asyncio.sleep(2)
        measured["late"] = len(client.session(f"bench-{int(rate)}").inbox.late)
    return {
        "background_target_per_s": rate,
        "background_achieved_per_s": round(sent / produced_in, 1),
        "background_events": sent,
        **measured,
    }


def _main_commit() -> str:
    result = subprocess.run(
        ["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip()


async def run(quick: bool) -> dict[str, Any]:
    requests = 20 if quick else 200
    most = 20 if quick else 5000  # with background traffic: until it ends
    timeout = 60.0
    offline = SpanguardClient.offline()
    results: dict[str, Any] = {
        "offline": await harness(offline, "offline", requests, timeout),
    }
    with fresh_bench() as bench:
        prefix = bench.prefix("sdk")
        await bench.topics(prefix)
        workers = await asyncio.to_thread(bench.workers, prefix, 1)
        try:
            results["broker_floor"] = await broker_floor(
                bench.bootstrap, f"{prefix}.floor", requests
            )
            results["kafka_10"] = await with_background(
                bench, prefix, 10, 15 if quick else 60, most, timeout
            )
            results["kafka_1000"] = await with_background(
                bench, prefix, 1000, 15 if quick else 60, most, timeout
            )
        finally:
            for worker in workers:
                await asyncio.to_thread(worker.stop)
    floor = results["broker_floor"]["p50_ms"]
    for key in ("kafka_10", "kafka_1000"):
        entry = results[key]
        if entry["n"]:
            entry["p50_vs_two_broker_hops"] = round(entry["p50_ms"] / (2 * floor), 2)
    return results


def main() -> None:
    parse = argparse.ArgumentParser(description=__doc__)
    parse.add_argument("--quick", action="store_true", help="few samples (smoke run)")
    args = parse.parse_args()
    results = asyncio.run(run(args.quick))
    record = {
        "bench": "sdk_latency",
        "quick": args.quick,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "worker": f"spanguard worker (spanguard.streams.cli.main worker) at {_main_commit()}",
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sdk_latency.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"{'run':<12} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'timeouts':>9}")
    for name, entry in results.items():
        print(
            f"{name:<12} {entry['n']:>5} {entry['p50_ms']:>9} {entry['p99_ms']:>9} "
            f"{entry['max_ms']:>9} {entry.get('timed_out', 0):>9}"
        )
    for key in ("kafka_10", "kafka_1000"):
        ratio = results[key].get("p50_vs_two_broker_hops")
        if ratio is not None:
            print(f"{key}: p50 = {ratio}x two broker hops")


if __name__ == "__main__":
    main()
