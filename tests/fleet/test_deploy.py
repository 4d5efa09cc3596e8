"""The shipped monitoring files of deploy/: rules unit-tested with promtool, the
Alertmanager config checked with amtool and its inhibition proven on a real
Alertmanager, the Grafana dashboard's queries against the metrics a worker exposes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from spanguard.streams.fleet.metrics import FleetMetrics
from spanguard.streams.sim.scenarios import demo_fleet
from tests.fleet.monitoring_stack import (
    DASHBOARD,
    alertmanager,
    dashboard_queries,
    exposed_metrics,
    http_json,
    tool,
)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "spanguard-rules.yml"
ALERTMANAGER = DEPLOY / "alertmanager" / "alertmanager.yml"
LABELS = ["service=spanguard", "severity=critical", "tenant=acme"]


def rule_queries() -> list[str]:
    """Every expression of the shipped Prometheus rules."""
    rules = yaml.safe_load(RULES.read_text())
    return [r["expr"] for group in rules["groups"] for r in group["rules"]]


def test_rules_and_dashboard_use_only_exposed_metrics() -> None:
    exposed = exposed_metrics() | {"up"}
    for expr in [*rule_queries(), *dashboard_queries()]:
        used = set(re.findall(r"\b(spanguard_\w+|up)\b(?=\s*[{\[)])", expr))
        assert used, expr
        assert used <= exposed, f"{expr}: no worker exposes {used - exposed}"


def test_counters_are_born_at_zero_for_a_new_tenant() -> None:
    metrics = FleetMetrics(5)
    lines = demo_fleet(2)
    first = orjson.loads(lines[0])
    metrics.observe_record(first["tenant"], [], time.time())
    text = metrics.render().decode()
    tenant = first["tenant"]
    labels = f'kind="UNGATED_EVICTION",severity="critical",tenant="{tenant}"'
    assert f"spanguard_faults_total{{{labels}}} 0.0" in text
    assert f'spanguard_refused_spans_total{{reason="PINNED",tenant="{tenant}"}} 0.0' in text
    assert 'spanguard_send_failures_total{target="alertmanager"} 0.0' in text
    assert 'spanguard_agent_crashes_total{agent="fleet-aggregate"} 0.0' in text
    assert "process_resident_memory_bytes" in text and "python_info" in text
    assert re.search(r'spanguard_build_info\{python="[\d.]+",version="[^"]+"\} 1.0', text)


def test_promtool_unit_tests_of_the_rules() -> None:
    promtool = tool("promtool")
    subprocess.run([promtool, "check", "rules", str(RULES)], check=True)
    subprocess.run(
        [promtool, "test", "rules", "spanguard-rules.test.yml"], check=True, cwd=RULES.parent
    )


def test_prometheus_config_is_valid(tmp_path: Path) -> None:
    promtool = tool("promtool")
    token = tmp_path / "token"
    token.write_text("secret")
    config = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    (tmp_path / "prometheus.yml").write_text(
        config.replace("/etc/prometheus/spanguard-token", str(token))
    )
    (tmp_path / "spanguard-rules.yml").write_text(RULES.read_text())
    subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], check=True)


def test_amtool_accepts_the_alertmanager_config() -> None:
    amtool = tool("amtool")
    subprocess.run([amtool, "check-config", str(ALERTMANAGER)], check=True)
    routed = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER}", *LABELS],
        check=True,
        capture_output=True,
        text=True,
    )
    assert routed.stdout.split() == ["pager"]


def _labels(alert: dict[str, Any]) -> tuple[str, str]:
    return alert["labels"]["alertname"], alert["status"]["state"]


def test_one_incident_pages_once(tmp_path: Path) -> None:
    """The fleet monitor's critical-fault and Prometheus's SpanguardCriticalFaults (and
    SpanguardCompactionsFailing) for the same tenant: Alertmanager keeps the first and
    inhibits the others (and the tenant's warnings); another tenant's backstop alerts
    stay active."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    base = {"service": "spanguard"}
    posted = [
        {"alertname": "critical-fault", "tenant": "acme", "severity": "critical"},
        {"alertname": "SpanguardCriticalFaults", "tenant": "acme", "severity": "critical",
         "kind": "UNGATED_EVICTION"},
        {"alertname": "stale-score-burst", "tenant": "acme", "severity": "warning",
         "fault_kind": "STALE_SCORE"},
        {"alertname": "SpanguardCriticalFaults", "tenant": "other", "severity": "critical",
         "kind": "UNGATED_EVICTION"},
        {"alertname": "SpanguardCompactionsFailing", "tenant": "acme", "severity": "critical"},
        {"alertname": "SpanguardCompactionsFailing", "tenant": "other", "severity": "critical"},
    ]  # fmt: skip
    with alertmanager(tmp_path, config=ALERTMANAGER.read_text()) as url:
        http_json(
            f"{url}/api/v2/alerts",
            [{"labels": base | labels, "startsAt": now} for labels in posted],
        )
        deadline = time.monotonic() + 30
        while True:
            found = http_json(f"{url}/api/v2/alerts")
            states = {(a["labels"]["alertname"], a["labels"]["tenant"]): a for a in found}
            settled = len(states) == len(posted) and all(
                a["status"]["state"] != "unprocessed" for a in states.values()
            )
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        state = {key: a["status"]["state"] for key, a in states.items()}
        assert state == {
            ("critical-fault", "acme"): "active",
            ("SpanguardCriticalFaults", "acme"): "suppressed",
            ("stale-score-burst", "acme"): "suppressed",
            ("SpanguardCriticalFaults", "other"): "active",
            ("SpanguardCompactionsFailing", "acme"): "suppressed",
            ("SpanguardCompactionsFailing", "other"): "active",
        }
        assert states[("SpanguardCriticalFaults", "acme")]["status"]["inhibitedBy"]


def test_grafana_dashboard_and_provisioning() -> None:
    board = json.loads(DASHBOARD.read_text())
    panels = board["panels"]
    assert board["uid"] == "spanguard-fleet"
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])}  # fmt: skip
        assert not cells & mine, f"panel {panel['title']!r} overlaps another"
        cells |= mine
    titles = " | ".join(p["title"].lower() for p in panels)
    for topic in ("faults by kind", "by tenant", "gate latency", "refused evictions", "pins",
                  "throughput", "lag", "alerts", "compactions per minute by outcome",
                  "tokens saved", "keys lost", "thrashing"):  # fmt: skip
        assert topic in titles, topic
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["tenant"]["includeAll"] and variables["tenant"]["allValue"] == ".*"
    provisioning = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "dashboards" / "spanguard.yml").read_text()
    )
    assert provisioning["apiVersion"] == 1 and provisioning["providers"][0]["type"] == "file"
    sources = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert sources["datasources"][0]["type"] == "prometheus"
