"""The ``spanguard`` command line."""

from __future__ import annotations

from typing import Annotated

import typer

from spanguard.streams.cli.broker import kafka_app
from spanguard.streams.cli.cluster import consume, produce, worker
from spanguard.streams.cli.demo import demo
from spanguard.streams.cli.privacy import privacy_scan_command
from spanguard.streams.cli.process import tune_gc
from spanguard.streams.cli.replay import replay
from spanguard.streams.cli.rules import check_rules
from spanguard.streams.cli.sim_cli import quality, simulate
from spanguard.streams.version import build_version

app = typer.Typer(
    name="spanguard",
    help="Guard the context of LLM agents: stale scores, ungated evictions, dropped referents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's plain help: rich's panels print a type for every flag ("<bool>").
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"spanguard {build_version()}")
        raise typer.Exit()


@app.callback()
def _runtime(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    tune_gc()


app.command()(replay)
app.command()(worker)
app.command()(produce)
app.command()(consume)
app.command()(demo)
app.command()(simulate)
app.command()(quality)
app.command(name="check-rules")(check_rules)
app.command(name="privacy-scan")(privacy_scan_command)
app.add_typer(kafka_app, name="kafka", help="Run the project's local Kafka broker (KRaft).")

if __name__ == "__main__":
    app()
