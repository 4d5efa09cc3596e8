"""``spanguard worker``, ``produce`` and ``consume``: the commands that talk to Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from aiokafka.errors import KafkaError
from rich.console import Console

from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.schemas.codec import decode_output
from spanguard.streams.cli.demo_lines import demo_line
from spanguard.streams.cli.extras import require_worker
from spanguard.streams.cli.summary import OutputSummary
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.connection import diagnose_connection, redact
from spanguard.streams.kafka_io.outputs import read_outputs
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.security import CredentialsError, aiokafka_security
from spanguard.streams.kafka_io.topics import ensure_topics, max_record_bytes
from spanguard.streams.settings import Settings, load_settings

_T = TypeVar("_T")

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="settings file (TOML); see docs/settings.md")
]
err = Console(stderr=True)


def _settings(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ValueError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc


def _security(settings: Settings) -> dict[str, Any]:
    """The aiokafka security kwargs, or exit with one line when a secret file is unreadable."""
    try:
        return aiokafka_security(settings.broker_credentials)
    except CredentialsError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _quiet_client_logs() -> None:
    # aiokafka logs each failed connection attempt; with no handler configured Python
    # prints them on stderr. The command reports the cause itself, in one line.
    client_log = logging.getLogger("aiokafka")
    if not any(isinstance(h, logging.NullHandler) for h in client_log.handlers):
        client_log.addHandler(logging.NullHandler())


def run_on_kafka(settings: Settings, work: Callable[[], Awaitable[_T]]) -> _T:
    """Run ``work``; when Kafka cannot be used, exit 1 with one line that says why."""
    _quiet_client_logs()
    try:
        return asyncio.run(_as_coroutine(work))
    except (KafkaError, OSError, TimeoutError) as exc:
        bootstrap = bootstrap_servers(settings.broker)
        security = _security(settings)
        why = asyncio.run(diagnose_connection(bootstrap, security))
        if why.startswith("connected"):  # the broker answers: the failure is something else
            why = redact(f"{type(exc).__name__}: {exc}", security)
        hint = (
            "; start the local broker with `spanguard kafka start`"
            if "nothing listens" in why
            else ""
        )
        err.print(
            f"error: cannot use Kafka at {bootstrap}: {why}{hint}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1) from None


async def _as_coroutine(work: Callable[[], Awaitable[_T]]) -> _T:
    return await work()


def worker(
    config: ConfigOption = None,
    loglevel: Annotated[str, typer.Option("--loglevel", "-l")] = "info",
    processes: Annotated[
        int,
        typer.Option(
            "--processes",
            "-p",
            min=1,
            help="worker processes sharing the partitions on this machine (one per core)",
        ),
    ] = 1,
) -> None:
    """Run a spanguard worker against the configured broker (needs spanguard[worker])."""
    require_worker()
    import faust

    from spanguard.streams.app.topology import build_topology

    settings = _settings(config)
    run_on_kafka(settings, lambda: ensure_topics(settings))
    if processes > 1:
        from spanguard.streams.app.processes import run_processes

        raise typer.Exit(run_processes(processes, settings, loglevel, config))
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # Faust creates only the last level
    asyncio.set_event_loop(asyncio.new_event_loop())
    topology = build_topology(settings)
    faust.Worker(topology.app, loglevel=loglevel, quiet=True).execute_from_commandline()


def produce(
    trace: Annotated[str, typer.Argument(metavar="TRACE.jsonl", help="trace file, or - for stdin")],
    config: ConfigOption = None,
    rate: Annotated[float | None, typer.Option(help="records per second (default: max)")] = None,
) -> None:
    """Publish a recorded trace to <prefix>.events in order, keyed by session.

    Every line is published unchanged, valid or not, keyed by its session_id
    when one can be found (murmur2 partitioner; docs/producing.md), so the
    dead-letter path can be exercised.
    """
    settings = _settings(config)
    try:
        handle = sys.stdin.buffer if trace == "-" else open(trace, "rb")  # noqa: SIM115
    except OSError as exc:
        err.print(f"[red]error:[/] {exc.strerror}: {exc.filename}")
        raise typer.Exit(2) from exc
    with handle:
        lines = [line.rstrip(b"\r\n") for line in handle if line.strip()]
    if not lines:
        source = "standard input" if trace == "-" else trace
        err.print(
            f"nothing to publish: {source} has no non-blank line (expected one JSON input "
            "event per line; `spanguard simulate` writes a sample trace)",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    security = _security(settings)

    async def run() -> int:
        await ensure_topics(settings)
        return await produce_lines(
            bootstrap_servers(settings.broker),
            settings.topic("events"),
            lines,
            rate,
            security=security,
            max_request_size=max_record_bytes(settings),
        )

    sent = run_on_kafka(settings, run)
    err.print(f"published {sent} record(s) to {settings.topic('events')}")


def consume(
    out: Annotated[str, typer.Option("--out", "-o", help="JSONL file, or - for stdout")] = "-",
    idle: Annotated[float, typer.Option("--idle", help="stop after SECONDS without records")] = 5.0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="live tail, readable lines")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Read every output topic from the beginning, one JSON object per line."""
    settings = _settings(config)
    topics = [settings.topic(s) for s in OUTPUT_SUFFIXES]
    summary = OutputSummary()
    security = _security(settings)

    async def run() -> None:
        sink = sys.stdout.buffer if out == "-" else open(out, "wb")  # noqa: SIM115
        try:
            async for record in read_outputs(
                bootstrap_servers(settings.broker), topics, idle, follow=follow, security=security
            ):
                event = decode_output(record.value)
                summary.add(event)
                if follow:
                    err.print(demo_line(event))
                if not follow or out != "-":
                    sink.write(record.value + b"\n")
                    sink.flush()
        finally:
            if sink is not sys.stdout.buffer:
                sink.close()

    with contextlib.suppress(KeyboardInterrupt):
        run_on_kafka(settings, run)
    summary.render(err, counted="outputs")
