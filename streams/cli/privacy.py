"""``spanguard privacy-scan``: prove that no span text or clear referent key left the service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from spanguard.streams.cli.cluster import run_on_kafka
from spanguard.streams.kafka_io.privacy import privacy_scan
from spanguard.streams.settings import load_settings

_MAX_SHOWN = 50


def privacy_scan_command(
    trace: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE.jsonl", help="the trace that was processed (its texts are searched for)"
        ),
    ],
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="also search every file under this directory"),
    ] = None,
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", help="also read this topic (repeatable)"),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="settings file (TOML); see docs/settings.md")
    ] = None,
) -> None:
    """Search every topic of the prefix (but the input and dead-letter topics) for span text.

    Looks for every span text of 8+ characters in TRACE.jsonl and every referent key
    the extractor finds there, in clear. Exit 0 when none is found, 1 with a report
    when one is, 2 on bad arguments. The report shows only the first characters of
    what it found and its sha256.
    """
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    try:
        settings = load_settings(config)
        lines = trace.read_bytes().splitlines()
    except (OSError, ValueError) as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from None
    if data_dir is not None and not data_dir.is_dir():
        err.print(f"error: {data_dir} is not a directory", markup=False)
        raise typer.Exit(2)
    report = run_on_kafka(
        settings, lambda: privacy_scan(settings, lines, data_dir, tuple(topic or ()))
    )
    needles = report.needles
    out.print(
        f"searched {len(report.topics)} topic(s), {report.records} record(s), "
        f"{report.files} file(s) for {len(needles.texts)} span text(s) and "
        f"{len(needles.keys)} referent key(s) ({len(needles.skipped_keys)} key(s) skipped: "
        "they are also ids)",
        markup=False,
    )
    if report.clean:
        out.print("clean: no span text and no clear referent key found", markup=False)
        return
    out.print(f"LEAK: {len(report.findings)} finding(s)", markup=False)
    for finding in report.findings[:_MAX_SHOWN]:
        out.print(f"  {finding.describe()}", markup=False)
    if len(report.findings) > _MAX_SHOWN:
        out.print(f"  ... and {len(report.findings) - _MAX_SHOWN} more", markup=False)
    raise typer.Exit(1)
