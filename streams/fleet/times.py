"""One countable thing at a time, for :meth:`FleetEvaluator.observe`, and time helpers.

The worker counts in bulk (:mod:`~spanguard.streams.fleet.combiner` partials); an
:class:`Observation` is the evaluator's per-event input, for replays and tests
that feed outputs one by one. Observations hold ids, kinds and counts: never
span text, and the session id only where a sample or the worst-sessions list
needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

ObservationKind = Literal["fault", "pin", "recompute", "decision", "compaction", "activity", "tick"]
KINDS: tuple[str, ...] = ("fault", "pin", "recompute", "decision", "compaction", "activity", "tick")


@dataclass(slots=True)
class Observation:
    """One thing the fleet counts, for one tenant at one event time.

    ``ts`` is seconds since the epoch: the output's own ``ts`` (the time of the
    input event that caused it), so window edges follow event time. A ``tick``
    carries the sender's wall clock in ``ts`` instead; it counts nothing and
    only lets idle tenants' windows close.
    """

    kind: ObservationKind
    tenant: str
    ts: float
    session_id: str | None = None
    output_id: str | None = None
    """The output's own id, to drop a re-delivered output (at-least-once)."""
    fault_kind: str | None = None
    severity: str | None = None
    action: str | None = None
    refused: int = 0
    """Spans a decision refused to evict."""
    # compaction (a context.compacted output)
    outcome: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    keys_lost: int = 0
    # activity (a worker's batch for one tenant and window)
    events: int = 0
    sessions: int = 0
    """Sessions seen for the first time in this window by the sending worker."""
    cycles: int = 0
    healthy: int = 0
    unhealthy_sessions: list[str] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        """Compact JSON, without the fields that are empty for this kind."""
        data: dict[str, Any] = {"kind": self.kind, "tenant": self.tenant, "ts": self.ts}
        for name in ("session_id", "output_id", "fault_kind", "severity", "action", "outcome"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.refused:
            data["refused"] = self.refused
        if self.kind == "compaction":
            data.update(
                tokens_before=self.tokens_before,
                tokens_after=self.tokens_after,
                keys_lost=self.keys_lost,
            )
        if self.kind == "activity":
            data.update(
                events=self.events,
                sessions=self.sessions,
                cycles=self.cycles,
                healthy=self.healthy,
                unhealthy_sessions=self.unhealthy_sessions,
            )
        return orjson.dumps(data)

    @classmethod
    def from_bytes(cls, raw: bytes) -> Observation | None:
        """Parse :meth:`to_bytes` output; None for anything else (never raises)."""
        try:
            data = orjson.loads(raw)
            kind = data["kind"]
            if kind not in KINDS:
                return None
            unhealthy = data.get("unhealthy_sessions") or []
            return cls(
                kind=kind,
                tenant=str(data["tenant"]),
                ts=float(data["ts"]),
                session_id=_opt_str(data.get("session_id")),
                output_id=_opt_str(data.get("output_id")),
                fault_kind=_opt_str(data.get("fault_kind")),
                severity=_opt_str(data.get("severity")),
                action=_opt_str(data.get("action")),
                refused=int(data.get("refused", 0)),
                outcome=_opt_str(data.get("outcome")),
                tokens_before=int(data.get("tokens_before", 0)),
                tokens_after=int(data.get("tokens_after", 0)),
                keys_lost=int(data.get("keys_lost", 0)),
                events=int(data.get("events", 0)),
                sessions=int(data.get("sessions", 0)),
                cycles=int(data.get("cycles", 0)),
                healthy=int(data.get("healthy", 0)),
                unhealthy_sessions=[str(s) for s in unhealthy],
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


def parse_ts(value: Any) -> float | None:
    """RFC 3339 text (or a datetime) -> seconds since the epoch; None when unreadable
    or without an offset (the contract's times always carry one)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def to_datetime(ts: float) -> datetime:
    """Seconds since the epoch -> an aware UTC datetime."""
    return datetime.fromtimestamp(ts, UTC)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
