"""Running ``spanguard worker`` processes: for the demo, the benchmarks and the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spanguard.streams.localbroker.broker import die_with_parent
from spanguard.streams.settings import Settings

DEFAULT_WEB_PORT = 6066
READY_LINE = "spanguard: ready"
"""What a worker logs once its data path's first assignment is open (restored and
sought): how a supervisor whose workers serve no ``/readyz`` knows they are ready."""


@dataclass
class WorkerProcess:
    """One worker subprocess (or a ``--processes`` supervisor), its log and its ack
    journal (if configured)."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    journal: Path | None = None
    ready_urls: list[str] = field(default_factory=list)
    """The ``/readyz`` of each of its worker processes (none: their web is off)."""
    processes: int = 1

    def log_text(self) -> str:
        """The worker's log so far."""
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until every worker process is ready by the data path's own state: its
        ``/readyz`` answers 200, or, with the web server off, it logged that its first
        assignment is open. Raise with the log otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._ready():
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)
        raise RuntimeError(
            f"worker {self.name} not ready in {timeout}s:\n{self.log_text()[-4000:]}"
        )

    def _ready(self) -> bool:
        if self.ready_urls:
            return all(_answers_ok(url) for url in self.ready_urls)
        return self.log.read_bytes().count(READY_LINE.encode()) >= self.processes

    def kill(self) -> None:
        """SIGKILL: no goodbye, no offset commit, no flush."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM and wait for a clean shutdown (SIGKILL after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def run_processes(count: int, settings: Settings, loglevel: str, config: Path | None) -> int:
    """``spanguard worker --processes N``: N worker processes in one consumer group,
    each with its own data dir and web port (``web_port + i``), sharing this
    terminal's output. SIGINT/SIGTERM stop them all; returns the first non-zero
    exit code (0 when all stopped cleanly)."""
    children = []
    extra = [] if config is None else ["--config", str(config)]
    for i in range(count):
        data_dir = settings.data_dir / f"p{i}"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SPANGUARD_DATA_DIR": str(data_dir),
            "SPANGUARD_WEB_PORT": str(settings.web_port + i),
        }
        children.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "spanguard.streams.cli.main",
                    "worker",
                    "--loglevel",
                    loglevel,
                    *extra,
                ],
                env=env,
                preexec_fn=die_with_parent,  # a killed supervisor leaves no worker behind
            )
        )

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    codes = [child.wait() for child in children]
    return next((code for code in codes if code), 0)


def spawn_worker(
    name: str,
    env: dict[str, str],
    log: Path,
    cwd: Path | None = None,
    journal: Path | None = None,
    args: tuple[str, ...] = (),
) -> WorkerProcess:
    """Start ``python -m spanguard.streams.cli.main worker [args]`` with ``env`` added to this
    environment."""
    log.parent.mkdir(parents=True, exist_ok=True)
    handle = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "spanguard.streams.cli.main", "worker", "--loglevel", "info", *args],
        env={**os.environ, **env},
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=cwd,
    )
    handle.close()
    processes = _processes(args)
    return WorkerProcess(
        name, process, log, journal, _ready_urls({**os.environ, **env}, processes), processes
    )


def _processes(args: Sequence[str]) -> int:
    """How many worker processes ``worker args`` runs (``--processes N``)."""
    if "--processes" in args:
        return int(args[list(args).index("--processes") + 1])
    return 1


def _ready_urls(env: Mapping[str, str], processes: int) -> list[str]:
    """The ``/readyz`` URLs of the worker processes that ``env`` configures (process
    ``i`` serves on ``web_port + i``); none when their web server is off."""
    if env.get("SPANGUARD_WEB_ENABLED", "true").lower() in ("false", "0", "no", "off"):
        return []
    port = int(env.get("SPANGUARD_WEB_PORT", DEFAULT_WEB_PORT))
    return [f"http://127.0.0.1:{port + i}/readyz" for i in range(processes)]


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):  # not listening yet, or 503: not ready
        return False
