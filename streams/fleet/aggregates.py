"""Per-tenant counts in tumbling windows of event time.

A window is ``[start, start + size)`` with ``start`` a multiple of ``size``
seconds since the epoch, chosen by the observation's ``ts`` (the time the
harness made the input event), never by the time the worker saw it: a replay
of yesterday's traffic fills yesterday's windows.

One :class:`WindowCounts` holds, for one tenant and window: faults per kind and
severity, decisions per action, pins, recompute requests, active sessions,
input events, closed rewrite cycles and the healthy ones, a few sample
sessions per fault kind / severity, and the worst sessions (Space-Saving).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from schemas import (
    AlertWindow,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    Severity,
    SpanPinned,
)
from streams.fleet.observations import Observation, to_datetime
from streams.fleet.topk import SpaceSaving

SEVERITY_WEIGHT: dict[str, int] = {"info": 1, "warning": 3, "critical": 9}
"""How much a fault adds to its session's badness in the worst-sessions ranking."""


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """A tumbling window ``[start, end)`` in seconds since the epoch."""

    start: float
    end: float

    def alert_window(self) -> AlertWindow:
        """The contract's ``{start, end}``."""
        return AlertWindow(start=to_datetime(self.start), end=to_datetime(self.end))

    def next(self) -> Window:
        """The window right after this one."""
        return Window(self.end, self.end + (self.end - self.start))


def window_of(ts: float, size: float) -> Window:
    """The window of ``size`` seconds that holds ``ts`` (start inclusive, end exclusive)."""
    start = math.floor(ts / size) * size
    return Window(start, start + size)


COUNTERS = ("pins", "recomputes", "refused", "sessions", "events", "cycles", "healthy")
"""The plain counters of :class:`WindowCounts` (each a sum over the window)."""


