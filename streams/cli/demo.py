"""``spanguard demo``: the real thing on one machine.

Starts the project's local Kafka broker (unless one answers already), a worker,
and a demo fleet of agent sessions flowing through it at a steady rate, and
prints faults, pins and decisions as they happen. Ctrl-C stops what it started.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from streams.cli.kafka_cli import describe
from streams.client.kafka_io import OUTPUT_SUFFIXES, OutputReader, bootstrap_servers, produce_lines
from streams.client.topics import ensure_topics
from streams.codec import decode_output
from streams.kafka.broker import BrokerError, LocalBroker
from streams.kafka.workers import WorkerProcess, spawn_worker
from streams.settings import load_settings
from streams.sim.scenarios import demo_fleet

console = Console(stderr=True)


def demo(
    sessions: Annotated[int, typer.Option(help="sessions in the demo fleet")] = 60,
    rate: Annotated[float, typer.Option(help="input events per second")] = 40.0,
    port: Annotated[int, typer.Option(help="port of the local broker")] = 9092,
    duration: Annotated[
        float | None, typer.Option(help="stop after SECONDS (default: Ctrl-C)")
    ] = None,
) -> None:
    """Run broker + worker + a demo fleet, and print what spanguard decides, live."""
    # SIGTERM (e.g. from a supervisor) stops as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    broker = LocalBroker(port=port)
    started_broker = False
    try:
        if broker.status().running:
            bootstrap = broker.bootstrap
            console.print(f"using the running local broker at {bootstrap}")
        else:
            console.print("starting the local Kafka broker (first run fetches its jars)...")
            t0 = time.monotonic()
            bootstrap = broker.start(timeout=120)
            started_broker = True
            console.print(f"broker up at {bootstrap} in {time.monotonic() - t0:.1f}s")
    except BrokerError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from exc

    workers: list[WorkerProcess] = []
    try:
        _run_fleet(bootstrap, sessions, rate, duration, workers)
    except KeyboardInterrupt:
        pass
    finally:
        console.print("stopping the worker" + (" and the broker" if started_broker else ""))
        for worker in workers:
            worker.stop(timeout=30)
        if started_broker:
            broker.stop()


def _run_fleet(
    bootstrap: str, sessions: int, rate: float, duration: float | None, workers: list[WorkerProcess]
) -> None:
    """Start a worker on fresh topics (into ``workers``, so the caller can stop it),
    publish the fleet, and print outputs until ``duration`` or Ctrl-C."""
    prefix = f"demo{int(time.time())}"
    env = {
        "SPANGUARD_BROKER": f"kafka://{bootstrap}",
        "SPANGUARD_TOPIC_PREFIX": prefix,
        "SPANGUARD_APP_ID": f"{prefix}-guard",
        "SPANGUARD_DATA_DIR": str(Path(".spanguard") / prefix),
    }
    settings = load_settings(broker=f"kafka://{bootstrap}", topic_prefix=prefix)
    asyncio.run(ensure_topics(settings))
    log_path = Path(".spanguard") / f"{prefix}-worker.log"
    worker = spawn_worker("demo", env, log_path)
    workers.append(worker)
    console.print(f"worker pid {worker.process.pid}, log {log_path}")
    console.print(
        f"dashboard and API: http://{settings.web_host}:{settings.web_port}/  (metrics at /metrics)"
    )
    lines = demo_fleet(sessions)
    console.print(
        f"publishing {len(lines)} events of {sessions} sessions at {rate:g}/s to "
        f"{settings.topic('events')}; Ctrl-C to stop"
    )

    async def run() -> None:
        topics = [settings.topic(s) for s in OUTPUT_SUFFIXES]
        producer = asyncio.create_task(
            produce_lines(bootstrap_servers(settings.broker), settings.topic("events"), lines, rate)
        )
        deadline = None if duration is None else time.monotonic() + duration
        try:
            async with OutputReader(bootstrap, topics) as reader:
                while deadline is None or time.monotonic() < deadline:
                    for record in await reader.poll(timeout_ms=500):
                        console.print(describe(decode_output(record.value)))
                    if worker.process.poll() is not None:
                        console.print(
                            f"[red]the worker exited[/]; its log:\n{worker.log_text()[-3000:]}"
                        )
                        return
        finally:
            producer.cancel()

    asyncio.run(run())
