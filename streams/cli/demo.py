"""``spanguard demo``: the real thing on one machine.

Starts the project's local Kafka broker (unless one answers already), a worker,
and a demo fleet of agent sessions flowing through it at a steady rate, and
prints faults, pins and decisions as they happen. Ctrl-C stops what it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from streams.cli.kafka_cli import describe
from streams.client.kafka_io import OUTPUT_SUFFIXES, bootstrap_servers, produce_lines, read_outputs
from streams.client.topics import ensure_topics
from streams.codec import decode_output
from streams.kafka.broker import BrokerError, LocalBroker
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

    prefix = f"demo{int(time.time())}"
    env = dict(os.environ)
    env.update(
        SPANGUARD_BROKER=f"kafka://{bootstrap}",
        SPANGUARD_TOPIC_PREFIX=prefix,
        SPANGUARD_APP_ID=f"{prefix}-guard",
        SPANGUARD_DATA_DIR=str(Path(".spanguard") / prefix),
    )
    settings = load_settings(broker=f"kafka://{bootstrap}", topic_prefix=prefix)
    asyncio.run(ensure_topics(settings))
    log_path = Path(".spanguard") / f"{prefix}-worker.log"
    log_path.parent.mkdir(exist_ok=True)
    log = log_path.open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "streams.cli.main", "worker"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    console.print(f"worker pid {worker.pid}, log {log_path}")
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
        async for record in read_outputs(bootstrap, topics, idle_seconds=0, follow=True):
            console.print(describe(decode_output(record.value)))
            if deadline is not None and time.monotonic() > deadline:
                break
        producer.cancel()

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run())
    finally:
        console.print("stopping the worker" + (" and the broker" if started_broker else ""))
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        if started_broker:
            broker.stop()