@dataclass(slots=True)
class WindowCounts:
    """Everything counted for one tenant in one window (mutable, JSON round-trip).

    The plain counters are listed in :data:`COUNTERS`: merging, storage and the API
    handle them alike.
    """

    faults: dict[str, int] = field(default_factory=dict)
    """``"KIND|severity"`` -> count."""
    decisions: dict[str, int] = field(default_factory=dict)
    pins: int = 0
    recomputes: int = 0
    refused: int = 0
    """Spans the gate refused to evict (the ``refused`` entries of decisions)."""
    sessions: int = 0
    events: int = 0
    cycles: int = 0
    healthy: int = 0
    samples: dict[str, list[str]] = field(default_factory=dict)
    """``"kind:K"``, ``"severity:S"``, ``"unhealthy"`` -> first sessions seen."""
    top: SpaceSaving = field(default_factory=lambda: SpaceSaving(20))
    last_ts: float = 0.0

    # -- updates ---------------------------------------------------------

    def add(self, obs: Observation, sample_size: int) -> bool:
        """Count one observation; returns False when it counts nothing here (a tick)."""
        if obs.kind == "fault":
            kind = obs.fault_kind or "UNKNOWN"
            severity = obs.severity or "warning"
            key = f"{kind}|{severity}"
            self.faults[key] = self.faults.get(key, 0) + 1
            if obs.session_id is not None:
                self.add_sample(f"kind:{kind}", obs.session_id, sample_size)
                self.add_sample(f"severity:{severity}", obs.session_id, sample_size)
                self.top.add(obs.session_id, SEVERITY_WEIGHT.get(severity, 1))
        elif obs.kind == "decision":
            action = obs.action or "UNKNOWN"
            self.decisions[action] = self.decisions.get(action, 0) + 1
            self.refused += obs.refused
        elif obs.kind == "pin":
            self.pins += 1
        elif obs.kind == "recompute":
            self.recomputes += 1
        elif obs.kind == "activity":
            self.events += obs.events
            self.sessions += obs.sessions
            self.cycles += obs.cycles
            self.healthy += obs.healthy
            for session in obs.unhealthy_sessions:
                self.add_sample("unhealthy", session, sample_size)
        else:
            return False
        self.last_ts = max(self.last_ts, obs.ts)
        return True

    def count_output(self, event: OutputEvent, sample_size: int) -> None:
        """Count one engine output (fault, pin, recompute request, decision)."""
        if isinstance(event, IntegrityFault):
            kind, severity = event.kind.value, event.severity.value
            key = f"{kind}|{severity}"
            self.faults[key] = self.faults.get(key, 0) + 1
            self.add_sample(f"kind:{kind}", event.session_id, sample_size)
            self.add_sample(f"severity:{severity}", event.session_id, sample_size)
            self.top.add(event.session_id, SEVERITY_WEIGHT.get(severity, 1))
        elif isinstance(event, EvictionDecided):
            action = event.action.value
            self.decisions[action] = self.decisions.get(action, 0) + 1
            if event.refused:
                self.refused += len(event.refused)
        elif isinstance(event, SpanPinned):
            self.pins += 1
        elif isinstance(event, ScoresRecomputeRequested):
            self.recomputes += 1
        else:
            return
        self.last_ts = max(self.last_ts, event.ts.timestamp())

    def merge(self, other: WindowCounts, sample_size: int) -> None:
        """Add another partial count of the same tenant window (from another worker
        or another checkpoint): sums, sample unions (first ``sample_size``), and the
        Space-Saving summaries merged."""
        for key, n in other.faults.items():
            self.faults[key] = self.faults.get(key, 0) + n
        for key, n in other.decisions.items():
            self.decisions[key] = self.decisions.get(key, 0) + n
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, sessions in other.samples.items():
            for session in sessions:
                self.add_sample(key, session, sample_size)
        if other.top.counters:
            self.top = SpaceSaving.merged([self.top, other.top], self.top.capacity)
        self.last_ts = max(self.last_ts, other.last_ts)

    def add_sample(self, key: str, session: str, size: int) -> None:
        """Remember ``session`` under the sample ``key`` (the first ``size`` distinct)."""
        sample = self.samples.setdefault(key, [])
        if len(sample) < size and session not in sample:
            sample.append(session)

    # -- queries ---------------------------------------------------------

    @property
    def fault_total(self) -> int:
        """Every fault in the window."""
        return sum(self.faults.values())

    def faults_of(self, kind: str) -> int:
        """Faults of one kind (any severity)."""
        return sum(n for key, n in self.faults.items() if key.split("|", 1)[0] == kind)

    def faults_at_least(self, severity: Severity) -> int:
        """Faults whose severity is ``severity`` or worse."""
        return sum(
            n for key, n in self.faults.items() if _rank(key.split("|", 1)[1]) >= severity.rank
        )

    def by_kind(self) -> dict[str, int]:
        """Faults per kind."""
        return self._faults_by(0)

    def by_severity(self) -> dict[str, int]:
        """Faults per severity."""
        return self._faults_by(1)

    def _faults_by(self, part: int) -> dict[str, int]:
        # A fault's key is "kind|severity"; ``part`` picks one of the two.
        out: dict[str, int] = {}
        for key, n in self.faults.items():
            name = key.split("|", 1)[part]
            out[name] = out.get(name, 0) + n
        return out

    @property
    def healthy_share(self) -> float | None:
        """Healthy rewrite cycles / closed cycles; None when no cycle closed."""
        return self.healthy / self.cycles if self.cycles else None

    def sample(self, *keys: str, limit: int) -> list[str]:
        """Up to ``limit`` distinct sample sessions from the named samples, in order."""
        found: list[str] = []
        for key in keys:
            for session in self.samples.get(key, ()):
                if session not in found:
                    found.append(session)
        return found[:limit]

    # -- storage ---------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The record stored in the windowed table (plain JSON types)."""
        return {
            "faults": self.faults,
            "decisions": self.decisions,
            **{name: getattr(self, name) for name in COUNTERS},
            "samples": self.samples,
            "top": self.top.to_json(),
            "top_capacity": self.top.capacity,
            "last_ts": self.last_ts,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WindowCounts:
        """Rebuild from :meth:`to_json` (after a restart or a rebalance)."""
        return cls(
            faults={str(k): int(v) for k, v in data.get("faults", {}).items()},
            decisions={str(k): int(v) for k, v in data.get("decisions", {}).items()},
            **{name: int(data.get(name, 0)) for name in COUNTERS},
            samples={str(k): [str(s) for s in v] for k, v in data.get("samples", {}).items()},
            top=SpaceSaving(
                int(data.get("top_capacity", 20)),
                {str(k): [int(v[0]), int(v[1])] for k, v in data.get("top", {}).items()},
            ),
            last_ts=float(data.get("last_ts", 0.0)),
        )

    def summary(self) -> dict[str, Any]:
        """The window as the API shows it (no samples, no Space-Saving internals)."""
        return {
            "faults": self.fault_total,
            "faults_by_kind": self.by_kind(),
            "faults_by_severity": self.by_severity(),
            "decisions": dict(self.decisions),
            **{name: getattr(self, name) for name in COUNTERS if name != "healthy"},
            "healthy_cycles": self.healthy,
            "healthy_share": self.healthy_share,
        }


def _rank(severity: str) -> int:
    try:
        return Severity(severity).rank
    except ValueError:
        return 0
