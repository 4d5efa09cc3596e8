"""Counting outputs for the human-readable summary of ``replay`` and ``consume``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from spanguard.schemas import (
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    Severity,
    SpanPinned,
)


@dataclass
class OutputSummary:
    """Tallies of faults (kind, severity), decisions (action), pins, compactions
    (outcome, tokens saved) and rejections."""

    inputs: int = 0
    outputs: int = 0
    faults: Counter[tuple[str, str]] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)
    rejections: Counter[str] = field(default_factory=Counter)
    pins: int = 0
    compactions: Counter[str] = field(default_factory=Counter)
    tokens_saved: int = 0
    worst: Severity | None = None

    def add(self, event: OutputEvent) -> None:
        """Count one output event."""
        self.outputs += 1
        if isinstance(event, IntegrityFault):
            self.faults[(event.kind.value, event.severity.value)] += 1
            if self.worst is None or event.severity.rank > self.worst.rank:
                self.worst = event.severity
        elif isinstance(event, EvictionDecided):
            self.decisions[event.action.value] += 1
        elif isinstance(event, SpanPinned):
            self.pins += 1
        elif isinstance(event, ContextCompacted):
            self.compactions[event.outcome] += 1
            self.tokens_saved += event.tokens_before - event.tokens_after
        elif isinstance(event, EventRejected):
            self.rejections[event.reason.value] += 1

    def reaches(self, severity: Severity) -> bool:
        """True when a fault of ``severity`` or worse was seen."""
        return self.worst is not None and self.worst.rank >= severity.rank

    def render(self, console: Console, *, counted: str = "inputs") -> None:
        """Print the summary tables, headed by the count of ``inputs`` or ``outputs`` read."""
        faults = Table(title="Integrity faults", show_lines=False)
        faults.add_column("kind")
        faults.add_column("severity")
        faults.add_column("count", justify="right")
        for (kind, severity), count in sorted(self.faults.items()):
            style = {"critical": "bold red", "warning": "yellow"}.get(severity, "")
            faults.add_row(kind, f"[{style}]{severity}[/]" if style else severity, str(count))
        if not self.faults:
            faults.add_row("(none)", "", "0")
        decisions = Table(title="Eviction decisions")
        decisions.add_column("action")
        decisions.add_column("count", justify="right")
        for action, count in sorted(self.decisions.items()):
            decisions.add_row(action, str(count))
        decisions.add_row("pins emitted", str(self.pins))
        compactions = Table(title="Compactions")
        compactions.add_column("outcome")
        compactions.add_column("count", justify="right")
        for outcome in ("clean", "warning", "critical"):
            if self.compactions[outcome]:
                compactions.add_row(outcome, str(self.compactions[outcome]))
        compactions.add_row("tokens saved", str(self.tokens_saved))
        rejections = Table(title="Rejected inputs")
        rejections.add_column("reason")
        rejections.add_column("count", justify="right")
        for reason, count in sorted(self.rejections.items()):
            rejections.add_row(reason, str(count))
        if not self.rejections:
            rejections.add_row("(none)", "0")
        if counted == "outputs":
            console.print(f"[bold]{self.outputs}[/] output records")
        else:
            console.print(f"[bold]{self.inputs}[/] input records")
        console.print(faults, decisions, compactions, rejections)
