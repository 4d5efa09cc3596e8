"""Expired sessions on the fleet dashboard (contract 1.2's idle expiry): the worker's
combiner counts them per tenant in the window of their expiry time, the fleet view
adds them up, and the dashboard's card shows the figure (Debian's headless Chromium
on the real ``dashboard.html``; the API behind it is a local server answering
``/fleet`` with the real views, no broker needed)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from spanguard.streams.app.web import dashboard_html
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.fleet_view import local_view, merge_views
from spanguard.streams.fleet.rules import default_rules
from tests.fleet.monitoring_stack import tool
from tests.fleet.traces import Run, run

HOUR = 3600.0
SETTINGS = FleetSettings(window_seconds=HOUR, retention_windows=24 * 5)
"""Hour windows kept for five days: the whole trace's expiries are retained."""


def expiring_fleet() -> list[bytes]:
    """Two tenants over three days on one partition: ``acme``'s six sessions stop after
    a few hours (expired a day later, two come back refused); of ``beta``'s five, two
    stay busy, one closes before it could expire, two stop (expired)."""
    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    scripts = [SessionScript(f"a{i}", tenant="acme") for i in range(6)]
    scripts += [SessionScript(f"b{i}", tenant="beta") for i in range(5)]
    trace: list[bytes] = []
    for hour in range(0, 72, 3):
        for n, script in enumerate(scripts):
            busy = script.tenant == "beta" and n < 8
            back = script.session_id in ("a0", "a1") and hour == 60
            if not (hour <= 6 or busy or back):
                continue
            if script.session_id == "b2" and hour == 6:
                event = script.close()
            elif script.session_id == "b2" and hour > 6:
                continue
            else:
                event = script.add(f"h{hour}")
            event["ts"] = (start + timedelta(hours=hour, minutes=n)).isoformat()
            trace.append(orjson.dumps(event))
    return trace


@pytest.fixture(scope="module")
def processed() -> Run:
    return run(expiring_fleet(), window_seconds=HOUR)


def fleet_view(processed: Run) -> dict[str, Any]:
    evaluator = FleetEvaluator(SETTINGS, default_rules())
    processed.feed(evaluator)
    return merge_views([local_view(evaluator)])


def test_the_fleet_view_counts_each_expired_session_once(processed: Run) -> None:
    assert processed.engine.stats.sessions_expired == 8
    assert processed.engine.stats.sessions_closed == 1
    refused = [o for o in processed.outputs if getattr(o, "reason", None) == "SESSION_EXPIRED"]
    assert {o.session_id for o in refused} == {"a0", "a1"}
    view = fleet_view(processed)
    assert view["totals"]["sessions_expired"] == 8
    per_tenant = Counter(
        {t["tenant"]: sum(w["expired"] for w in t["windows"]) for t in local_view_rows(processed)}
    )
    assert per_tenant == Counter({"acme": 6, "beta": 2})


def local_view_rows(processed: Run) -> list[dict[str, Any]]:
    evaluator = FleetEvaluator(SETTINGS, default_rules())
    processed.feed(evaluator)
    return list(local_view(evaluator, windows=200)["tenants"])


def test_each_expiry_lands_in_the_window_of_its_expiry_time(processed: Run) -> None:
    # The sessions that stopped had their last event at hour 6 (minute n): they expire
    # at hour 30 (newest ts + idle_timeout), counted in that hour's window of event
    # time, although the event that expired them came at hour 33.
    windows = {
        (t["tenant"], w["start"]): w["expired"]
        for t in local_view_rows(processed)
        for w in t["windows"]
        if w["expired"]
    }
    assert windows == {("acme", "2026-12-01T15:00:00Z"): 6, ("beta", "2026-12-01T15:00:00Z"): 2}


@pytest.fixture(scope="module")
def api(processed: Run) -> Iterator[str]:
    page = dashboard_html()
    view = orjson.dumps(fleet_view(processed))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/":
                self._send(200, page, "text/html")
            elif self.path.startswith("/fleet"):
                self._send(200, view, "application/json")
            else:
                self._send(404, b"{}", "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_dashboard_shows_the_expired_sessions(api: str) -> None:
    chromium = tool("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"],
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(api + "/")
            page.wait_for_selector("#cards .card", timeout=30_000)
            cards = dict(
                page.eval_on_selector_all(
                    "#cards .card", "cs => cs.map(c => [c.querySelector('.k').textContent, "
                    "c.querySelector('.v').textContent])"
                )
            )  # fmt: skip
            assert errors == []
        finally:
            browser.close()
    assert cards["expired sessions"] == "8"
