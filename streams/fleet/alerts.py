"""Alert bookkeeping: when a rule's verdict becomes a ``fleet.alert``, and when not.

Per (rule, tenant) there is one alert, known by its fingerprint. It is

* sent ``firing`` the first time the rule fires (and again after it resolved);
* not sent again while it keeps firing, unless ``repeat_interval`` seconds of
  event time passed since it was last sent (then re-sent, once per window);
* sent ``resolved`` exactly once, when a whole window after the last window in
  which it fired has closed without it firing.

Alert ids are derived from fingerprint, status and window, so re-processing the
same observations produces the same ids and consumers can deduplicate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from spanguard.schemas import FleetAlert, Severity
from spanguard.streams.engine.emit import output_id
from spanguard.streams.fleet.aggregates import Window
from spanguard.streams.fleet.rules import Evaluation, Rule
from spanguard.streams.fleet.times import to_datetime

Status = Literal["firing", "resolved"]


def fingerprint(rule: str, tenant: str) -> str:
    """Stable id of the (rule, tenant) alert: 16 hex of sha256, as Alertmanager shows."""
    return hashlib.sha256(f"{rule}\x1f{tenant}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(slots=True)
class AlertState:
    """What is known of one (rule, tenant) alert between observations."""

    rule: str
    severity: Severity
    status: Status
    first_window: Window
    """First window of the current (or last) firing episode."""
    last_window: Window
    """Latest window in which the rule fired."""
    sent_window: Window
    """Window of the last ``firing`` alert sent (for the repeat interval)."""
    count: int
    sessions: list[str]
    started_at: float | None = None
    """Wall time at which the current (or last) firing episode began (Alertmanager's
    ``startsAt``); None in records written before it was kept."""
    resolved_at: float | None = None
    """Wall time at which it resolved (Alertmanager's ``endsAt``)."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for the alert table."""
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "status": self.status,
            "first": [self.first_window.start, self.first_window.end],
            "last": [self.last_window.start, self.last_window.end],
            "sent": [self.sent_window.start, self.sent_window.end],
            "count": self.count,
            "sessions": self.sessions,
            "started_at": self.started_at,
            "resolved_at": self.resolved_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AlertState:
        """Rebuild from :meth:`to_json`."""
        status: Status = "resolved" if data["status"] == "resolved" else "firing"
        return cls(
            rule=str(data["rule"]),
            severity=Severity(data["severity"]),
            status=status,
            first_window=Window(*map(float, data["first"])),
            last_window=Window(*map(float, data["last"])),
            sent_window=Window(*map(float, data["sent"])),
            count=int(data["count"]),
            sessions=[str(s) for s in data.get("sessions", [])],
            started_at=_opt_float(data.get("started_at")),
            resolved_at=_opt_float(data.get("resolved_at")),
        )


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def make_alert(
    tenant: str,
    rule: str,
    severity: Severity,
    status: Status,
    window: Window,
    count: int,
    sessions: list[str],
    ts: float,
) -> FleetAlert:
    """A ``fleet.alert`` with its deterministic id."""
    print_ = fingerprint(rule, tenant)
    return FleetAlert(
        session_id="*",
        tenant=tenant,
        caused_by=None,
        ts=to_datetime(ts),
        alert_id=output_id("alert", print_, status, repr(window.start)),
        rule=rule,
        severity=severity,
        status=status,
        window=window.alert_window(),
        count=count,
        sessions=sessions,
        fingerprint=print_,
    )


class AlertBook:
    """The alerts of one tenant, by rule name."""

    def __init__(self, tenant: str, repeat_interval: float) -> None:
        self.tenant = tenant
        self.repeat_interval = repeat_interval
        self.states: dict[str, AlertState] = {}

    def fire(
        self, rule: Rule, window: Window, verdict: Evaluation, ts: float, now: float
    ) -> FleetAlert | None:
        """The rule fired in ``window`` (``ts`` event time, ``now`` wall time): the
        alert to send, or None (already sent)."""
        state = self.states.get(rule.name)
        severity = rule.alert_severity
        if state is None or state.status == "resolved":
            self.states[rule.name] = AlertState(
                rule=rule.name,
                severity=severity,
                status="firing",
                first_window=window,
                last_window=window,
                sent_window=window,
                count=verdict.count,
                sessions=verdict.sessions,
                started_at=now,
            )
            return make_alert(
                self.tenant,
                rule.name,
                severity,
                "firing",
                window,
                verdict.count,
                verdict.sessions,
                ts,
            )
        if window > state.last_window:
            state.last_window = window
        state.count = verdict.count
        state.sessions = verdict.sessions or state.sessions
        due = (
            window.start > state.sent_window.start
            and window.start - state.sent_window.start >= self.repeat_interval
        )
        if not due:
            return None
        state.sent_window = window
        return make_alert(
            self.tenant, rule.name, severity, "firing", window, verdict.count, verdict.sessions, ts
        )

    def resolve_closed(self, closed_through: float, counts_of: Any, now: float) -> list[FleetAlert]:
        """Resolve every firing alert whose next window has closed (ends at or before
        ``closed_through``) without the rule firing in it. ``counts_of(rule, window)``
        gives the rule's count in that quiet window."""
        resolved = []
        for state in self.states.values():
            if state.status != "firing":
                continue
            quiet = state.last_window.next()
            if quiet.end > closed_through:
                continue
            state.status = "resolved"
            state.resolved_at = now
            count = int(counts_of(state.rule, quiet))
            resolved.append(
                make_alert(
                    self.tenant, state.rule, state.severity, "resolved", quiet, count, [], quiet.end
                )
            )
        return resolved

    def active(self) -> list[AlertState]:
        """Alerts now firing."""
        return [s for s in self.states.values() if s.status == "firing"]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for the alert table."""
        return {name: state.to_json() for name, state in self.states.items()}

    def load(self, data: dict[str, Any]) -> None:
        """Replace the states with those of :meth:`to_json`."""
        self.states = {str(name): AlertState.from_json(value) for name, value in data.items()}
