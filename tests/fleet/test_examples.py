"""The shipped examples: ``check-rules`` validates a rules file."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from typer.testing import CliRunner

from spanguard.streams.cli.rules import check_rules
from tests.fleet.monitoring_stack import exposed_metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
    from spanguard.streams.fleet.config import FleetSettings

    for name in FleetSettings.model_fields:
        assert f"| `{name}` |" in doc, f"docs/monitoring.md does not describe fleet.{name}"
    for metric in exposed_metrics():
        if metric.startswith(("process_", "python_")):
            continue  # prometheus-client's collectors, documented as a group
        base = re.sub(r"_(bucket|count|sum|created)$", "", metric)
        assert base in doc, f"docs/monitoring.md does not list {base}"


def test_dashboard_is_one_self_contained_page() -> None:
    from spanguard.streams.app.web import dashboard_html

    page = dashboard_html().decode("utf-8")
    assert "<script>" in page and "<style>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no external resource"
    assert "@import" not in page and "url(http" not in page
    assert (
        "fetch(path" in page and "setInterval(poll, POLL_MS)" in page and "POLL_MS = 2000" in page
    )
