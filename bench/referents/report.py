"""The benchmark's printed report: per-class tables, targets, the pin sample."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.referents.agent_traces import ID_CLASSES
from bench.referents.measure import ClassCount, MissCase, PinCase, Tally
from bench.referents.sgd import NAME_CLASSES, VENUE_EVENT

SGD_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("venue names", ("venue",)),
    ("event names", ("event",)),
    ("**venue + event**", VENUE_EVENT),
    ("media titles", ("media",)),
    ("person names", ("person",)),
    ("**all names**", NAME_CLASSES),
    ("products, labels", ("product",)),
    ("stations, airports", ("place",)),
    ("addresses", ("address",)),
    ("cities", ("city",)),
    ("phones", ("phone",)),
    ("times", ("time",)),
    ("dates", ("date",)),
    ("amounts", ("amount",)),
    ("counts, ratings", ("count",)),
    ("categories", ("category",)),
)
"""The SGD table's rows: label and the value classes summed in it."""

AGENT_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("identifiers", ("id",)),
    ("phones", ("phone",)),
    ("e-mails", ("email",)),
    ("JSON names", ("name",)),
    ("**identifiers, phones, JSON values**", ID_CLASSES),
    ("prices", ("amount",)),
    ("ratings", ("rating",)),
    ("cities", ("city",)),
)
"""The agent-run table's rows."""


@dataclass(frozen=True, slots=True)
class Target:
    """One target of the issue: a figure, its bound, whether it is met."""

    name: str
    value: float | None
    bound: float
    at_most: bool = False

    @property
    def met(self) -> bool:
        """Whether the figure is known and on the right side of the bound."""
        if self.value is None:
            return False
        return self.value <= self.bound if self.at_most else self.value >= self.bound

    def line(self) -> str:
        """``name: value (>= bound) met``."""
        shown = "n/a" if self.value is None else f"{self.value:.3f}".rstrip("0").rstrip(".")
        sign = "<=" if self.at_most else ">="
        return f"{self.name}: {shown} ({sign} {self.bound:g}) {'met' if self.met else 'NOT MET'}"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def class_table(tallies: Mapping[str, Tally], rows: Sequence[tuple[str, tuple[str, ...]]]) -> str:
    """A markdown table: per row, per policy, cases / kept / kept for PINNED / recall."""
    policies = list(tallies)
    head = (
        "| class | " + " | ".join(f"{p}: cases | kept | pinned | recall" for p in policies) + " |"
    )
    rule = "|---|" + "---:|---:|---:|---:|" * len(policies)
    lines = [head, rule]
    for label, classes in rows:
        cells = []
        for policy in policies:
            count: ClassCount = tallies[policy].group(classes)
            if not count.cases:
                cells.append("0 | | | ")
                continue
            cells.append(f"{count.cases} | {count.kept} | {count.pinned} | {_fmt(count.recall)}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def volume_table(tallies: Mapping[str, Tally]) -> str:
    """A markdown table of requests, pins, precision, volume and faults per policy."""
    lines = [
        "| policy | sessions | requests | selected spans | committed | volume drop "
        "| pins | pins / request | precision | faults | rejected |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, t in tallies.items():
        per = t.pins / t.requests if t.requests else 0.0
        lines.append(
            f"| {policy} | {t.sessions} | {t.requests} | {t.selected_spans} "
            f"| {t.committed_spans} | {_fmt(t.volume_drop)} | {t.pins} | {per:.3f} "
            f"| {_fmt(t.precision)} ({t.pins_right}/{t.pins}) "
            f"| {sum(t.faults.values())} | {sum(t.rejected.values())} |"
        )
    return "\n".join(lines)


def sgd_targets(tallies: Mapping[str, Tally]) -> list[Target]:
    """The issue's SGD targets, per policy."""
    targets = []
    for policy, t in tallies.items():
        targets += [
            Target(f"{policy}: venue + event names recall", t.group(VENUE_EVENT).recall, 0.85),
            Target(f"{policy}: all names recall", t.group(NAME_CLASSES).recall, 0.75),
            Target(f"{policy}: pin precision", t.precision, 0.80),
            Target(f"{policy}: faults + rejections", _faults(t), 0, at_most=True),
        ]
    return targets


def agent_targets(tallies: Mapping[str, Tally]) -> list[Target]:
    """The agent-run targets, per policy."""
    targets = []
    for policy, t in tallies.items():
        targets += [
            Target(
                f"{policy}: identifiers, phones, JSON values recall",
                t.group(ID_CLASSES).recall,
                0.95,
            ),
            Target(
                f"{policy}: pins on prices or ratings",
                float(t.pins_by_mention_class["amount"] + t.pins_by_mention_class["rating"]),
                0,
                at_most=True,
            ),
            Target(f"{policy}: faults + rejections", _faults(t), 0, at_most=True),
        ]
    return targets


def _faults(t: Tally) -> float:
    return float(sum(t.faults.values()) + sum(t.rejected.values()))


def sample_pins(cases: Sequence[PinCase], n: int, seed: int) -> list[PinCase]:
    """``n`` pins drawn at random (seeded) from ``cases``, in drawing order."""
    return random.Random(seed).sample(list(cases), min(n, len(cases)))


def pin_text(case: PinCase, number: int) -> str:
    """One sampled pin, both texts and the mention, for a reader."""
    pin = case.pin
    lines = [
        f"{number}. [{case.policy} {case.session_id} {case.request_id}] pinned {pin.span_id} "
        f"for {', '.join(pin.pinned_for)}; mention key={pin.key!r} type={pin.type!r} "
        f"surface={pin.surface!r}; measure: {case.verdict or 'wrong'}",
        f"   pinned {pin.span_id}: {case.pinned_text}",
    ]
    lines += [f"   for {span}: {text}" for span, text in case.pinned_for_texts.items()]
    return "\n".join(lines)


def sample_misses(misses: Sequence[MissCase], n: int, seed: int) -> list[MissCase]:
    """``n`` lost cases drawn at random (seeded)."""
    return random.Random(seed).sample(list(misses), min(n, len(misses)))


def miss_text(case: MissCase, number: int) -> str:
    """One lost case: the value, the committed introduction, the retained repeat."""
    return "\n".join(
        [
            f"{number}. [{case.policy} {case.session_id} {case.request_id}] {case.value.cls} "
            f"({case.value.slot}) {case.value.surface!r}: {case.candidate.span_id} committed, "
            f"{case.repeat.span_id} retained",
            f"   {case.candidate.span_id}: {case.candidate.text}",
            f"   {case.repeat.span_id}: {case.repeat.text}",
        ]
    )


def tally_json(t: Tally) -> dict[str, Any]:
    """One policy's figures as JSON data (without the pin cases)."""
    return {
        "sessions": t.sessions,
        "spans": t.spans,
        "requests": t.requests,
        "selected_spans": t.selected_spans,
        "committed_spans": t.committed_spans,
        "selected_tokens": t.selected_tokens,
        "committed_tokens": t.committed_tokens,
        "volume_drop": t.volume_drop,
        "refused": dict(t.refused),
        "pins": t.pins,
        "pins_right": t.pins_right,
        "precision": t.precision,
        "pins_by_verdict": dict(t.pins_by_verdict),
        "pins_by_mention_class": dict(t.pins_by_mention_class),
        "faults": dict(t.faults),
        "rejected": dict(t.rejected),
        "classes": {
            cls: {"cases": c.cases, "kept": c.kept, "pinned": c.pinned, "recall": c.recall}
            for cls, c in sorted(t.classes.items())
        },
    }
