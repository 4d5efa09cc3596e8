"""``spanguard kafka``: start, stop and inspect the project's local Kafka broker.

The bootstrap address is the only thing written to standard output, so scripts can do::

    export KAFKA_BOOTSTRAP="$(spanguard kafka start)"

Messages go to standard error; errors exit with code 1.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from streams.kafka.broker import DEFAULT_HOME, BrokerError, LocalBroker

kafka_app = typer.Typer(
    name="kafka",
    help="Run the local single-node Kafka broker (KRaft, 127.0.0.1 only).",
    no_args_is_help=True,
)

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

HomeOption = Annotated[
    Path,
    typer.Option(
        "--home",
        help="Broker directory (config, PID file, broker.log, data/).",
        file_okay=False,
    ),
]


def _broker(home: Path, port: int = 9092, controller_port: int | None = None) -> LocalBroker:
    return LocalBroker(
        home=home,
        port=port,
        controller_port=controller_port if controller_port is not None else port + 1,
    )


def _fail(exc: BrokerError) -> typer.Exit:
    _err.print(f"[bold red]error:[/] {exc}", markup=True)
    return typer.Exit(code=1)


@kafka_app.command("start")
def start(
    port: Annotated[int, typer.Option("--port", "-p", help="Client (PLAINTEXT) port.")] = 9092,
    controller_port: Annotated[
        int | None,
        typer.Option("--controller-port", help="KRaft controller port [default: port + 1]."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the broker to answer.")
    ] = 60.0,
    home: HomeOption = DEFAULT_HOME,
) -> None:
    """Start the broker in the background (fetching its jars once) and print its address."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    broker = _broker(home, port, controller_port)
    try:
        current = broker.status()
        if current.running:
            _err.print(f"Kafka broker already running (pid {current.pid}) at {current.bootstrap}")
            _out.print(current.bootstrap)
            return
        _err.print(f"starting Kafka broker on {broker.bootstrap} (log: {broker.log_file}) ...")
        bootstrap = broker.start(timeout=timeout)
    except BrokerError as exc:
        raise _fail(exc) from exc
    pid = broker.status().pid
    _err.print(f"Kafka broker started (pid {pid})")
    _out.print(bootstrap)


@kafka_app.command("stop")
def stop(
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait after SIGTERM before SIGKILL.")
    ] = 30.0,
    home: HomeOption = DEFAULT_HOME,
) -> None:
    """Stop the broker started from HOME (only the process whose PID it recorded)."""
    broker = _broker(home)
    try:
        current = broker.status()
        stopped = broker.stop(timeout=timeout)
    except BrokerError as exc:
        raise _fail(exc) from exc
    if stopped:
        _err.print(f"Kafka broker stopped (pid {current.pid}, was {current.bootstrap})")
    else:
        _err.print("Kafka broker was not running")


@kafka_app.command("status")
def status(home: HomeOption = DEFAULT_HOME) -> None:
    """Print the broker's address when it runs (exit 0); exit 3 when it does not."""
    broker = _broker(home)
    try:
        current = broker.status()
        answering = current.running and broker.is_answering(timeout=5.0)
    except BrokerError as exc:
        raise _fail(exc) from exc
    if not current.running:
        _err.print(f"Kafka broker is not running (home: {current.home})")
        raise typer.Exit(code=3)
    state = "answering" if answering else "NOT answering yet"
    _err.print(f"Kafka broker running (pid {current.pid}), {state}; log: {current.log_file}")
    _out.print(current.bootstrap)
