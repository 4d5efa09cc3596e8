"""Alert rules: the YAML file, its validation, and what each rule kind evaluates.

A rules file is a mapping with one key, ``rules``, a list of rules::

    rules:
      - name: critical-fault            # unique; [A-Za-z0-9_.-], up to 64
        kind: fault_severity            # any fault of severity >= at_least
        at_least: critical
      - name: stale-score-burst
        kind: fault_count               # more than `above` faults of one kind
        fault: STALE_SCORE
        above: 25
        severity: warning               # the alert's severity
      - name: unhealthy-rewrites
        kind: healthy_share             # healthy share of closed rewrite cycles
        below: 0.8                      # fires when the share is below this...
        min_cycles: 10                  # ...over at least this many cycles
        severity: warning
      - name: failing-compactions
        kind: compaction_outcome        # more than `above` compactions (contract
        at_least: critical              # 1.2 context.compacted) whose outcome is
        above: 2                        # at_least or worse
        severity: critical

Every rule is evaluated per tenant per window. ``fault_severity``,
``fault_count`` and ``compaction_outcome`` only grow within a window, so they
fire the moment the threshold is crossed; ``healthy_share`` goes up and down, so it is judged once,
when the window closes. Invalid files raise :class:`RuleError` with the rule
(name and position) and the field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spanguard.schemas import FaultKind, Severity
from spanguard.streams.fleet.aggregates import OUTCOMES, WindowCounts, outcome_rank

RuleName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class RuleError(ValueError):
    """An alert rules file that cannot be used; the message names rule and field."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A rule's verdict on one tenant window."""

    firing: bool
    count: int
    """What the rule counted: matching faults, or unhealthy cycles for a share rule."""
    sessions: list[str]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: RuleName
    description: str | None = Field(None, max_length=500)

    @property
    def instant(self) -> bool:
        """True when the rule may fire before its window closes (monotonic counts)."""
        return True

    @property
    def alert_severity(self) -> Severity:
        """The severity of the alerts this rule raises."""
        raise NotImplementedError

    def evaluate(self, counts: WindowCounts, sample: int) -> Evaluation:
        """The verdict on one tenant window, with up to ``sample`` sessions."""
        raise NotImplementedError


class FaultSeverityRule(_Rule):
    """Any fault of severity ``at_least`` or worse in the window."""

    kind: Literal["fault_severity"]
    at_least: Severity
    severity: Severity | None = Field(None, description="alert severity (default: at_least)")

    @property
    def alert_severity(self) -> Severity:
        """``severity``, else ``at_least``."""
        return self.severity or self.at_least

    def evaluate(self, counts: WindowCounts, sample: int) -> Evaluation:
        """Fires on the first matching fault."""
        n = counts.faults_at_least(self.at_least)
        worse = [s.value for s in Severity if s.rank >= self.at_least.rank]
        keys = [f"severity:{s}" for s in reversed(worse)]
        return Evaluation(n > 0, n, counts.sample(*keys, limit=sample) if n else [])


class FaultCountRule(_Rule):
    """More than ``above`` faults of kind ``fault`` in the window."""

    kind: Literal["fault_count"]
    fault: FaultKind
    above: int = Field(ge=0)
    severity: Severity = Severity.WARNING

    @property
    def alert_severity(self) -> Severity:
        """``severity``."""
        return self.severity

    def evaluate(self, counts: WindowCounts, sample: int) -> Evaluation:
        """Fires once the count exceeds ``above``."""
        n = counts.faults_of(self.fault.value)
        firing = n > self.above
        return Evaluation(
            firing, n, counts.sample(f"kind:{self.fault.value}", limit=sample) if firing else []
        )


class HealthyShareRule(_Rule):
    """Healthy share of closed rewrite cycles below ``below``, over ``min_cycles`` or more."""

    kind: Literal["healthy_share"]
    below: float = Field(gt=0, le=1)
    min_cycles: int = Field(10, ge=1)
    severity: Severity = Severity.WARNING

    @property
    def instant(self) -> bool:
        """False: a share rises and falls within a window; judged when it closes."""
        return False

    @property
    def alert_severity(self) -> Severity:
        """``severity``."""
        return self.severity

    def evaluate(self, counts: WindowCounts, sample: int) -> Evaluation:
        """``count`` is the number of unhealthy cycles."""
        share = counts.healthy_share
        unhealthy = counts.cycles - counts.healthy
        firing = share is not None and counts.cycles >= self.min_cycles and share < self.below
        return Evaluation(firing, unhealthy, counts.sample("unhealthy", limit=sample))


