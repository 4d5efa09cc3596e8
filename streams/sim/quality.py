"""``spanguard quality``: how well the engine's outputs match a simulator truth file.

Figures (all from the truth file and the output events, nothing re-computed by
the engine):

* **precision and recall per fault kind.** A detected fault matches an
  injected one when both are in the same session and of the same kind
  (outputs are deduplicated by their ids first). Recall: injected faults with a
  matching detection; precision: detections with a matching injection.
  ``located`` is stricter: a detection of the same kind whose ``caused_by`` is
  the injected ``at_event_id``.
* **faults on healthy sessions**: warning or critical faults in sessions where
  nothing was injected (target 0), and among them the sessions that carry a
  healthy look-alike of a contract 1.2 fault (an absorbed tool pair, a kept
  system prompt, a summary that keeps its keys, compactions that shrink or come
  turns apart), per look-alike.
* **dead letters**: ``event.rejected`` per (session, reason) against the
  malformed records the simulator wrote.
* **live referents and the gate**: without the gate, the truth's count of
  requested spans that bind a referent a retained span needs; with it, how many
  of those the decisions actually committed (target 0).
* **eviction volume** in referent-dense sessions: spans committed against spans
  requested (the naive pruner would have evicted all of them).
* **decisions as prescribed**: decisions whose action, committed and dropped
  spans are the ones the reference model prescribed when the step was planned.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from spanguard.streams.sim.truth import FleetTruth

ID_FIELDS = (
    "fault_id",
    "pin_id",
    "recompute_id",
    "decision_id",
    "compaction_id",
    "alert_id",
    "rejection_id",
)
SERIOUS = ("warning", "critical")


@dataclass(frozen=True, slots=True)
class KindScore:
    """Detection figures of one fault kind."""

    kind: str
    injected: int
    detected: int
    found: int
    """Injected faults with a detection of the same session and kind."""
    correct: int
    """Detections with an injection of the same session and kind."""
    located: int
    """Injected faults detected at exactly their ``at_event_id``."""

    @property
    def recall(self) -> float | None:
        """found / injected (None when nothing was injected)."""
        return self.found / self.injected if self.injected else None

    @property
    def precision(self) -> float | None:
        """correct / detected (None when nothing was detected)."""
        return self.correct / self.detected if self.detected else None


@dataclass(frozen=True, slots=True)
class DeadLetterScore:
    """Expected against actual dead letters of one reason."""

    reason: str
    expected: int
    rejected: int
    matched: int


@dataclass(frozen=True, slots=True)
class VolumeRow:
    """Eviction volume of one group of sessions: ``dense`` (referent-dense
    sessions), ``dense-healthy`` (those with nothing injected, where only the
    gate's pins hold spans back) and ``sparse`` (the others)."""

    group: str
    sessions: int
    requests: int
    requested: int
    committed: int
    pinned: int
    frozen: int
    protected: int = 0
    """Refused ``PROTECTED`` (contract 1.2)."""
    paired: int = 0
    """Refused ``TOOL_PAIR``: half of a tool pair asked for without the rest (1.2)."""

    @property
    def change(self) -> float | None:
        """committed / requested - 1 (negative: the gate evicted less)."""
        return self.committed / self.requested - 1 if self.requested else None


@dataclass(slots=True)
class QualityReport:
    """Every figure ``spanguard quality`` prints."""

    kinds: list[KindScore]
    sessions: int
    healthy_sessions: int
    healthy_faults: Counter[str]
    unknown_session_faults: int
    deadletters: list[DeadLetterScore]
    requests: int
    requests_needing: int
    referent_without_gate: int
    referent_with_gate: int
    volume: list[VolumeRow]
    decisions_expected: int
    decisions_matching: int
    decisions_missing: int
    outputs: int
    duplicates: int
    mismatched_decisions: list[str] = field(default_factory=list)
    lookalikes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Look-alike name -> (sessions carrying it, warning/critical faults on them)."""

    @property
    def healthy_fault_count(self) -> int:
        """Warning and critical faults on healthy sessions."""
        return sum(self.healthy_faults.values())

    def lowest_recall(self) -> float | None:
        """The lowest recall among injected kinds (None when nothing was injected)."""
        values = [k.recall for k in self.kinds if k.recall is not None]
        return min(values) if values else None

    def to_json(self) -> dict[str, Any]:
        """The figures as plain JSON data."""
        return {
            "outputs": {"read": self.outputs, "duplicates_dropped": self.duplicates},
            "faults": {
                k.kind: {**asdict(k), "recall": k.recall, "precision": k.precision}
                for k in self.kinds
            },
            "healthy_sessions": {
                "sessions": self.healthy_sessions,
                "warning_or_critical_faults": self.healthy_fault_count,
                "by_kind": dict(sorted(self.healthy_faults.items())),
                "lookalikes": {
                    name: {"sessions": count, "warning_or_critical_faults": faults}
                    for name, (count, faults) in sorted(self.lookalikes.items())
                },
            },
            "faults_of_unknown_sessions": self.unknown_session_faults,
            "deadletters": {d.reason: asdict(d) for d in self.deadletters},
            "referents": {
                "requests": self.requests,
                "requests_needing_a_referent": self.requests_needing,
                "evictions_destroying_a_live_referent_without_gate": self.referent_without_gate,
                "evictions_destroying_a_live_referent_with_gate": self.referent_with_gate,
            },
            "eviction_volume": {
                row.group: {**asdict(row), "change": row.change} for row in self.volume
            },
            "decisions": {
                "expected": self.decisions_expected,
                "as_prescribed": self.decisions_matching,
                "missing": self.decisions_missing,
                "mismatched_request_ids": self.mismatched_decisions[:50],
            },
            "sessions": self.sessions,
        }


def read_outputs(lines: Iterable[bytes]) -> list[dict[str, Any]]:
    """Parse output JSON lines (blank lines skipped); raises ``ValueError`` naming
    the first line that is not a JSON object."""
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"line {number} is not JSON: {exc}") from exc
        if not isinstance(event, dict):
            raise ValueError(f"line {number} is not a JSON object")
        events.append(event)
    return events


def _dedupe(outputs: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int, int]:
    # Consumers may see an output twice (at-least-once delivery); ids are
    # deterministic, so one id is one output.
    seen: set[tuple[str, str]] = set()
    kept: list[Mapping[str, Any]] = []
    total = 0
    for event in outputs:
        total += 1
        ident = next((str(event[f]) for f in ID_FIELDS if event.get(f)), None)
        if ident is not None:
            key = (str(event.get("type")), ident)
            if key in seen:
                continue
            seen.add(key)
        kept.append(event)
    return kept, total, total - len(kept)


def evaluate(truth: FleetTruth, outputs: Iterable[Mapping[str, Any]]) -> QualityReport:
    """Compare output events with the truth of the fleet that produced them."""
    events, total, duplicates = _dedupe(outputs)
    sessions = {s.session_id: s for s in truth.sessions}
    faults = [e for e in events if e.get("type") == "integrity.fault"]
    decisions = {
        (str(e.get("session_id")), str(e.get("request_id"))): e
        for e in events
        if e.get("type") == "eviction.decided"
    }
    rejections = [e for e in events if e.get("type") == "event.rejected"]
    serious = Counter(str(f.get("session_id")) for f in faults if f.get("severity") in SERIOUS)
    lookalikes: dict[str, tuple[int, int]] = {}
    for session in truth.sessions:
        for name in session.lookalikes:
            count, found = lookalikes.get(name, (0, 0))
            lookalikes[name] = (count + 1, found + serious[session.session_id])
    return QualityReport(
        kinds=_kind_scores(truth, faults),
        sessions=len(truth.sessions),
        healthy_sessions=sum(s.healthy for s in truth.sessions),
        healthy_faults=Counter(
            str(f["kind"])
            for f in faults
            if f.get("severity") in SERIOUS
            and (s := sessions.get(str(f.get("session_id")))) is not None
            and s.healthy
        ),
        unknown_session_faults=sum(1 for f in faults if str(f.get("session_id")) not in sessions),
        deadletters=_deadletter_scores(truth, rejections),
        **_referent_figures(truth, decisions),
        outputs=total,
        duplicates=duplicates,
        lookalikes=lookalikes,
    )


def _kind_scores(truth: FleetTruth, faults: list[Mapping[str, Any]]) -> list[KindScore]:
    injected = [f for s in truth.sessions for f in s.faults]
    injected_pairs = {(f.session_id, f.kind) for f in injected}
    detected_pairs = {(str(f.get("session_id")), str(f.get("kind"))) for f in faults}
    detected_at = {
        (str(f.get("session_id")), str(f.get("kind")), str(f.get("caused_by"))) for f in faults
    }
    kinds = sorted({f.kind for f in injected} | {str(f.get("kind")) for f in faults})
    scores = []
    for kind in kinds:
        mine = [f for f in injected if f.kind == kind]
        seen = [f for f in faults if f.get("kind") == kind]
        scores.append(
            KindScore(
                kind=kind,
                injected=len(mine),
                detected=len(seen),
                found=sum((f.session_id, kind) in detected_pairs for f in mine),
                correct=sum((str(f.get("session_id")), kind) in injected_pairs for f in seen),
                located=sum((f.session_id, kind, f.at_event_id) in detected_at for f in mine),
            )
        )
    return scores


def _deadletter_scores(
    truth: FleetTruth, rejections: list[Mapping[str, Any]]
) -> list[DeadLetterScore]:
    expected = Counter((d.session_id, d.reason) for s in truth.sessions for d in s.deadletters)
    actual = Counter((r.get("session_id"), str(r.get("reason"))) for r in rejections)
    reasons = sorted({r for _, r in expected} | {r for _, r in actual})
    rows = []
    for reason in reasons:
        keys = {k for k in expected | actual if k[1] == reason}
        rows.append(
            DeadLetterScore(
                reason=reason,
                expected=sum(expected[k] for k in keys),
                rejected=sum(actual[k] for k in keys),
                matched=sum(min(expected[k], actual[k]) for k in keys),
            )
        )
    return rows


def _referent_figures(
    truth: FleetTruth, decisions: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[str, Any]:
    requests = needing = without = with_gate = 0
    expected = matching = missing = 0
    mismatched: list[str] = []
    groups: dict[str, dict[str, int]] = defaultdict(Counter)
    for session in truth.sessions:
        names = ["dense" if session.referent_dense else "sparse"]
        if session.referent_dense and session.healthy:
            names.append("dense-healthy")
        for name in names:
            groups[name]["sessions"] += 1
        for request in session.evictions:
            requests += 1
            needing += bool(request.needed)
            without += len(request.needed)
            decision = decisions.get((request.session_id, request.request_id))
            expected += 1
            if decision is None:
                missing += 1
                continue
            committed = [str(s) for s in decision.get("committed") or ()]
            dropped = [str(s) for s in decision.get("dropped") or ()]
            refused = [r for r in decision.get("refused") or () if isinstance(r, Mapping)]
            with_gate += len(set(committed) & set(request.needed))
            if (
                decision.get("action") == request.expected_action
                # The contract fixes which spans, not their order in the list.
                and set(committed) == set(request.expected_committed)
                and set(dropped) == set(request.expected_dropped)
            ):
                matching += 1
            else:
                mismatched.append(f"{request.session_id}/{request.request_id}")
            for name in names:
                row = groups[name]
                row["requests"] += 1
                row["requested"] += len(request.requested)
                row["committed"] += len(committed)
                row["pinned"] += sum(r.get("reason") == "PINNED" for r in refused)
                row["frozen"] += sum(r.get("reason") in ("FROZEN", "STALE_SCORE") for r in refused)
                row["protected"] += sum(r.get("reason") == "PROTECTED" for r in refused)
                row["paired"] += sum(r.get("reason") == "TOOL_PAIR" for r in refused)
    order = ["dense", "dense-healthy", "sparse"]
    volume = [
        VolumeRow(
            group=name,
            sessions=groups[name]["sessions"],
            requests=groups[name]["requests"],
            requested=groups[name]["requested"],
            committed=groups[name]["committed"],
            pinned=groups[name]["pinned"],
            frozen=groups[name]["frozen"],
            protected=groups[name]["protected"],
            paired=groups[name]["paired"],
        )
        for name in order
        if name in groups
    ]
    return {
        "requests": requests,
        "requests_needing": needing,
        "referent_without_gate": without,
        "referent_with_gate": with_gate,
        "volume": volume,
        "decisions_expected": expected,
        "decisions_matching": matching,
        "decisions_missing": missing,
        "mismatched_decisions": mismatched,
    }


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def render(report: QualityReport, console: Console) -> None:
    """Print the report as rich tables."""
    kinds = Table(title="Detection per fault kind (match: same session and kind)")
    kinds.add_column("kind", min_width=28, no_wrap=True)
    for name in ("injected", "detected", "recall", "precision", "at event"):
        kinds.add_column(name, justify="right")
    for k in report.kinds:
        recall_style = "" if k.recall in (None, 1.0) else "[red]"
        precision_style = "" if k.precision in (None, 1.0) else "[yellow]"
        kinds.add_row(
            k.kind,
            str(k.injected),
            str(k.detected),
            f"{recall_style}{_ratio(k.recall)}",
            f"{precision_style}{_ratio(k.precision)}",
            f"{k.located}/{k.injected}" if k.injected else "-",
        )
    if not report.kinds:
        kinds.add_row("(none)", "0", "0", "-", "-", "-")

    health = Table(title="Healthy sessions (target: 0 warning/critical faults)")
    health.add_column("figure")
    health.add_column("value", justify="right")
    health.add_row("sessions", str(report.sessions))
    health.add_row("healthy sessions", str(report.healthy_sessions))
    style = "[green]" if report.healthy_fault_count == 0 else "[bold red]"
    health.add_row("warning/critical faults on them", f"{style}{report.healthy_fault_count}")
    for kind, count in sorted(report.healthy_faults.items()):
        health.add_row(f"  {kind}", str(count))
    if report.unknown_session_faults:
        health.add_row("faults of sessions not in the truth", str(report.unknown_session_faults))
    for name, (count, found) in sorted(report.lookalikes.items()):
        style = "" if found == 0 else "[bold red]"
        health.add_row(f"  look-alike {name} ({count} sessions)", f"{style}{found}")

    dead = Table(title="Dead letters (expected reasons)")
    for name in ("reason", "expected", "rejected", "matched"):
        dead.add_column(name, justify="left" if name == "reason" else "right")
    for d in report.deadletters:
        dead.add_row(d.reason, str(d.expected), str(d.rejected), str(d.matched))
    if not report.deadletters:
        dead.add_row("(none)", "0", "0", "0")

    gate = Table(title="Evictions that would destroy a live referent binding")
    gate.add_column("figure")
    gate.add_column("value", justify="right")
    gate.add_row("eviction requests", str(report.requests))
    gate.add_row("requests with a needed referent", str(report.requests_needing))
    gate.add_row("spans without the gate (requested and needed)", str(report.referent_without_gate))
    style = "[green]" if report.referent_with_gate == 0 else "[bold red]"
    gate.add_row(
        "spans with the gate (committed and needed)", f"{style}{report.referent_with_gate}"
    )
    gate.add_row(
        "decisions as the contract prescribes",
        f"{report.decisions_matching}/{report.decisions_expected}"
        + (f" ({report.decisions_missing} missing)" if report.decisions_missing else ""),
    )

    volume = Table(title="Eviction volume (dense/sparse: referent-dense sessions or not)")
    volume.add_column("figure")
    for row in report.volume:
        volume.add_column(row.group, justify="right")
    figures: list[tuple[str, Callable[[VolumeRow], str]]] = [
        ("sessions", lambda r: str(r.sessions)),
        ("eviction requests", lambda r: str(r.requests)),
        ("requested (naive pruner)", lambda r: str(r.requested)),
        ("committed (the gate)", lambda r: str(r.committed)),
        ("refused: pinned", lambda r: str(r.pinned)),
        ("refused: frozen", lambda r: str(r.frozen)),
        ("refused: protected", lambda r: str(r.protected)),
        ("refused: half a tool pair", lambda r: str(r.paired)),
        ("change in volume", lambda r: _percent(r.change)),
    ]
    for label, value in figures:
        volume.add_row(label, *(value(row) for row in report.volume))
    console.print(f"[bold]{report.outputs}[/] output events read, {report.duplicates} duplicate(s)")
    console.print(kinds, health, dead, gate, volume)
