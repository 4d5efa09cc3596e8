"""Running ``spanguard worker`` processes: for the demo, the benchmarks and the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from spanguard.streams.localbroker.broker import die_with_parent
from spanguard.streams.settings import Settings

READY = b"Worker]: Ready"


@dataclass
class WorkerProcess:
    """One worker subprocess, its log and its ack journal (if configured)."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    journal: Path | None = None

    def log_text(self) -> str:
        """The worker's log so far."""
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until the worker logged that it is ready; raise with its log otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if READY in self.log.read_bytes():
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)
        raise RuntimeError(
            f"worker {self.name} not ready in {timeout}s:\n{self.log_text()[-4000:]}"
        )

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
    return WorkerProcess(name, process, log, journal)
