"""The shipped examples: the Prometheus rules use the metrics a worker exposes, and
``check-rules`` validates a rules file."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from streams.engine.engine import Engine
from streams.fleet.metrics import FleetMetrics
from streams.fleet.observer import engine_figures
from streams.fleet.rules_cli import check_rules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def exposed_metrics() -> set[str]:
    metrics = FleetMetrics(5, engine_figures(lambda: [Engine()]))
    metrics.consumer_lag.labels("0").set(0)
    metrics.active_alerts.labels("r", "warning").set(0)
    metrics.dead_letters.labels("INVALID_JSON").inc(0)
    metrics.faults.labels("t", "STALE_SCORE", "warning").inc(0)
    metrics.decisions.labels("t", "COMMIT").inc(0)
    metrics.events.labels("t").inc(0)
    metrics.alerts.labels("r", "warning", "firing").inc(0)
    text = metrics.render().decode()
    return set(re.findall(r"^(spanguard_\w+)", text, re.M))


def test_prometheus_rules_reference_exposed_metrics() -> None:
    rules = yaml.safe_load((EXAMPLES / "prometheus-rules.yml").read_text())
    exprs = [r["expr"] for group in rules["groups"] for r in group["rules"]]
    assert exprs
    used = {name for expr in exprs for name in re.findall(r"\b(spanguard_\w+)", expr)}
    missing = used - exposed_metrics()
    assert not missing, f"rules use metrics no worker exposes: {missing}"
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_rules() -> None:  # pragma: no cover - optional tool
    subprocess.run(
        ["promtool", "check", "rules", str(EXAMPLES / "prometheus-rules.yml")], check=True
    )


def test_check_rules_command(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(check_rules)
    runner = CliRunner()
    ok = runner.invoke(app, [str(EXAMPLES / "alert-rules.yaml")])
    assert ok.exit_code == 0, ok.output
    assert "critical-fault: any fault of severity >= critical" in ok.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: x, kind: fault_count, fault: STALE_SCORE, above: -2}\n")
    failed = runner.invoke(app, [str(bad)])
    assert failed.exit_code == 2
    assert "rule 'x' (#1), field 'above'" in failed.output


def test_monitoring_doc_lists_every_setting_and_metric() -> None:
    doc = (EXAMPLES.parent / "docs" / "monitoring.md").read_text()
    from streams.fleet.config import FleetSettings

    for name in FleetSettings.model_fields:
        assert f"| `{name}` |" in doc, f"docs/monitoring.md does not describe fleet.{name}"
    for metric in exposed_metrics():
        base = re.sub(r"_(bucket|count|sum|created)$", "", metric)
        assert base in doc, f"docs/monitoring.md does not list {base}"


def test_dashboard_is_one_self_contained_page() -> None:
    from streams.app.web import dashboard_html

    page = dashboard_html().decode("utf-8")
    assert "<script>" in page and "<style>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no external resource"
    assert "@import" not in page and "url(http" not in page
    assert (
        "fetch(path" in page and "setInterval(poll, POLL_MS)" in page and "POLL_MS = 2000" in page
    )
