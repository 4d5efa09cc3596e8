"""The dashboard's compaction views in Debian's headless Chromium: the fleet view's
compacted sessions filtered by outcome, and the session inspector's compactions
(tokens before/after, what was modified, created, merged and removed, keys lost, the
faults, strategy / trigger, outcome) with their timeline markers.

The page is the real ``dashboard.html``; the API behind it is a local server that
answers ``/fleet`` and ``/sessions/...`` with the real views (:func:`merge_views`,
:func:`session_view`) of a trace fed through the worker's combiner and the
aggregator's evaluator (no broker needed)."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from spanguard.streams.app.web import dashboard_html
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.fleet_view import local_view, merge_views
from spanguard.streams.fleet.recent import RecentRecords
from spanguard.streams.fleet.rules import default_rules
from spanguard.streams.fleet.session_view import session_view
from tests.fleet.compactions import combine, fleet_trace
from tests.fleet.monitoring_stack import tool
from tests.fleet.png import read_png

if TYPE_CHECKING:
    from playwright.sync_api import Page

CRIT = (0xFF, 0x5C, 0x5C)
OK = (0x4C, 0xC3, 0x8A)
WARN = (0xF5, 0xB8, 0x41)


@dataclass
class Api:
    """The stand-in worker: its base URL and the fleet requests it answered."""

    url: str
    fleet_queries: list[str]


@pytest.fixture(scope="module")
def api() -> Iterator[Api]:
    _, recent, partials = combine(fleet_trace())
    evaluator = FleetEvaluator(FleetSettings(), default_rules())
    for partial in partials:
        for start, counts in sorted(partial.windows.items()):
            evaluator.merge(partial.tenant, start, counts, 0.0)
    queries: list[str] = []
    page = dashboard_html()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path == "/":
                self._send(200, page, "text/html")
            elif url.path == "/fleet":
                queries.append(url.query)
                outcome = query.get("outcome", [None])[0]
                self._json(merge_views([local_view(evaluator)], outcome=outcome))
            elif url.path.startswith("/sessions/"):
                tenant, session = (urllib.parse.unquote(p) for p in url.path.split("/")[2:4])
                self._json(view(recent, tenant, session))
            else:
                self._send(404, b"{}", "application/json")

        def _json(self, data: Any) -> None:
            self._send(200 if data is not None else 404, orjson.dumps(data), "application/json")

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
        yield Api(f"http://127.0.0.1:{server.server_address[1]}", queries)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def view(recent: RecentRecords, tenant: str, session: str) -> dict[str, Any] | None:
    return session_view(tenant, session, None, recent.get(tenant, session))


@pytest.fixture(scope="module")
def page(api: Api) -> Iterator[Page]:
    chromium = tool("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"],
        )  # fmt: skip
        try:
            made = browser.new_page(viewport={"width": 1500, "height": 1100})
            errors: list[str] = []
            made.on("pageerror", lambda exc: errors.append(str(exc)))
            made.goto(api.url + "/")
            made.wait_for_selector("#compacted tbody tr[data-session]", timeout=30_000)
            yield made
            assert errors == []
        finally:
            browser.close()


def rows(page: Page) -> list[tuple[str, str, str]]:
    """(outcome, tenant, session) of each listed compacted session, in order."""
    return [
        tuple(r)
        for r in page.eval_on_selector_all(
            "#compacted tbody tr[data-session]",
            "rs => rs.map(r => [r.dataset.outcome, r.dataset.tenant, r.dataset.session])",
        )
    ]


def test_the_fleet_view_filters_sessions_by_compaction_outcome(page: Page) -> None:
    everything = rows(page)
    assert everything == [
        ("critical", "broke", "b3"),
        ("critical", "broke", "b0"),
        ("critical", "broke", "b1"),
        ("critical", "broke", "b2"),
        ("warning", "acme", "a0"),
        ("clean", "acme", "a1"),
        ("clean", "acme", "a2"),
        ("clean", "acme", "a3"),
    ]
    for outcome in ("critical", "warning", "clean"):
        page.select_option("#compaction-filter", outcome)
        shown = rows(page)
        assert shown == [r for r in everything if r[0] == outcome], outcome
        assert (page.text_content("#compacted-caption") or "").startswith(
            f"{len(shown)} of {len(everything)} session(s)"
        )
    page.select_option("#compaction-filter", "")
    assert rows(page) == everything
    # The filter survives the next poll (the page re-renders every 2 s).
    page.select_option("#compaction-filter", "warning")
    page.evaluate("refreshFleet()")
    assert rows(page) == [("warning", "acme", "a0")]
    page.select_option("#compaction-filter", "")
    cards = dict(
        page.eval_on_selector_all(
            "#cards .card", "cs => cs.map(c => [c.querySelector('.k').textContent, "
            "c.querySelector('.v').textContent])"
        )
    )  # fmt: skip
    assert cards["compactions"] == "12" and cards["critical compactions"] == "6"
    assert cards["thrashing sessions"] == "1" and cards["keys lost"] == "17"
    per_tenant = dict(
        page.eval_on_selector_all(
            "#tenants tbody tr",
            "rs => rs.map(r => [r.dataset.tenant, r.querySelector('td.compactions').textContent])",
        )
    )
    assert per_tenant == {"acme": "0 / 1 / 4", "broke": "6 / 0 / 1"}


def test_the_inspector_shows_each_compaction(page: Page, tmp_path: Path) -> None:
    page.select_option("#compaction-filter", "critical")
    page.click("#compacted tr[data-session='b3'] a.session-link")
    page.wait_for_function(
        "() => document.getElementById('timeline').dataset.session === 'broke/b3'"
        " && document.querySelectorAll('#session-compactions tr.compaction').length === 4",
        timeout=15_000,
    )
    table = page.eval_on_selector_all(
        "#session-compactions tr.compaction",
        """rs => rs.map(r => ({rewrite: r.dataset.rewrite, outcome: r.dataset.outcome,
            cells: [...r.children].map(c => c.textContent),
            kinds: [...r.querySelectorAll('td.faults .sev')].map(s => s.dataset.kind)}))""",
    )
    # Newest first.
    assert [r["rewrite"] for r in table] == ["b3-rw13", "b3-rw12", "b3-rw11", "b3-rw10"]
    assert [r["outcome"] for r in table] == ["critical", "critical", "critical", "clean"]
    newest, first = table[0], table[-1]
    assert newest["kinds"] == ["COMPACTION_THRASHING"] and first["kinds"] == []
    seq, rewrite, how, outcome, tokens, spans, modified, created, merged, removed, keys, *_ = first[
        "cells"
    ]
    assert (seq, rewrite, how, outcome) == ("10", "b3-rw10", "summarize / threshold", "clean")
    assert tokens == "1200 \u2192 500 (\u2212700)" and spans == "6 \u2192 3"
    assert (modified, created, merged, removed) == ("sys", "sum1", "u1, a1, t1", "\u2013")
    assert keys == "9 \u2192 9"
    assert newest["cells"][4] == "5000 \u2192 4900 (\u2212100)"
    markers = page.eval_on_selector_all(
        "#timeline rect.compaction-marker", "ms => ms.map(m => m.dataset.outcome)"
    )
    assert markers == ["clean", "critical", "critical", "critical"]

    # A split tool pair: what was removed, both faults, the trimmer that did it.
    page.click("#compacted tr[data-session='b0'] a.session-link")
    page.wait_for_function(
        "() => document.getElementById('timeline').dataset.session === 'broke/b0'"
        " && document.querySelectorAll('#session-compactions tr.compaction').length === 1",
        timeout=15_000,
    )
    split = page.locator("#session-compactions tr.compaction")
    assert split.locator("td.removed").text_content() == "a3"
    assert split.locator("td").nth(2).text_content() == "sliding_window / overflow"
    kinds = split.locator("td.faults .sev").evaluate_all("s => s.map(e => e.dataset.kind)")
    assert kinds == ["TOOL_PAIR_SPLIT", "UNGATED_EVICTION"]

    # A summary that lost its keys: a warning, keys lost said.
    page.select_option("#compaction-filter", "warning")
    page.click("#compacted tr[data-session='a0'] a.session-link")
    page.wait_for_function(
        "() => document.getElementById('timeline').dataset.session === 'acme/a0'"
        " && document.querySelectorAll('#session-compactions tr.compaction').length === 2",
        timeout=15_000,
    )
    lost = page.locator("#session-compactions tr.compaction").first
    assert lost.get_attribute("data-outcome") == "warning"
    assert lost.locator("td.keys").text_content() == "14 \u2192 3 (11 lost)"
    check_pixels(page, tmp_path)


def check_pixels(page: Page, tmp_path: Path) -> None:
    """In the pixels: the outcome badges are drawn in their colours (critical red in
    the fleet list, warning amber and clean green in the inspector)."""
    page.screenshot(path=str(tmp_path / "compactions.png"), full_page=True)
    page.select_option("#compaction-filter", "critical")
    badge = "#compacted tbody tr[data-session] td:first-child .sev"
    assert share(shot(page, badge), CRIT) > 0.5
    for outcome, colour in (("warning", WARN), ("clean", OK)):
        cell = f"#session-compactions tr[data-outcome='{outcome}'] td .sev"
        assert share(shot(page, cell), colour) > 0.5, outcome
    page.select_option("#compaction-filter", "")


def shot(page: Page, selector: str) -> Any:
    """The pixels of the first element matching ``selector``. Its box is read in one
    script and the page shot clipped to it: the page re-renders its tables every poll,
    so an element handle may be replaced (by an identical one) at any moment."""
    box = page.evaluate(
        """sel => { const r = document.querySelector(sel).getBoundingClientRect();
            return {x: r.x + window.scrollX, y: r.y + window.scrollY,
                    width: r.width, height: r.height}; }""",
        selector,
    )
    return read_png(page.screenshot(clip=box, full_page=True))


def share(image: Any, colour: tuple[int, int, int]) -> float:
    """The share of an image's pixels within 12 of ``colour`` on every channel."""
    pixels = image.region(0, 0, image.width, image.height)
    close = [p for p in pixels if all(abs(a - b) <= 12 for a, b in zip(p, colour, strict=True))]
    return len(close) / len(pixels)
