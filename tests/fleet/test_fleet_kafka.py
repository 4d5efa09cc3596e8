"""Fleet monitoring on the real broker: two worker subprocesses, a simulated fleet with
injected faults, alerts fleet-wide and exactly once, metrics, the session inspector
routed to the session's worker, and the dashboard in headless Chromium."""

from __future__ import annotations

import contextlib
import math
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from spanguard.schemas import ContextCompacted, IntegrityFault
from spanguard.streams.localbroker.broker import free_ports
from spanguard.streams.sim.scenarios import demo_fleet
from tests.fleet.cluster import (
    ROOT,
    TENANT_TOKEN,
    TOKEN,
    TOKEN_TENANT,
    Http,
    WebhookReceiver,
    expected_alerts,
    fleet_pipeline,
    read_alerts,
    start_fleet_worker,
)
from tests.fleet.monitoring_stack import (
    alertmanager,
    dashboard_queries,
    http_json,
    prometheus,
    tool,
)
from tests.fleet.png import read_png
from tests.fleet.traces import Run, run, shifted
from tests.pipeline import Pipeline

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.kafka

TENANTS = ("tenant-0", "tenant-1", "tenant-2")
FIRING_RULES = ("critical", "gaps", "unhealthy")  # out-of-order must stay silent
IDLE_SECONDS = 25.0


@dataclass
class Cluster:
    """Two fleet workers, the trace they processed and its replay."""

    pipeline: Pipeline
    lines: list[bytes]
    replay: Run
    webhook: WebhookReceiver
    http: list[Http] = field(default_factory=list)


@pytest.fixture(scope="module")
def cluster(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("fleet")
    prefix = f"fleet-{uuid.uuid4().hex[:8]}"
    # Every session's clock starts on a window edge one window back: the whole
    # trace (about 35 s of event time) falls into one tumbling window.
    start = math.floor(time.time() / 60) * 60 - 60
    lines = shifted(demo_fleet(24), start)
    webhook = WebhookReceiver()
    hook = webhook.start()
    pipeline = fleet_pipeline(kafka_bootstrap, prefix, tmp, hook, IDLE_SECONDS)
    made = Cluster(pipeline, lines, run(lines), webhook)
    try:
        for name, port in zip(("a", "b"), free_ports(2), strict=True):
            start_fleet_worker(pipeline, name, port)
            made.http.append(Http(port, TOKEN))
        for worker in pipeline.workers:
            worker.wait_ready(timeout=120)
        for http in made.http:
            http.wait_ready()
        pipeline.produce(lines)
        yield made
    finally:
        for worker in pipeline.workers:
            worker.stop(timeout=30)
        webhook.stop()


def test_dashboard_in_headless_chromium(cluster: Cluster, tmp_path: Path) -> None:
    chromium = tool("chromium")
    from playwright.sync_api import sync_playwright

    injected = {f.kind.value for f in cluster.replay.outputs if isinstance(f, IntegrityFault)}
    port = cluster.http[0].port
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"http://127.0.0.1:{port}/#token={TOKEN}")
            # Every injected fault kind appears in the chart (once the fleet is processed).
            page.wait_for_function(
                "kinds => kinds.every(k => document.querySelector("
                "`#fleet-chart rect.fault-bar[data-kind='${k}']`))",
                arg=sorted(injected),
                timeout=60_000,
            )
            legend = set(
                page.eval_on_selector_all(
                    "#chart-legend span[data-kind]", "s => s.map(e => e.dataset.kind)"
                )
            )
            assert legend == injected
            page.wait_for_selector("#worst a.session-link", timeout=10_000)
            worst = page.eval_on_selector_all(
                "#worst a.session-link", "links => links.map(a => a.dataset.session)"
            )
            assert worst and all(s.startswith("sess-broken-") for s in worst)
            page.wait_for_function(
                "want => JSON.stringify([...document.querySelectorAll("
                "'#tenants tbody tr td:first-child')].map(e => e.textContent)) === want",
                arg=orjson.dumps(list(TENANTS)).decode(),
                timeout=30_000,
            )

            # An alert's sample session opens its timeline (the alerts stay active for
            # IDLE_SECONDS after the fleet's last event; this test runs first).
            page.wait_for_function(
                "tenants => tenants.every(t => document.querySelector("
                "`#alerts tr[data-rule='critical'][data-tenant='${t}'] a.session-link`))",
                arg=list(TENANTS),
                timeout=IDLE_SECONDS * 1000,
            )
            open_timeline(page, page.locator("#alerts a.session-link").first)
            # So does a session of the worst-sessions list.
            open_timeline(page, page.locator("#worst a.session-link").last)
            markers = set(
                page.eval_on_selector_all(
                    "#timeline path.fault-marker", "m => m.map(e => e.dataset.kind)"
                )
            )
            assert {"REWRITE_WITHOUT_INVALIDATION", "POISONED_SPAN"} <= markers
            assert page.locator("#timeline circle.event-marker").count() > 20
            assert page.locator("#spans tbody tr").count() >= 1
            assert page.locator("#lineage li").count() >= 1
            check_compactions(page, cluster)
            check_what_the_dashboard_says(page)
            # kept in the test's temporary directory, to look at (not in the source tree)
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            check_screenshot(page)
            assert errors == []
        finally:
            browser.close()


