"""Fleet workers as real subprocesses on the test broker (a :class:`Pipeline` with their
settings), reading their alerts, and a stand-in for Alertmanager's API."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from spanguard.streams.app.fleet import FLEET_SUFFIX
from spanguard.streams.app.processes import WorkerProcess
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.rules import parse_rules
from tests.fleet.traces import Run
from tests.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
RULES_YAML = """
rules:
  - {name: critical, kind: fault_severity, at_least: critical}
  - {name: gaps, kind: fault_count, fault: SCORE_PROVENANCE_GAP, above: 3}
  - {name: out-of-order, kind: fault_count, fault: OUT_OF_ORDER, above: 0}
  - {name: unhealthy, kind: healthy_share, below: 0.5, min_cycles: 2}
"""
"""The rules of the real-broker tests: three that the demo fleet fires, one it must not."""
TOKEN = "test-token-" + uuid.uuid4().hex[:8]
TENANT_TOKEN = "tenant-0-token-" + uuid.uuid4().hex[:8]
TOKEN_TENANT = "tenant-0"
"""A token scoped to one tenant (fleet api_tokens)."""
GRACE_SECONDS = 5.0


def fleet_pipeline(bootstrap: str, prefix: str, tmp: Path, hook: str, idle: float) -> Pipeline:
    """A pipeline of fleet workers: web server and API token on, fleet monitoring with
    :data:`RULES_YAML`, alerts posted to ``hook`` (start them with :func:`start_fleet_worker`)."""
    rules = tmp / "rules.yaml"
    rules.write_text(RULES_YAML, encoding="utf-8")
    fleet = FleetSettings(
        idle_seconds=idle,
        tick_seconds=0.5,
        grace_seconds=GRACE_SECONDS,
        rules_file=rules,
        alertmanager_urls=[hook],
        alertmanager_attempts=5,
    )
    settings = json.loads(fleet.model_dump_json())  # secrets are masked in a dump: set it
    settings["api_tokens"] = [{"token": TENANT_TOKEN, "tenants": [TOKEN_TENANT]}]
    env = {
        "SPANGUARD_WEB_ENABLED": "true",
        "SPANGUARD_WEB_HOST": "127.0.0.1",
        "SPANGUARD_API_TOKEN": TOKEN,
        "SPANGUARD_FLEET": json.dumps(settings),
    }
    return Pipeline(bootstrap, prefix, tmp, env, journal=False)


def start_fleet_worker(pipeline: Pipeline, name: str, port: int) -> WorkerProcess:
    """Start fleet worker ``name`` with its web server on ``port``."""
    return pipeline.start_worker(name, env={"SPANGUARD_WEB_PORT": str(port)})


def expected_alerts(replay: Run) -> list[tuple[str, str, str, str]]:
    """(alert id, rule, tenant, status) that the pure evaluator produces for the trace,
    its idle timer included."""
    settings = FleetSettings(grace_seconds=GRACE_SECONDS, idle_seconds=1)
    ev = FleetEvaluator(settings, parse_rules(RULES_YAML))
    alerts = replay.feed(ev)
    for tenant in ev.ticks_due(10.0):
        alerts.extend(ev.tick(tenant, 10.0).alerts)
    return sorted((a.alert_id, a.rule, a.tenant, a.status) for a in alerts)


def read_alerts(
    pipeline: Pipeline, want: int, timeout: float = 150.0, settled: bool = True
) -> list[dict[str, Any]]:
    """Every record of the pipeline's alerts topic from the start, once ``want`` arrived
    (fails after ``timeout``), read to the topic's end offsets. With ``settled`` those are
    taken once the data path committed all its input and then the fleet's aggregators all
    the partials it wrote: an alert their input makes twice is read, not waited out."""

    def seen(records: list[bytes]) -> str:
        alerts = sorted((a["rule"], a["tenant"], a["status"]) for a in map(orjson.loads, records))
        return f"{len(records)} of {want} alerts: {alerts}"

    aggregators = (pipeline.topic(FLEET_SUFFIX), f"{pipeline.data_path()[1]}-fleet")
    records = pipeline.read_topics(
        [pipeline.topic("alerts")],
        lambda found: len(found) >= want,
        timeout,
        seen,
        settle=[pipeline.data_path(), aggregators] if settled else [],
    )
    return [orjson.loads(r) for r in records]


@dataclass
class Http:
    """Small blocking HTTP client for a worker's web port."""

    port: int
    token: str | None = None

    def get(self, path: str, auth: bool = True) -> tuple[int, bytes, str]:
        """``(status, body, content type)``; HTTP errors are returned, not raised."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if auth and self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Content-Type", "")

    def json(self, path: str) -> Any:
        status, body, _ = self.get(path)
        assert status == 200, (path, status, body[:500])
        return json.loads(body)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until ``/readyz`` answers 200 (bounded)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                status, body, _ = self.get("/readyz", auth=False)
                if status == 200:
                    return
                last = (status, body)
            except OSError as exc:
                last = exc
            time.sleep(0.2)
        raise AssertionError(f"worker on port {self.port} not ready after {timeout}s: {last}")


@dataclass
class WebhookReceiver:
    """A local HTTP server that records every POSTed JSON body (as Alertmanager's
    ``/api/v2/alerts`` would receive them: arrays of postable alerts)."""

    received: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> str:
        """Serve on a free port; returns its base URL."""
        received = self.received
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with lock:
                    received.append(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
