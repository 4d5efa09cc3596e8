"""``spanguard simulate`` and ``spanguard quality``: a synthetic fleet with its
ground truth, and how well the engine's outputs match that truth."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from spanguard.streams.sim import (
    INJECTIONS,
    FleetTruth,
    SimConfig,
    SimulatedFleet,
    parse_fault_mix,
    truth_path_for,
)
from spanguard.streams.sim import (
    simulate as generate,
)
from spanguard.streams.sim.quality import evaluate, read_outputs, render

err = Console(stderr=True)


def simulate(
    sessions: Annotated[int, typer.Option("--sessions", "-n", min=0, help="sessions")] = 50,
    tenants: Annotated[int, typer.Option(min=1, help="tenants the sessions spread over")] = 3,
    events_per_session: Annotated[
        int,
        typer.Option(min=12, help="events per session (each session varies by +-20%)"),
    ] = 60,
    seed: Annotated[int, typer.Option(help="same seed, same bytes")] = 7,
    fault_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="share of sessions with injected faults")
    ] = 0.3,
    faults: Annotated[
        str,
        typer.Option(
            help="fault mix: NAME[=weight],... or 'all'. Names: " + ", ".join(INJECTIONS),
        ),
    ] = "all",
    max_injections: Annotated[
        int, typer.Option(min=1, help="at most this many injections per faulty session")
    ] = 2,
    long_every: Annotated[
        int,
        typer.Option(min=0, help="every Nth session is a long one (500+ turns); 0: none"),
    ] = 0,
    out: Annotated[
        str, typer.Option("--out", "-o", help="events JSONL file, or - for stdout")
    ] = "sim.jsonl",
    truth: Annotated[
        Path | None,
        typer.Option(help="truth file (default: beside --out, e.g. sim.truth.json)"),
    ] = None,
    kafka: Annotated[
        bool, typer.Option("--kafka", help="publish to <prefix>.events instead of a file")
    ] = False,
    rate: Annotated[
        float | None, typer.Option(min=0.0, help="with --kafka: records per second")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="settings file (TOML) for --kafka")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no summary")] = False,
) -> None:
    """Generate a deterministic synthetic fleet of agent sessions and its ground truth.

    Sessions of several tenants add spans, score them, compact their context and
    ask for evictions; a share of them gets faults injected at known events.
    The events go to --out (or Kafka with --kafka), interleaved like a live
    fleet; the truth file lists, per session, whether it is healthy, the
    injected faults, the expected dead letters and, per eviction request, the
    spans that bind a referent a retained span needs.
    """
    try:
        mix = parse_fault_mix(faults)
    except ValueError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    if out == "-" and truth is None and not kafka:
        err.print("[red]error:[/] with --out - give --truth PATH")
        raise typer.Exit(2)
    settings_config = config
    cfg = SimConfig(
        sessions=sessions,
        tenants=tenants,
        events_per_session=events_per_session,
        seed=seed,
        fault_rate=fault_rate,
        faults=mix,
        max_injections=max_injections,
        long_every=long_every,
    )
    started = time.perf_counter()
    fleet = generate(cfg)
    elapsed = time.perf_counter() - started
    truth_path = truth or Path(truth_path_for("sim.jsonl" if kafka and out == "-" else out))
    if kafka:
        sent = _publish(fleet, settings_config, rate)
        fleet.truth.events_file = None
        destination = f"{sent} record(s) published"
    else:
        data = b"".join(line + b"\n" for line in fleet.lines)
        try:
            if out == "-":
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            else:
                Path(out).write_bytes(data)
        except OSError as exc:
            err.print(f"[red]error:[/] {exc.strerror}: {exc.filename}")
            raise typer.Exit(2) from exc
        fleet.truth.events_file = None if out == "-" else Path(out).name
        destination = "stdout" if out == "-" else out
    try:
        truth_path.write_bytes(fleet.truth.to_json())
    except OSError as exc:
        err.print(f"[red]error:[/] {exc.strerror}: {exc.filename}")
        raise typer.Exit(2) from exc
    if not quiet:
        _summary(fleet, destination, truth_path, elapsed)


def _publish(fleet: SimulatedFleet, config: Path | None, rate: float | None) -> int:
    # Imported here: a file-only run needs neither aiokafka nor a broker.
    from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
    from spanguard.streams.kafka_io.producer import produce_lines  # tests/sim patch it there
    from spanguard.streams.kafka_io.topics import ensure_topics
    from spanguard.streams.settings import load_settings

    try:
        settings = load_settings(config)
    except ValueError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc

    async def run() -> int:
        await ensure_topics(settings)
        return await produce_lines(
            bootstrap_servers(settings.broker), settings.topic("events"), fleet.lines, rate or None
        )

    try:
        return asyncio.run(run())
    except Exception as exc:
        err.print(f"[red]error:[/] cannot publish to Kafka at {settings.broker}: {exc}")
        raise typer.Exit(1) from exc


def _summary(fleet: SimulatedFleet, destination: str, truth_path: Path, elapsed: float) -> None:
    summary = fleet.truth.summary()
    table = Table(title="Simulated fleet")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("events", str(len(fleet.lines)))
    table.add_row("sessions", str(summary["sessions"]))
    table.add_row("healthy sessions", str(summary["healthy_sessions"]))
    table.add_row("referent-dense sessions", str(summary["referent_dense_sessions"]))
    for kind, count in summary["faults"].items():
        table.add_row(f"injected {kind}", str(count))
    for reason, count in summary["deadletters"].items():
        table.add_row(f"malformed ({reason})", str(count))
    table.add_row("eviction requests", str(summary["eviction_requests"]))
    table.add_row("requested spans binding a needed referent", str(summary["needed_spans"]))
    if fleet.skipped:
        table.add_row("injections that did not fit", str(len(fleet.skipped)))
    err.print(table)
    err.print(f"events: {destination}; truth: {truth_path}; generated in {elapsed:.2f}s")


def quality(
    truth: Annotated[Path, typer.Option(help="truth file written by spanguard simulate")],
    outputs: Annotated[
        str,
        typer.Option(help="output events JSONL (spanguard replay/consume), or - for stdin"),
    ],
    json_path: Annotated[
        Path | None, typer.Option("--json", help="also write the figures as JSON here")
    ] = None,
    min_recall: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="exit 1 when an injected kind's recall is below"),
    ] = None,
) -> None:
    """Score the engine's outputs against the simulator's ground truth.

    Prints precision and recall per fault kind, faults on healthy sessions,
    dead letters, the evictions that would have destroyed a live referent
    without the gate and with it, and the eviction volume of referent-dense
    sessions.
    """
    console = Console()
    try:
        fleet_truth = FleetTruth.load(truth)
        raw = sys.stdin.buffer.read() if outputs == "-" else Path(outputs).read_bytes()
        events = read_outputs(raw.splitlines())
    except OSError as exc:
        err.print(f"[red]error:[/] {exc.strerror}: {exc.filename}")
        raise typer.Exit(2) from exc
    except ValueError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    report = evaluate(fleet_truth, events)
    render(report, console)
    if json_path is not None:
        json_path.write_bytes(
            orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
            + b"\n"
        )
    lowest = report.lowest_recall()
    if min_recall is not None and lowest is not None and lowest < min_recall:
        below = [k.kind for k in report.kinds if k.recall is not None and k.recall < min_recall]
        err.print(f"[red]recall below {min_recall}:[/] {', '.join(below)}")
        raise typer.Exit(1)