OKABE_ITO = {"#D55E00", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#CC79A7"}
SEVERITY_ORDER = ["critical", "warning", "info"]


def check_what_the_dashboard_says(page: Page) -> None:
    """Critical kinds first, one time base (UTC) labelled, the weight explained, refused
    evictions and pins per tenant, no silent cap."""
    legend = page.eval_on_selector_all(
        "#chart-legend span[data-kind]", "s => s.map(e => [e.dataset.kind, e.dataset.severity])"
    )
    severities = [severity for _, severity in legend]
    assert (
        severities == sorted(severities, key=SEVERITY_ORDER.index) and severities[0] == "critical"
    )
    assert "UTC" in page.text_content("#status") and "UTC" in page.text_content("#chart-caption")
    assert "9 per critical fault" in page.text_content("#worst-caption")
    # Every tenant keeps its worst sessions.
    tenants = sorted(TENANTS)
    shown = settled_cells(
        page, "#worst tbody tr td:first-child", "textContent", tenants, distinct=True
    )
    assert shown == tenants
    refused = page.eval_on_selector_all("#tenants td.refused", "c => c.map(e => +e.textContent)")
    pins = page.eval_on_selector_all("#tenants td.pins", "c => c.map(e => +e.textContent)")
    assert len(refused) == len(TENANTS) and sum(refused) > 0 and sum(pins) > 0
    assert page.text_content("#tenants-caption").startswith(f"all {len(TENANTS)} tenant")


def check_compactions(page: Page, cluster: Cluster) -> None:
    """The open (broken) session's compactions, and the compacted sessions of the fleet
    filtered by outcome, as the replay made them."""
    session = page.get_attribute("#timeline", "data-session")
    assert session is not None
    tenant, session_id = session.split("/", 1)
    made = [o for o in cluster.replay.outputs if isinstance(o, ContextCompacted)
            and (o.tenant, o.session_id) == (tenant, session_id)]  # fmt: skip
    page.wait_for_function(
        "n => document.querySelectorAll('#session-compactions tr.compaction').length === n",
        arg=len(made),
        timeout=15_000,
    )
    shown = page.eval_on_selector_all(
        "#session-compactions tr.compaction", "rs => rs.map(r => r.dataset.outcome)"
    )
    assert shown == [c.outcome for c in reversed(made)] and "critical" in shown
    critical = sorted({o.session_id for o in cluster.replay.outputs
                       if isinstance(o, ContextCompacted) and o.outcome == "critical"})  # fmt: skip
    page.select_option("#compaction-filter", "critical")
    # The fleet's list fills as the aggregator merges the workers' partials, which may
    # still be on their way after the session's own view is complete.
    listed = settled_cells(page, "#compacted tbody tr[data-session]", "dataset.session", critical)
    assert listed == critical
    page.select_option("#compaction-filter", "")


def settled_cells(
    page: Page, selector: str, field: str, want: list[str], *, distinct: bool = False
) -> list[str]:
    """The sorted ``field`` of the elements ``selector`` finds (each value once with
    ``distinct``), once they equal ``want`` or after 30 s (the caller's assertion then
    says what the page showed): the fleet's lists are redrawn at every refresh of
    ``/fleet``, which merges every worker's view (a worker's view in the middle of a
    merge, or late to answer, shows part of it)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    values = f"[...document.querySelectorAll('{selector}')].map(e => e.{field})"
    read = f"[...new Set({values})].sort()" if distinct else f"{values}.sort()"
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(
            f"want => JSON.stringify({read}) === want",
            arg=orjson.dumps(want).decode(),
            timeout=30_000,
        )
    return list(page.evaluate(read))


def check_screenshot(page: Page) -> None:
    """In the pixels: every panel is drawn (not blank) and every legend swatch shows its
    kind's colour (solid for critical kinds, stripes of it for the others)."""
    for index in range(page.locator("section.panel:visible").count()):
        shot = read_png(page.locator("section.panel:visible").nth(index).screenshot())
        assert len(set(shot.region(0, 0, shot.width, shot.height))) > 8, f"panel {index} is blank"
    legend = page.locator("#chart-legend")
    shot = read_png(legend.screenshot())
    swatches = page.eval_on_selector_all(
        "#chart-legend svg.swatch",
        """(all) => { const box = document.getElementById('chart-legend').getBoundingClientRect();
          return all.map(s => { const r = s.getBoundingClientRect(); const rect = s.firstChild;
            return [s.parentNode.dataset.kind, s.parentNode.dataset.severity,
                    rect.getAttribute('stroke'), r.left - box.left, r.top - box.top,
                    r.width, r.height]; }); }""",
    )
    assert swatches
    critical = [colour for _, severity, colour, *_ in swatches if severity == "critical"]
    assert len(set(critical)) == len(critical) and set(critical) <= OKABE_ITO
    for kind, severity, colour, x, y, w, h in swatches:
        want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        inner = shot.region(round(x) + 3, round(y) + 3, round(w) - 6, round(h) - 6)
        close = [p for p in inner if all(abs(a - b) <= 12 for a, b in zip(p, want, strict=True))]
        share = len(close) / len(inner)
        if severity == "critical":
            assert share > 0.9, (kind, colour, share)
        else:
            assert 0.2 < share < 0.9, (kind, colour, share)  # stripes: colour and dark


def open_timeline(page: Page, link: Locator) -> None:
    """Click a session link and wait for that session's timeline with its faults."""
    tenant, session = link.get_attribute("data-tenant"), link.get_attribute("data-session")
    link.click()
    page.wait_for_function(
        "key => document.getElementById('timeline').dataset.session === key"
        " && document.querySelectorAll('#timeline path.fault-marker').length > 0",
        arg=f"{tenant}/{session}",
        timeout=15_000,
    )
    assert page.text_content("#session-title") == f"{tenant} / {session}"
    assert not page.locator("#session-view").is_hidden()


def test_alerts_are_fleet_wide_and_sent_exactly_once(cluster: Cluster) -> None:
    expected = expected_alerts(cluster.replay)
    want = {(r, t, s) for r in FIRING_RULES for t in TENANTS for s in ("firing", "resolved")}
    assert {(rule, tenant, status) for _, rule, tenant, status in expected} == want

    alerts = read_alerts(cluster.pipeline, len(expected))
    got = Counter((a["alert_id"], a["rule"], a["tenant"], a["status"]) for a in alerts)
    assert all(n == 1 for n in got.values()), f"sent more than once: {got}"
    assert sorted(got) == expected
    for alert in alerts:
        assert alert["session_id"] == "*" and alert["caused_by"] is None
        if alert["status"] == "firing" and alert["rule"] != "unhealthy":
            assert alert["sessions"], alert
            assert all(s.startswith("sess-broken-") for s in alert["sessions"])
    # Each tenant's alerts were aggregated on one worker, but the tenants' sessions
    # were processed by both: the partitions of the input were split between them.
    # The metric counts processing (a rebalance redoes records past the last
    # checkpoint); the fleet's counts come from transactional partials: exact.
    events = [_metric(h, "spanguard_events_total") for h in cluster.http]
    assert all(n > 0 for n in events) and sum(events) >= len(cluster.lines)
    assert cluster.http[0].json("/fleet")["totals"]["events"] == len(cluster.lines)

    # Alertmanager's API received every alert (as arrays of postable alerts): each
    # firing (rule, tenant), and each resolved one with its endsAt in the past.
    firing = {(rule, tenant) for _, rule, tenant, status in expected if status == "firing"}
    resolved = {(rule, tenant) for _, rule, tenant, status in expected if status == "resolved"}

    def posted() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        alerts = [a for body in list(cluster.webhook.received) for a in body]
        keys = {(a["labels"]["alertname"], a["labels"]["tenant"]) for a in alerts}
        ended = {(a["labels"]["alertname"], a["labels"]["tenant"]) for a in alerts if _ended(a)}
        return keys, ended

    deadline = time.monotonic() + 30
    while posted() != (firing, resolved) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert posted() == (firing, resolved)


def _ended(alert: dict[str, Any]) -> bool:
    """A resolved postable alert: its endsAt is not in the future of its post."""
    ends = datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00")).timestamp()
    return ends <= time.time()


def _metric(http: Http, name: str, **labels: str) -> float:
    status, body, content_type = http.get("/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    return sum(
        sample.value
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def test_metrics_endpoint_parses_and_adds_up_across_workers(cluster: Cluster) -> None:
    faults = [o for o in cluster.replay.outputs if isinstance(o, IntegrityFault)]
    deadline = time.monotonic() + 60
    while sum(_metric(h, "spanguard_events_total") for h in cluster.http) < len(cluster.lines):
        assert time.monotonic() < deadline, "events not all processed"
        time.sleep(0.2)
    # Counters count processing: a record redone after a rebalance counts again, so
    # the sums are at least the trace's (the fleet's own counts are exact, above).
    total = sum(_metric(h, "spanguard_faults_total") for h in cluster.http)
    assert total >= len(faults)
    critical = sum(
        _metric(h, "spanguard_faults_total", kind="UNGATED_EVICTION", severity="critical")
        for h in cluster.http
    )
    assert critical >= sum(f.kind == "UNGATED_EVICTION" for f in faults) > 0
    processed = sum(_metric(h, "spanguard_processing_seconds_count") for h in cluster.http)
    assert processed >= len(cluster.lines)
    assert cluster.http[0].json("/fleet")["totals"]["faults"] == len(faults)
    # Everything is processed: the lag gauges (refreshed every tick) come down to zero.
    deadline = time.monotonic() + 30
    while sum(_metric(h, "spanguard_consumer_lag") for h in cluster.http) != 0:
        assert time.monotonic() < deadline, "consumer lag never reached 0"
        time.sleep(0.2)
    partitions = {
        sample.labels["partition"]
        for h in cluster.http
        for family in text_string_to_metric_families(h.get("/metrics")[1].decode())
        for sample in family.samples
        if sample.name == "spanguard_consumer_lag"
    }
    assert partitions == {"0", "1", "2", "3"}, "each worker reports its own partitions"
    names = {
        family.name
        for family in text_string_to_metric_families(cluster.http[0].get("/metrics")[1].decode())
    }
    assert {
        "spanguard_events",
        "spanguard_faults",
        "spanguard_decisions",
        "spanguard_pins",
        "spanguard_dead_letters",
        "spanguard_duplicates",
        "spanguard_processing_seconds",
        "spanguard_consumer_lag",
        "spanguard_alerts",
    } <= names
    assert cluster.http[0].get("/metrics", auth=False)[0] == 401


def test_api_fleet_view_session_inspector_and_probes(cluster: Cluster) -> None:
    a, b = cluster.http
    assert a.get("/healthz", auth=False)[0] == 200
    assert a.get("/readyz", auth=False)[0] == 200
    assert a.get("/fleet", auth=False)[0] == 401

    broken = {f"sess-broken-{i:04d}" for i in range(0, 24, 4)}
    deadline = time.monotonic() + 60
    while True:
        fleet = a.json("/fleet")
        tenants = [t["tenant"] for t in fleet["tenants"]]
        worst = {w["session_id"] for w in fleet["worst_sessions"][:6]}
        if tenants == list(TENANTS) and worst == broken:
            break
        assert time.monotonic() < deadline, fleet
        time.sleep(0.5)
    assert fleet["workers"] == 2 and fleet["unreachable_workers"] == 0
    assert [t["tenant"] for t in b.json("/fleet")["tenants"]] == list(TENANTS)

    # The same session from either worker: one answers, the other forwards to it.
    session = "/sessions/tenant-0/sess-broken-0000"
    first, second = a.json(session), b.json(session)
    assert first == second
    assert first["status"] == "live" and first["spans"]
    kinds = {f["kind"] for f in first["faults"]}
    assert {"REWRITE_WITHOUT_INVALIDATION", "UNGATED_EVICTION", "REFERENT_DROPPED"} <= kinds
    assert a.get("/sessions/tenant-0/no-such-session")[0] == 404
    assert b.get(session, auth=False)[0] == 401
    # Its compactions (contract 1.2), each with the faults it lists, as the replay made them.
    made = [
        o
        for o in cluster.replay.outputs
        if isinstance(o, ContextCompacted) and o.session_id == "sess-broken-0000"
    ]
    assert [c["rewrite_id"] for c in first["compactions"]] == [c.rewrite_id for c in made]
    assert [c["faults"] for c in first["compactions"]] == [c.faults for c in made]
    assert [c["outcome"] for c in first["compactions"]] == [c.outcome for c in made]
    # The fleet's compacted sessions, filtered by outcome on the server.
    compacted = {(o.tenant, o.session_id, o.outcome) for o in cluster.replay.outputs
                 if isinstance(o, ContextCompacted)}  # fmt: skip
    critical = {(t, s) for t, s, outcome in compacted if outcome == "critical"}
    listed = a.json("/fleet?outcome=critical")["compacted_sessions"]
    assert {(r["tenant"], r["session_id"]) for r in listed} == critical
    assert all(r["outcome"] == "critical" for r in listed)
    assert a.get("/fleet?outcome=bad")[0] == 400
    text = orjson.dumps(first).decode()
    assert "account 8841-C" not in text and "order 55012" not in text


def test_real_prometheus_scrapes_the_workers(cluster: Cluster, tmp_path: Path) -> None:
    """Debian's Prometheus scrapes both workers (bearer token), evaluates every shipped
    rule without error and fires the critical-fault backstop; every Grafana query
    evaluates; Alertmanager (the shipped config) inhibits the backstop where the
    fleet monitor's own critical-fault alert of the tenant is active."""
    rules = ROOT / "deploy" / "prometheus" / "spanguard-rules.yml"
    with alertmanager(
        tmp_path, config=(ROOT / "deploy/alertmanager/alertmanager.yml").read_text()
    ) as am:
        targets = ", ".join(f'"127.0.0.1:{h.port}"' for h in cluster.http)
        config = f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{rules.name}]
alerting:
  alertmanagers: [{{static_configs: [{{targets: ["{am.removeprefix("http://")}"]}}]}}]
scrape_configs:
  - job_name: spanguard
    authorization: {{credentials: "{TOKEN}"}}
    static_configs: [{{targets: [{targets}]}}]
"""
        with prometheus(tmp_path, config, [rules]) as prom:

            def query(expr: str) -> list[dict[str, Any]]:
                url = f"{prom}/api/v1/query?query={urllib.parse.quote(expr)}"
                answer = http_json(url)
                assert answer["status"] == "success", (expr, answer)
                return list(answer["data"]["result"])

            def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
                deadline = time.monotonic() + timeout
                while not check():
                    assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
                    time.sleep(0.5)

            until(lambda: len(query('up{job="spanguard"} == 1')) == 2, "both workers up")
            until(lambda: bool(query("sum(spanguard_events_total) > 0")), "events scraped")
            # Processing counts (a rebalance redoes records): at least the trace.
            events = float(query("sum(spanguard_events_total)")[0]["value"][1])
            assert events >= len(cluster.lines)

            def evaluated() -> list[dict[str, Any]]:
                groups = http_json(f"{prom}/api/v1/rules")["data"]["groups"]
                return [r for g in groups for r in g["rules"]]

            until(
                lambda: all(r["lastEvaluation"] > "2000" for r in evaluated()),
                "every rule evaluated",
            )
            # Evaluate once more after the first pass: no rule reports an error.
            assert [(r["name"], r["health"], r.get("lastError", "")) for r in evaluated()] == [
                (r["name"], "ok", "") for r in evaluated()
            ]
            for expr in dashboard_queries():
                query(expr)  # raises on a query Prometheus rejects

            critical = {
                (f.tenant, f.kind.value)
                for f in cluster.replay.outputs
                if isinstance(f, IntegrityFault) and f.severity.value == "critical"
            }
            assert critical

            def firing() -> set[tuple[str, str]]:
                alerts = http_json(f"{prom}/api/v1/alerts")["data"]["alerts"]
                return {
                    (a["labels"]["tenant"], a["labels"]["kind"])
                    for a in alerts
                    if a["labels"]["alertname"] == "SpanguardCriticalFaults"
                    and a["state"] == "firing"
                }

            until(lambda: firing() == critical, "SpanguardCriticalFaults fires per tenant and kind")

            # The fleet alerts the workers posted, replayed into the real Alertmanager
            # (the cluster's workers post to a stand-in that records them).
            posted = [a for body in list(cluster.webhook.received) for a in body]
            live = [a for a in posted if a["labels"]["alertname"] == "critical" and not _ended(a)]
            assert live
            # The cluster's rule is named "critical"; the shipped config inhibits on the
            # built-in rule's name.
            live[-1]["labels"]["alertname"] = "critical-fault"
            http_json(f"{am}/api/v2/alerts", [live[-1]])
            tenant = live[-1]["labels"]["tenant"]

            def backstop_state() -> str:
                found = http_json(f"{am}/api/v2/alerts")
                states = [
                    a["status"]["state"]
                    for a in found
                    if a["labels"]["alertname"] == "SpanguardCriticalFaults"
                    and a["labels"]["tenant"] == tenant
                ]
                return states[0] if states else "absent"

            until(lambda: backstop_state() == "suppressed", "backstop inhibited")


def test_a_tenant_token_reads_only_its_tenant(cluster: Cluster) -> None:
    own = Http(cluster.http[0].port, TENANT_TOKEN)
    fleet = own.json("/fleet")
    assert [t["tenant"] for t in fleet["tenants"]] == [TOKEN_TENANT]
    assert {a["tenant"] for a in fleet["alerts"]} <= {TOKEN_TENANT}
    assert {w["tenant"] for w in fleet["worst_sessions"]} == {TOKEN_TENANT}
    mine = next(s for s in _sessions(cluster) if s[0] == TOKEN_TENANT)
    other = next(s for s in _sessions(cluster) if s[0] != TOKEN_TENANT)
    # Whichever worker owns the session, the answer is the same (routed or local).
    for http in (Http(h.port, TENANT_TOKEN) for h in cluster.http):
        assert http.get(f"/sessions/{mine[0]}/{mine[1]}")[0] == 200
        status, body, _ = http.get(f"/sessions/{other[0]}/{other[1]}")
        assert status == 403 and TENANT_TOKEN.encode() not in body
        assert http.get(f"/fleet?tenant={other[0]}")[0] == 403
        assert http.get("/fleet/local")[0] == 200
        assert http.get("/metrics")[0] == 403
    wrong = Http(cluster.http[0].port, TENANT_TOKEN + "x")
    status, body, _ = wrong.get("/fleet")
    assert status == 401 and TENANT_TOKEN.encode() not in body
    # The admin token still reads every tenant.
    assert len(cluster.http[0].json("/fleet")["tenants"]) == len(TENANTS)


def _sessions(cluster: Cluster) -> list[tuple[str, str]]:
    found = []
    for line in cluster.lines:
        event = orjson.loads(line)
        found.append((event["tenant"], event["session_id"]))
    return sorted(set(found))
