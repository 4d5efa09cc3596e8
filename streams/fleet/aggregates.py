"""Per-tenant counts in tumbling windows of event time.

A window is ``[start, start + size)`` with ``start`` a multiple of ``size``
seconds since the epoch, chosen by the ``ts`` of what is counted (the time the
harness made the input event), never by the time the worker saw it: a replay
of yesterday's traffic fills yesterday's windows.

One :class:`WindowCounts` holds, for one tenant and window: faults per kind and
severity, decisions per action, pins, recompute requests, active sessions,
input events, closed rewrite cycles and the healthy ones, compactions per
outcome with the tokens they saved and the keys they lost, sessions expired
(contract 1.2's idle expiry, in the window of their expiry time), a few sample
sessions per fault kind / severity / compaction outcome, the worst sessions
(Space-Saving) and the compacted sessions (bounded, the worst kept).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from spanguard.schemas import (
    AlertWindow,
    ContextCompacted,
    EvictionDecided,
    FaultKind,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    Severity,
    SpanPinned,
)
from spanguard.streams.fleet.times import to_datetime
from spanguard.streams.fleet.topk import SpaceSaving

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


COUNTERS = (
    "pins",
    "recomputes",
    "refused",
    "sessions",
    "events",
    "cycles",
    "healthy",
    "tokens_before",
    "tokens_after",
    "tokens_saved",
    "keys_lost",
    "expired",
)
"""The plain counters of :class:`WindowCounts` (each a sum over the window)."""

OUTCOMES = ("clean", "warning", "critical")
"""Compaction outcomes, from best to worst (their index is their rank)."""
COMPACTED_SESSIONS = 100
"""Compacted sessions remembered per tenant window (the worst are kept)."""
CLEAN, WARNING, CRITICAL, THRASHING, SAVED, LOST = range(6)
"""Fields of a compacted session's figures: compactions per outcome, thrashing
faults, tokens saved, keys lost."""


def outcome_rank(outcome: str) -> int:
    """0, 1, 2 for clean, warning, critical (unknown outcomes rank as clean)."""
    return OUTCOMES.index(outcome) if outcome in OUTCOMES else 0


def worst_outcome(figures: list[int]) -> str | None:
    """The worst outcome among a compacted session's compactions (None: none yet)."""
    for rank in (CRITICAL, WARNING, CLEAN):
        if figures[rank]:
            return OUTCOMES[rank]
    return None


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
    tokens_before: int = 0
    """Live tokens just before each compaction, summed."""
    tokens_after: int = 0
    """Live tokens just after each compaction, summed."""
    tokens_saved: int = 0
    """``tokens_before - tokens_after`` of each compaction that shrank the context."""
    keys_lost: int = 0
    """``keys_before - keys_after`` of each compaction that lost keys."""
    expired: int = 0
    """Sessions expired after ``idle_timeout`` without events, counted in the window
    of their expiry time (newest ``ts`` + ``idle_timeout``, contract 1.2)."""
    compactions: dict[str, int] = field(default_factory=dict)
    """Compaction outcome (``clean``, ``warning``, ``critical``) -> count."""
    compacted: dict[str, list[int]] = field(default_factory=dict)
    """Session -> its compactions per outcome, thrashing faults, tokens saved and
    keys lost in this window (see :data:`CLEAN` ...); at most
    :data:`COMPACTED_SESSIONS`, the worst kept (:meth:`add_compacted`)."""
    samples: dict[str, list[str]] = field(default_factory=dict)
    """``"kind:K"``, ``"severity:S"``, ``"compaction:O"``, ``"unhealthy"`` -> first
    sessions seen."""
    top: SpaceSaving = field(default_factory=lambda: SpaceSaving(20))
    last_ts: float = 0.0

    # -- updates ---------------------------------------------------------

    def count_output(self, event: OutputEvent, sample_size: int) -> None:
        """Count one engine output (fault, pin, recompute request, decision)."""
        if isinstance(event, IntegrityFault):
            kind, severity = event.kind.value, event.severity.value
            key = f"{kind}|{severity}"
            self.faults[key] = self.faults.get(key, 0) + 1
            self.add_sample(f"kind:{kind}", event.session_id, sample_size)
            self.add_sample(f"severity:{severity}", event.session_id, sample_size)
            self.top.add(event.session_id, SEVERITY_WEIGHT.get(severity, 1))
            if event.kind is FaultKind.COMPACTION_THRASHING:
                self.add_compacted(event.session_id, _figures(THRASHING, 1))
        elif isinstance(event, EvictionDecided):
            action = event.action.value
            self.decisions[action] = self.decisions.get(action, 0) + 1
            if event.refused:
                self.refused += len(event.refused)
        elif isinstance(event, ContextCompacted):
            self.count_compaction(
                event.session_id,
                event.outcome,
                event.tokens_before,
                event.tokens_after,
                max(0, event.keys_before - event.keys_after),
                sample_size,
            )
        elif isinstance(event, SpanPinned):
            self.pins += 1
        elif isinstance(event, ScoresRecomputeRequested):
            self.recomputes += 1
        else:
            return
        self.last_ts = max(self.last_ts, event.ts.timestamp())

    def count_compaction(
        self,
        session: str | None,
        outcome: str,
        tokens_before: int,
        tokens_after: int,
        keys_lost: int,
        sample_size: int,
    ) -> None:
        """Count one compaction of ``session`` (its ``context.compacted`` figures)."""
        self.compactions[outcome] = self.compactions.get(outcome, 0) + 1
        saved = max(0, tokens_before - tokens_after)
        self.tokens_before += tokens_before
        self.tokens_after += tokens_after
        self.tokens_saved += saved
        self.keys_lost += keys_lost
        if session is not None:
            self.add_sample(f"compaction:{outcome}", session, sample_size)
            figures = _figures(outcome_rank(outcome), 1)
            figures[SAVED], figures[LOST] = saved, keys_lost
            self.add_compacted(session, figures)

    def add_compacted(self, session: str, figures: list[int]) -> None:
        """Add ``figures`` to the session's compaction figures. A new session past
        :data:`COMPACTED_SESSIONS` takes the place of the least bad one (worst
        outcome, then thrashing, then compactions, then id) if it is worse; else it
        is not listed (its counts are in the window's totals all the same)."""
        known = self.compacted.get(session)
        if known is not None:
            for i, n in enumerate(figures):
                known[i] += n
            return
        if len(self.compacted) >= COMPACTED_SESSIONS:
            least = min(self.compacted, key=lambda s: (_badness(self.compacted[s]), s))
            if _badness(figures) <= _badness(self.compacted[least]):
                return
            del self.compacted[least]
        self.compacted[session] = list(figures)

    def merge(self, other: WindowCounts, sample_size: int) -> None:
        """Add another partial count of the same tenant window (from another worker
        or another checkpoint): sums, sample unions (first ``sample_size``), and the
        Space-Saving summaries merged."""
        for key, n in other.faults.items():
            self.faults[key] = self.faults.get(key, 0) + n
        for key, n in other.decisions.items():
            self.decisions[key] = self.decisions.get(key, 0) + n
        for key, n in other.compactions.items():
            self.compactions[key] = self.compactions.get(key, 0) + n
        for session, figures in other.compacted.items():
            self.add_compacted(session, figures)
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
    def compaction_total(self) -> int:
        """Every compaction in the window."""
        return sum(self.compactions.values())

    def compactions_at_least(self, outcome: str) -> int:
        """Compactions whose outcome is ``outcome`` or worse."""
        rank = outcome_rank(outcome)
        return sum(n for key, n in self.compactions.items() if outcome_rank(key) >= rank)

    @property
    def thrashing_sessions(self) -> int:
        """Listed sessions with a ``COMPACTION_THRASHING`` fault in the window."""
        return sum(1 for figures in self.compacted.values() if figures[THRASHING])

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
            "compactions": self.compactions,
            "compacted": self.compacted,
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
            compactions={str(k): int(v) for k, v in data.get("compactions", {}).items()},
            compacted={
                str(k): _padded([int(n) for n in v]) for k, v in data.get("compacted", {}).items()
            },
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
            "compactions": self.compaction_total,
            "compactions_by_outcome": {o: self.compactions.get(o, 0) for o in OUTCOMES},
            "thrashing_sessions": self.thrashing_sessions,
        }


def _figures(index: int, n: int) -> list[int]:
    figures = [0] * (LOST + 1)
    figures[index] = n
    return figures


def _padded(figures: list[int]) -> list[int]:
    """Stored figures of any length as the current length (missing fields 0)."""
    return (figures + [0] * (LOST + 1))[: LOST + 1]


def _badness(figures: list[int]) -> tuple[int, int, int]:
    """How bad a compacted session is: worst outcome, thrashing, compactions."""
    worst = worst_outcome(figures)
    rank = outcome_rank(worst) if worst is not None else -1
    return (rank, figures[THRASHING], figures[CLEAN] + figures[WARNING] + figures[CRITICAL])


def _rank(severity: str) -> int:
    try:
        return Severity(severity).rank
    except ValueError:
        return 0
