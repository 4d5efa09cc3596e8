"""Debian's Prometheus, promtool, Alertmanager, amtool and Chromium, used by the tests.

A missing binary skips the test with the apt command that installs it, except
under ``.ci/run`` (``SPANGUARD_REQUIRE_TOOLS=1``), where it fails: CI installs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from spanguard.streams.engine.engine import Engine
from spanguard.streams.fleet.metrics import FleetMetrics, engine_figures
from spanguard.streams.localbroker.broker import free_ports

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "spanguard.json"
GRAFANA_MACROS = {"$__rate_interval": "1m", "$__range": "5m", "$tenant": ".*"}
PACKAGES = {
    "chromium": "chromium",
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
}


def tool(name: str) -> str:
    """The path of a Debian monitoring binary (skip or fail when it is missing)."""
    found = shutil.which(name)
    if found is not None:
        return found
    hint = f"{name} is missing: apt-get install -y {PACKAGES.get(name, name)}"
    if os.environ.get("SPANGUARD_REQUIRE_TOOLS") == "1":
        pytest.fail(hint)
    pytest.skip(hint)


def http_json(url: str, body: Any = None, timeout: float = 5.0) -> Any:
    """GET (or POST ``body`` as JSON) and decode the JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Poll ``url`` until it answers 200; fail with the log if the process dies."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{url} died at start:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not ready after {timeout}s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@contextmanager
def running(argv: list[str], ready_url: str, log: Path, timeout: float = 60) -> Iterator[None]:
    """Run ``argv`` until the block ends (stopped with SIGTERM, then SIGKILL)."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(ready_url, process, log, timeout)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


ALERTMANAGER_CONFIG = """\
route:
  receiver: blackhole
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: blackhole
"""


@contextmanager
def alertmanager(tmp: Path, name: str = "am", config: str = ALERTMANAGER_CONFIG) -> Iterator[str]:
    """A real Alertmanager (no clustering) on a free port; yields its base URL."""
    with _server(
        "prometheus-alertmanager", tmp / name, "alertmanager", config, "--storage.path"
    ) as url:
        yield url


@contextmanager
def prometheus(tmp: Path, config: str, rule_files: Sequence[Path] = ()) -> Iterator[str]:
    """A real Prometheus on a free port with ``config`` (rule files copied next to it)."""
    home = tmp / "prometheus"
    home.mkdir()
    for rules in rule_files:
        shutil.copy(rules, home / rules.name)
    with _server("prometheus", home, "prometheus", config, "--storage.tsdb.path") as url:
        yield url


@contextmanager
def _server(binary: str, home: Path, name: str, config: str, storage_flag: str) -> Iterator[str]:
    """Run ``binary`` from ``home`` with ``<name>.yml`` = ``config``, its storage in
    ``home/data`` and its web API on a free port, until ``/-/ready``; yields its base
    URL. Alertmanager runs without clustering."""
    home.mkdir(exist_ok=True)
    (home / f"{name}.yml").write_text(config)
    [port] = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    argv = [
        tool(binary),
        f"--config.file={home / f'{name}.yml'}",
        f"{storage_flag}={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    if name == "alertmanager":
        argv.append("--cluster.listen-address=")
    with running(argv, f"{url}/-/ready", home / f"{name}.log"):
        yield url


def exposed_metrics() -> set[str]:
    """Series names a worker exposes after one tenant's records (counters born at 0)."""
    metrics = FleetMetrics(5, engine_figures(lambda: [Engine()]), rules=[("r", "warning")])
    metrics.observe_record("t", [], time.time())
    metrics.set_consumer_lag({0: 0})
    metrics.gate_latency.observe(0.1)
    metrics.latency.labels("span.added").observe(0.1)
    text = metrics.render().decode()
    return set(re.findall(r"^(\w+?)(?:\{| )", text, re.M))


def dashboard_queries() -> list[str]:
    """Every PromQL query of the Grafana dashboard, Grafana's variables filled in."""
    board = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for macro, value in GRAFANA_MACROS.items():
                expr = expr.replace(macro, value)
            queries.append(expr)
    return queries
