"""Per-worker activity of its own sessions, flushed to the fleet in small batches.

Active sessions and rewrite cycles produce no output of their own, so the
output topics cannot tell the fleet about them. The worker that processes a
session sees them; it counts per (tenant, window) the distinct sessions it saw
for the first time, the input records, and the closed and healthy rewrite
cycles, and flushes these counts as ``activity`` observations on every timer
tick. A session lives on one partition, so the per-worker distinct counts add
up to the fleet's (a session that moves to another worker in the middle of a
window is counted by both: the count is an upper bound then).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.fleet.aggregates import window_of
from streams.fleet.observations import Observation


@dataclass(slots=True)
class _Pending:
    events: int = 0
    sessions: int = 0
    cycles: int = 0
    healthy: int = 0
    last_ts: float = 0.0
    unhealthy: list[str] = field(default_factory=list)


class ActivityTracker:
    """Counts one worker's activity until the next :meth:`flush`."""

    def __init__(self, window_seconds: float, sample_size: int = 5) -> None:
        self.window_seconds = window_seconds
        self.sample_size = sample_size
        self._pending: dict[tuple[str, float], _Pending] = {}
        self._seen: dict[tuple[str, float], set[str]] = {}
        self._newest = 0.0

    def record(
        self, tenant: str, session_id: str, ts: float, cycles: int = 0, healthy: int = 0
    ) -> None:
        """One input record of ``session_id``, that closed ``cycles`` rewrite cycles
        of which ``healthy`` were healthy."""
        start = window_of(ts, self.window_seconds).start
        key = (tenant, start)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending()
        pending.events += 1
        pending.last_ts = max(pending.last_ts, ts)
        seen = self._seen.setdefault(key, set())
        if session_id not in seen:
            seen.add(session_id)
            pending.sessions += 1
        if cycles > 0:
            pending.cycles += cycles
            pending.healthy += healthy
            room = len(pending.unhealthy) < self.sample_size
            if healthy < cycles and room and session_id not in pending.unhealthy:
                pending.unhealthy.append(session_id)
        if start > self._newest:
            self._newest = start
            self._forget_old()

    def flush(self) -> list[Observation]:
        """The counts since the last flush, one observation per (tenant, window)."""
        batch = [
            Observation(
                kind="activity",
                tenant=tenant,
                ts=pending.last_ts,
                events=pending.events,
                sessions=pending.sessions,
                cycles=pending.cycles,
                healthy=pending.healthy,
                unhealthy_sessions=pending.unhealthy,
            )
            for (tenant, _), pending in sorted(self._pending.items())
        ]
        self._pending.clear()
        return batch

    def _forget_old(self) -> None:
        # Distinct-session sets are only needed while a window still receives
        # events: keep the newest two windows (the current one and stragglers).
        cutoff = self._newest - self.window_seconds
        for key in [k for k in self._seen if k[1] < cutoff]:
            del self._seen[key]
