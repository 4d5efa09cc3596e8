"""``spanguard demo``: the real thing on one machine.

Starts the project's local Kafka broker (unless one answers already), a worker,
and a demo fleet of agent sessions flowing through it at a steady rate, and
prints faults, pins, decisions and fleet alerts as they happen. The fleet
lives in wall time: each event's ``ts`` is the moment it is published, so the
dashboard's chart fills as you watch. Ctrl-C stops what it started.
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

from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.schemas.codec import decode_output
from spanguard.streams.app.processes import WorkerProcess, spawn_worker
from spanguard.streams.cli.demo_lines import demo_line, in_wall_time
from spanguard.streams.cli.extras import require_worker
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.outputs import OutputReader
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.topics import ensure_topics
from spanguard.streams.localbroker.broker import BrokerError, LocalBroker
from spanguard.streams.settings import load_settings
from spanguard.streams.sim.scenarios import demo_fleet

console = Console(stderr=True)


def demo(
    sessions: Annotated[int, typer.Option(help="sessions in the demo fleet")] = 60,
    rate: Annotated[float, typer.Option(help="input events per second")] = 40.0,
    port: Annotated[int, typer.Option(help="client port of the local broker")] = 9092,
    controller_port: Annotated[
        int, typer.Option(help="KRaft controller port of the local broker")
    ] = 9093,
    web_port: Annotated[
        int, typer.Option(help="port of the worker's dashboard, API and /metrics")
    ] = 6066,
    duration: Annotated[
        float | None, typer.Option(help="stop after SECONDS (default: Ctrl-C)")
    ] = None,
) -> None:
    """Run broker + worker + a demo fleet, and print what spanguard decides, live
    (needs spanguard[worker] and spanguard[broker])."""
    require_worker()
    # SIGTERM (e.g. from a supervisor) stops as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    broker = LocalBroker(port=port, controller_port=controller_port)
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
        console.print(f"error: {exc}", style="red", markup=False, highlight=False)
        raise typer.Exit(1) from None

    workers: list[WorkerProcess] = []
    try:
        _run_fleet(bootstrap, sessions, rate, duration, web_port, workers)
    except KeyboardInterrupt:
        pass
    finally:
        console.print("stopping the worker" + (" and the broker" if started_broker else ""))
        for worker in workers:
            worker.stop(timeout=30)
        if started_broker:
            broker.stop()


def _run_fleet(
    bootstrap: str,
    sessions: int,
    rate: float,
    duration: float | None,
    web_port: int,
    workers: list[WorkerProcess],
) -> None:
    """Start a worker on fresh topics (into ``workers``, so the caller can stop it),
    publish the fleet, and print outputs until ``duration`` or Ctrl-C."""
    prefix = f"demo{int(time.time())}"
    env = {
        "SPANGUARD_BROKER": bootstrap,
        "SPANGUARD_TOPIC_PREFIX": prefix,
        "SPANGUARD_APP_ID": f"{prefix}-guard",
        "SPANGUARD_DATA_DIR": str(Path(".spanguard") / prefix),
        "SPANGUARD_WEB_PORT": str(web_port),
    }
    settings = load_settings(broker=bootstrap, topic_prefix=prefix, web_port=web_port)
    asyncio.run(ensure_topics(settings))
    log_path = Path(".spanguard") / f"{prefix}-worker.log"
    worker = spawn_worker("demo", env, log_path)
    workers.append(worker)
    console.print(f"worker pid {worker.process.pid}, log {log_path}", markup=False)
    url = f"http://{settings.web_host}:{settings.web_port}/"
    console.print(f"dashboard and API: {url}  (metrics at {url}metrics)", markup=False)
    lines = demo_fleet(sessions)
    console.print(
        f"publishing {len(lines)} events of {sessions} sessions at {rate:g}/s to "
        f"{settings.topic('events')}; Ctrl-C to stop"
    )

    async def run() -> None:
        topics = [settings.topic(s) for s in OUTPUT_SUFFIXES]
        producer = asyncio.create_task(
            produce_lines(
                bootstrap_servers(settings.broker),
                settings.topic("events"),
                in_wall_time(lines),
                rate,
            )
        )
        deadline = None if duration is None else time.monotonic() + duration
        try:
            async with OutputReader(bootstrap, topics) as reader:
                while deadline is None or time.monotonic() < deadline:
                    for record in await reader.poll(timeout_ms=500):
                        console.print(demo_line(decode_output(record.value)))
                    if worker.process.poll() is not None:
                        console.print("the worker exited; its log:", style="red")
                        console.print(worker.log_text()[-3000:], markup=False, highlight=False)
                        return
        finally:
            producer.cancel()

    asyncio.run(run())
