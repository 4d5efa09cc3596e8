"""``spanguard replay``: run the engine over a recorded trace, no Kafka."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from spanguard.schemas import Severity
from spanguard.schemas.codec import encode_output
from spanguard.streams.cli.summary import OutputSummary
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.keys import line_partition
from spanguard.streams.settings import load_settings


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for line in stream:
        stripped = line.rstrip(b"\r\n")
        if stripped.strip():
            yield stripped
        else:
            yield b""


def replay(
    input_path: Annotated[
        str, typer.Argument(metavar="INPUT.jsonl", help="trace file, or - for stdin")
    ],
    out: Annotated[
        str, typer.Option("--out", "-o", help="output JSONL file, or - for stdout")
    ] = "-",
    fail_on: Annotated[
        Severity | None,
        typer.Option("--fail-on", help="exit 1 when a fault of this severity or worse occurs"),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="settings file (TOML); see docs/settings.md")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="no progress bar, no summary")
    ] = False,
    partitions: Annotated[
        int,
        typer.Option(
            "--partitions",
            min=0,
            help=(
                "place sessions on this many partitions with Kafka's murmur2 partitioner, "
                "one engine and one idle-expiry clock each, as a worker fleet would "
                "(0: one engine for the whole trace)"
            ),
        ),
    ] = 0,
) -> None:
    """Run the integrity engine over a recorded trace (one input event per line).

    Every output event is written as one JSON object per line, in the order
    produced; a line that is not a valid event becomes an ``event.rejected``
    and processing goes on. Blank lines are skipped. With ``--partitions N`` the
    outputs equal those of workers on an input topic of N partitions (idle expiry
    keeps one clock per partition; a line with no readable session goes to 0).
    """
    err = Console(stderr=True)
    try:
        settings = load_settings(config)
    except ValueError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    engines = [Engine(settings.engine) for _ in range(max(partitions, 1))]
    summary = OutputSummary()
    topic = "stdin" if input_path == "-" else Path(input_path).name
    with ExitStack() as stack:
        try:
            source = (
                sys.stdin.buffer
                if input_path == "-"
                else stack.enter_context(open(input_path, "rb"))
            )
            sink = sys.stdout.buffer if out == "-" else stack.enter_context(open(out, "wb"))
        except OSError as exc:
            err.print(f"[red]error:[/] {exc.strerror}: {exc.filename}")
            raise typer.Exit(2) from exc
        total = _count_lines(input_path)
        show = not quiet and err.is_terminal
        progress = stack.enter_context(
            Progress(
                TextColumn("replay"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                disable=not show,
                transient=True,
            )
        )
        task = progress.add_task("replay", total=total)
        for index, line in enumerate(_lines(source)):
            progress.advance(task)
            if not line:
                continue
            summary.inputs += 1
            partition = line_partition(line, partitions) if partitions > 0 else -1
            engine = engines[max(partition, 0)]
            for event in engine.process_raw(line, Source(topic, partition, index)):
                summary.add(event)
                sink.write(encode_output(event))
                sink.write(b"\n")
        sink.flush()
    if not quiet:
        summary.render(err)
    if fail_on is not None and summary.reaches(fail_on):
        raise typer.Exit(1)


def _count_lines(path: str) -> int | None:
    if path == "-":
        return None
    try:
        with open(path, "rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return None
