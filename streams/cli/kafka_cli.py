"""``spanguard worker``, ``produce`` and ``consume``: the commands that talk to Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from streams.cli.summary import OutputSummary
from streams.client.kafka_io import OUTPUT_SUFFIXES, bootstrap_servers, produce_lines, read_outputs
from streams.client.topics import ensure_topics
from streams.codec import decode_output
from streams.settings import Settings, load_settings

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


def worker(
    config: ConfigOption = None,
    loglevel: Annotated[str, typer.Option("--loglevel", "-l")] = "info",
) -> None:
    """Run a spanguard worker (Faust) against the configured broker."""
    import faust

    from streams.app.topology import build_topology

    settings = _settings(config)
    try:
        asyncio.run(ensure_topics(settings))
    except Exception as exc:
        err.print(f"[red]error:[/] cannot reach Kafka at {settings.broker}: {exc}")
        err.print("start the local broker with: spanguard kafka start")
        raise typer.Exit(1) from exc
    asyncio.set_event_loop(asyncio.new_event_loop())
    topology = build_topology(settings)
    faust.Worker(topology.app, loglevel=loglevel, quiet=True).execute_from_commandline()


def produce(
    trace: Annotated[str, typer.Argument(metavar="TRACE.jsonl", help="trace file, or - for stdin")],
    config: ConfigOption = None,
    rate: Annotated[float | None, typer.Option(help="records per second (default: max)")] = None,
) -> None:
    """Publish a recorded trace to <prefix>.events in order, keyed by session.

    A line that is not valid JSON is published unchanged (unkeyed), so the
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

    async def run() -> int:
        await ensure_topics(settings)
        return await produce_lines(
            bootstrap_servers(settings.broker), settings.topic("events"), lines, rate
        )

    sent = asyncio.run(run())
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

    async def run() -> None:
        sink = sys.stdout.buffer if out == "-" else open(out, "wb")  # noqa: SIM115
        try:
            async for record in read_outputs(
                bootstrap_servers(settings.broker), topics, idle, follow=follow
            ):
                event = decode_output(record.value)
                summary.add(event)
                if follow:
                    err.print(describe(event))
                if not follow or out != "-":
                    sink.write(record.value + b"\n")
                    sink.flush()
        finally:
            if sink is not sys.stdout.buffer:
                sink.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    summary.render(err)


def describe(event: object) -> str:
    """One readable line for the live tail."""
    data = orjson.loads(orjson.dumps(event, default=lambda o: o.model_dump(mode="json")))
    kind = data["type"]
    who = f"{data.get('tenant')}/{data.get('session_id')}"
    if kind == "integrity.fault":
        colour = {"critical": "bold red", "warning": "yellow"}.get(data["severity"], "white")
        return (
            f"[{colour}]{data['severity'].upper():8}[/] {data['kind']:<28} {who} "
            f"spans={','.join(data['span_ids'][:5])}"
        )
    if kind == "span.pinned":
        return (
            f"[cyan]PIN     [/] {data['span_id']:<28} {who} for={','.join(data['pinned_for'][:3])}"
        )
    if kind == "eviction.decided":
        refused = ",".join(f"{r['span_id']}:{r['reason']}" for r in data["refused"][:4])
        return (
            f"[green]DECISION[/] {data['action']:<28} {who} committed={len(data['committed'])} "
            f"refused=[{refused}] dropped={len(data['dropped'])}"
        )
    if kind == "scores.recompute_requested":
        return f"[magenta]RECOMPUTE[/] {len(data['span_ids'])} span(s)            {who}"
    if kind == "event.rejected":
        return f"[red]REJECTED[/] {data['reason']:<28} {who} {data['detail'][:60]}"
    return f"{kind} {who}"
