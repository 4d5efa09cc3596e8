"""The alert rules file: defaults, the shipped example, and errors that name rule and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanguard.schemas import FaultKind, Severity
from spanguard.streams.fleet.aggregates import WindowCounts
from spanguard.streams.fleet.rules import (
    FaultCountRule,
    FaultSeverityRule,
    HealthyShareRule,
    RuleError,
    default_rules,
    load_rules,
    parse_rules,
)
from tests.fleet.traces import fault

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alert-rules.yaml"


def test_builtin_defaults_are_the_shipped_example() -> None:
    assert load_rules(None) == default_rules()
    assert load_rules(EXAMPLE) == default_rules()
    kinds = {type(rule) for rule in default_rules()}
    assert kinds == {FaultSeverityRule, FaultCountRule, HealthyShareRule}


def test_the_three_rule_kinds_parse() -> None:
    rules = parse_rules(
        """
rules:
  - {name: crit, kind: fault_severity, at_least: critical}
  - {name: warn-or-worse, kind: fault_severity, at_least: warning, severity: info}
  - {name: stale, kind: fault_count, fault: STALE_SCORE, above: 3}
  - {name: share, kind: healthy_share, below: 0.5, min_cycles: 4, severity: critical}
"""
    )
    crit, warn, stale, share = rules
    assert isinstance(crit, FaultSeverityRule) and crit.alert_severity is Severity.CRITICAL
    assert isinstance(warn, FaultSeverityRule) and warn.alert_severity is Severity.INFO
    assert isinstance(stale, FaultCountRule) and stale.fault is FaultKind.STALE_SCORE
    assert stale.alert_severity is Severity.WARNING  # the default
    assert isinstance(share, HealthyShareRule) and not share.instant and crit.instant


def test_rule_verdicts_on_window_counts() -> None:
    crit, stale, share = parse_rules(
        """
rules:
  - {name: crit, kind: fault_severity, at_least: warning}
  - {name: stale, kind: fault_count, fault: STALE_SCORE, above: 1}
  - {name: share, kind: healthy_share, below: 0.5, min_cycles: 4}
"""
    )
    counts = WindowCounts()
    assert not crit.evaluate(counts, 5).firing
    counts.count_output(fault("t", 0.0, "a", FaultKind.SEQUENCE_GAP, Severity.INFO), 5)
    assert not crit.evaluate(counts, 5).firing  # info is below warning
    counts.count_output(fault("t", 0.0, "b", FaultKind.STALE_SCORE, Severity.WARNING), 5)
    verdict = crit.evaluate(counts, 5)
    assert verdict.firing and verdict.count == 1 and verdict.sessions == ["b"]
    assert not stale.evaluate(counts, 5).firing  # 1 is not more than 1
    counts.count_output(fault("t", 0.0, "c", FaultKind.STALE_SCORE, Severity.WARNING), 5)
    verdict = stale.evaluate(counts, 5)
    assert verdict.firing and verdict.count == 2 and verdict.sessions == ["b", "c"]

    # Rewrite cycles as the combiner counts them: closed and healthy ones, a sample of
    # the sessions with an unhealthy one.
    counts.cycles += 3
    counts.add_sample("unhealthy", "x", 5)
    assert not share.evaluate(counts, 5).firing  # 3 cycles < min_cycles
    counts.cycles += 2
    counts.healthy += 2
    verdict = share.evaluate(counts, 5)  # 2 healthy of 5 = 0.4 < 0.5
    assert verdict.firing and verdict.count == 3 and verdict.sessions == ["x"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules:\n  - {name: a, kind: fault_count, fault: STALE_SCORE, above: -1}",
            "rule 'a' (#1), field 'above': Input should be greater than or equal to 0",
        ),
        (
            "rules:\n  - {name: ok, kind: fault_severity, at_least: critical}\n"
            "  - {name: b, kind: fault_count, fault: NOT_A_FAULT, above: 1}",
            "rule 'b' (#2), field 'fault':",
        ),
        (
            "rules:\n  - {name: c, kind: fault_sevrity, at_least: critical}",
            "rule 'c' (#1), field 'kind':",
        ),
        (
            "rules:\n  - {name: d, kind: fault_severity, at_least: critical, abve: 3}",
            "rule 'd' (#1), field 'abve': Extra inputs are not permitted",
        ),
        (
            "rules:\n  - {name: e, kind: healthy_share, min_cycles: 3}",
            "rule 'e' (#1), field 'below': Field required",
        ),
        (
            "rules:\n  - {name: f, kind: healthy_share, below: 1.5}",
            "rule 'f' (#1), field 'below': Input should be less than or equal to 1",
        ),
        (
            "rules:\n  - {kind: fault_severity, at_least: critical}",
            "rule #1, field 'name': Field required",
        ),
        (
            "rules:\n  - {name: 'bad name!', kind: fault_severity, at_least: critical}",
            "rule 'bad name!' (#1), field 'name'",
        ),
        (
            "rules:\n  - {name: g, kind: fault_severity, at_least: critical}\n"
            "  - {name: g, kind: fault_severity, at_least: warning}",
            "rule name 'g' is used twice",
        ),
        ("rules: [", "not valid YAML"),
        ("- just a list", "expected a mapping with a 'rules' list"),
        ("rulez: []", "field 'rulez': Extra inputs are not permitted"),
    ],
)
def test_invalid_rules_name_the_rule_and_the_field(text: str, message: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rules(text, "rules.yaml")
    assert str(caught.value).startswith("rules.yaml: ")
    assert message in str(caught.value)


def test_missing_rules_file_is_a_rule_error(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="cannot read the rules file"):
        load_rules(tmp_path / "missing.yaml")