class CompactionOutcomeRule(_Rule):
    """More than ``above`` compactions whose outcome is ``at_least`` or worse in the
    window: a tenant whose compactions keep failing."""

    kind: Literal["compaction_outcome"]
    at_least: Literal["warning", "critical"] = "critical"
    above: int = Field(0, ge=0)
    severity: Severity = Severity.CRITICAL

    @property
    def alert_severity(self) -> Severity:
        """``severity``."""
        return self.severity

    def evaluate(self, counts: WindowCounts, sample: int) -> Evaluation:
        """Fires once the count exceeds ``above``; samples the worst sessions first."""
        n = counts.compactions_at_least(self.at_least)
        firing = n > self.above
        worse = [o for o in reversed(OUTCOMES) if outcome_rank(o) >= outcome_rank(self.at_least)]
        keys = [f"compaction:{o}" for o in worse]
        return Evaluation(firing, n, counts.sample(*keys, limit=sample) if firing else [])


Rule = Annotated[
    FaultSeverityRule | FaultCountRule | HealthyShareRule | CompactionOutcomeRule,
    Field(discriminator="kind"),
]
"""One alert rule, chosen by ``kind``."""


class RulesFile(BaseModel):
    """The whole rules file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[Rule]

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, rules: list[Rule]) -> list[Rule]:
        seen: set[str] = set()
        for rule in rules:
            if rule.name in seen:
                raise ValueError(f"rule name {rule.name!r} is used twice")
            seen.add(rule.name)
        return rules


DEFAULT_RULES_YAML = """\
# spanguard fleet alert rules (docs/monitoring.md). Evaluated per tenant, per window.
rules:
  # Any critical fault: a rewrite that kept broken scores, an ungated eviction,
  # a dropped referent, a poisoned span, drift, a stalled pruner.
  - name: critical-fault
    kind: fault_severity
    at_least: critical
    description: a critical integrity fault in this tenant

  # The scorer sends scores without the hash of the text it scored.
  - name: score-provenance-gaps
    kind: fault_count
    fault: SCORE_PROVENANCE_GAP
    above: 10
    severity: warning
    description: scores arrive without text_sha256

  # Scores computed against text that has changed since.
  - name: stale-score-burst
    kind: fault_count
    fault: STALE_SCORE
    above: 25
    severity: warning
    description: many scores computed against outdated text

  # Rewrites whose cycle was not healthy (scores kept, referents dropped, drift).
  - name: unhealthy-rewrite-cycles
    kind: healthy_share
    below: 0.8
    min_cycles: 10
    severity: warning
    description: fewer than 80% of rewrite cycles were healthy
"""


def parse_rules(text: str, source: str = "<rules>") -> list[Rule]:
    """Parse and validate a rules file's text; raises :class:`RuleError`."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RuleError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise RuleError(f"{source}: expected a mapping with a 'rules' list")
    try:
        return list(RulesFile.model_validate(data).rules)
    except ValidationError as exc:
        raise RuleError(_explain(exc, data, source)) from exc


def load_rules(path: Path | None) -> list[Rule]:
    """The rules of ``path``, or the built-in defaults when it is None."""
    if path is None:
        return default_rules()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleError(f"{path}: cannot read the rules file: {exc.strerror}") from exc
    return parse_rules(text, str(path))


def default_rules() -> list[Rule]:
    """The built-in rules (the same as ``examples/alert-rules.yaml``)."""
    return parse_rules(DEFAULT_RULES_YAML, "built-in rules")


def _explain(exc: ValidationError, data: dict[str, Any], source: str) -> str:
    raw_rules = data.get("rules")
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = list(error["loc"])
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            index = loc[1]
            raw = raw_rules[index] if isinstance(raw_rules, list) else None
            name = raw.get("name") if isinstance(raw, dict) else None
            who = f"rule {name!r} (#{index + 1})" if name else f"rule #{index + 1}"
            # loc[2] is the discriminator tag (the rule kind) when the kind was valid.
            rest = [str(p) for p in loc[3:]] if len(loc) > 3 else []
            if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
                rest = ["kind"]
            field = ".".join(rest) or "rule"
            problems.append(f"{who}, field {field!r}: {error['msg']}")
        else:
            field = ".".join(str(p) for p in loc) or "file"
            problems.append(f"field {field!r}: {error['msg']}")
    return f"{source}: invalid alert rules: " + "; ".join(problems)
