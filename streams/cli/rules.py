"""``spanguard check-rules FILE``: validate an alert rules file before deploying it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from spanguard.streams.fleet.rules import (
    CompactionOutcomeRule,
    FaultCountRule,
    FaultSeverityRule,
    Rule,
    RuleError,
    load_rules,
)

out = Console()
err = Console(stderr=True)


def describe(rule: Rule) -> str:
    """One line saying when ``rule`` fires."""
    if isinstance(rule, FaultSeverityRule):
        when = f"any fault of severity >= {rule.at_least.value}"
    elif isinstance(rule, FaultCountRule):
        when = f"more than {rule.above} {rule.fault.value} faults"
    elif isinstance(rule, CompactionOutcomeRule):
        when = f"more than {rule.above} compactions of outcome >= {rule.at_least}"
    else:
        when = f"healthy share of rewrite cycles < {rule.below} (>= {rule.min_cycles} cycles)"
    return f"{rule.name}: {when} per tenant per window -> {rule.alert_severity.value}"


def check_rules(
    path: Annotated[
        Path | None,
        typer.Argument(metavar="RULES.yaml", help="rules file; none: the built-in rules"),
    ] = None,
) -> None:
    """Validate an alert rules file and list its rules (exit 2 when invalid)."""
    try:
        rules = load_rules(path)
    except RuleError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from exc
    for rule in rules:
        out.print(describe(rule), highlight=False)
