"""The fleet monitor's core: the workers' partial counts in, window counts and alerts
out, no I/O.

One :class:`FleetEvaluator` holds the tenants whose partials reach it (in the
worker: the tenants of its partitions of ``<prefix>.fleet``). For each partial
count of a tenant window it adds the counts into the tenant's window, fires the
instant rules on that window, advances the tenant's event-time watermark and
closes the windows that lie ``grace_seconds`` behind it: the share rules are
judged on closed windows and alerts whose next window closed quietly are
resolved. A timer tick closes the windows of a tenant that has been silent for
``idle_seconds`` of wall time (its watermark would never move again). A partial
of a window already closed (a lagging worker, a data path re-sending after a
crash) is counted, and can still fire a rule that had not fired in that window:
late data adds alerts, it never withdraws one.

The aggregator persists what :class:`Outcome` names (changed windows, changed
tenant records) and loads it with :meth:`FleetEvaluator.load`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from spanguard.schemas import FleetAlert
from spanguard.streams.fleet.aggregates import Window, WindowCounts, window_of
from spanguard.streams.fleet.alerts import AlertBook, AlertState
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.rules import Rule


@dataclass(slots=True)
class TenantState:
    """One tenant: its retained windows, watermark and alerts."""

    tenant: str
    book: AlertBook
    windows: dict[float, WindowCounts] = field(default_factory=dict)
    watermark: float | None = None
    """Highest ``ts`` counted (event time)."""
    closed_through: float = 0.0
    """Windows ending at or before this are closed: judged; a late partial of one can
    still add a firing alert (never withdraw one)."""
    last_seen_wall: float = 0.0
    """Wall time of the last partial (for idle closing). Stored with the tenant,
    so that a tenant whose owner changes (often, in a restless group) still goes
    idle on time; records written before it was kept restart the timer at load."""

    def newest(self) -> float | None:
        """Start of the newest retained window."""
        return max(self.windows) if self.windows else None

    def to_json(self) -> dict[str, Any]:
        """The tenant record of the alert table (windows are stored separately)."""
        return {
            "watermark": self.watermark,
            "closed_through": self.closed_through,
            "last_seen_wall": self.last_seen_wall,
            "alerts": self.book.to_json(),
        }


@dataclass(slots=True)
class Outcome:
    """What one partial or tick changed, for the aggregator to send and persist."""

    tenant: str
    alerts: list[FleetAlert] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    tenant_changed: bool = False


class FleetEvaluator:
    """Window counts and alert state of many tenants."""

    def __init__(self, settings: FleetSettings, rules: list[Rule]) -> None:
        self.settings = settings
        self.rules = rules
        self.tenants: dict[str, TenantState] = {}
        self._rules_by_name = {rule.name: rule for rule in rules}

    # -- entry points ----------------------------------------------------

    def merge(self, tenant: str, start: float, partial: WindowCounts, now: float) -> Outcome:
        """Add a worker's partial counts of one tenant window (``start``: the window's
        start; ``now``: the wall clock, seconds), judge the instant rules on the window,
        advance the watermark to the partial's newest ``ts`` and close what it passes."""
        outcome = Outcome(tenant)
        state = self._tenant(tenant)
        state.last_seen_wall = now
        ts = partial.last_ts or start
        window = window_of(start, self.settings.window_seconds)
        newest = state.newest()
        if newest is not None and window.start <= newest - self.settings.retention_seconds:
            return outcome  # older than anything retained: nothing to add it to
        counts = state.windows.get(window.start)
        if counts is None:
            counts = state.windows[window.start] = self._new_counts()
            self._prune(state)
        counts.merge(partial, self.settings.alert_sample_sessions)
        outcome.windows.append(window)
        if window.end > state.closed_through:
            for rule in self.rules:
                if rule.instant:
                    outcome.alerts.extend(self._verdict(state, rule, window, counts, ts, now))
        else:
            outcome.alerts.extend(self._judge_late(state, window, counts, ts, now))
        if state.watermark is None or ts > state.watermark:
            state.watermark = ts
        closed_before = state.closed_through
        outcome.alerts.extend(
            self._close(state, state.watermark - self.settings.grace_seconds, now)
        )
        # The tenant record changes with alerts and closed windows only (a few times
        # per window); the watermark alone is not worth a write: load() derives it.
        outcome.tenant_changed = bool(outcome.alerts) or state.closed_through != closed_before
        return outcome

    def tick(self, tenant: str, now: float) -> Outcome:
        """Close the windows of ``tenant`` when it has been silent for ``idle_seconds``."""
        outcome = Outcome(tenant)
        state = self.tenants.get(tenant)
        if state is None or not self._idle(state, now):
            return outcome
        limit = self._open_limit(state)
        if limit is None:
            return outcome
        outcome.alerts.extend(self._close(state, limit, now))
        outcome.tenant_changed = True
        return outcome

    def ticks_due(self, now: float) -> list[str]:
        """Tenants silent for ``idle_seconds`` with windows or alerts still open."""
        return [t for t, s in self.tenants.items() if self._idle(s, now) and self._open_limit(s)]

    # -- views -----------------------------------------------------------

    def counts(self, tenant: str, window: Window) -> WindowCounts | None:
        """The counts of one tenant window, if retained."""
        state = self.tenants.get(tenant)
        return state.windows.get(window.start) if state is not None else None

    def active_alerts(self) -> list[tuple[str, AlertState]]:
        """Every firing alert, as (tenant, state)."""
        return [(t, a) for t, s in self.tenants.items() for a in s.book.active()]

    def alert_state(self, tenant: str, rule: str) -> AlertState | None:
        """The state of one (rule, tenant) alert, if it ever fired."""
        state = self.tenants.get(tenant)
        return state.book.states.get(rule) if state is not None else None

    def tenant_record(self, tenant: str) -> dict[str, Any]:
        """What the alert table stores for ``tenant``."""
        return self.tenants[tenant].to_json()

    def window_record(self, tenant: str, window: Window) -> dict[str, Any]:
        """What the windowed table stores for one tenant window."""
        return self.tenants[tenant].windows[window.start].to_json()

    # -- persistence -----------------------------------------------------

    def load(
        self,
        tenant_records: Iterable[tuple[str, dict[str, Any]]],
        window_records: Iterable[tuple[str, float, dict[str, Any]]],
        now: float,
    ) -> set[str]:
        """Replace the tenants named in the records by their stored state (the others
        stay); returns them.

        Idle timers travel with the tenant, so rebalance churn never postpones an
        idle close. A timer that ran out while nobody owned the tenant (a restart
        longer than ``idle_seconds``) restarts at ``now`` instead: the silence was
        the outage's, and the data path is about to re-send the partials of its
        uncommitted input, which an immediate close would count but never judge.
        The caller stores the records again, so the restart happens once per outage.
        """
        loaded: set[str] = set()
        for tenant, record in tenant_records:
            self.tenants.pop(tenant, None)
            loaded.add(tenant)
            state = self._tenant(tenant)
            watermark = record.get("watermark")
            state.watermark = float(watermark) if watermark is not None else None
            state.closed_through = float(record.get("closed_through", 0.0))
            seen = record.get("last_seen_wall")
            state.last_seen_wall = float(seen) if isinstance(seen, (int, float)) and seen else now
            if self._idle(state, now):
                state.last_seen_wall = now
            state.book.load(record.get("alerts", {}))
        for tenant, start, record in window_records:
            if tenant not in loaded:
                self.tenants.pop(tenant, None)
                loaded.add(tenant)
            self._tenant(tenant).windows[float(start)] = WindowCounts.from_json(record)
        for tenant in loaded:
            state = self.tenants[tenant]
            if not state.last_seen_wall:
                state.last_seen_wall = now
            newest_ts = max((c.last_ts for c in state.windows.values()), default=None)
            if newest_ts is not None and (state.watermark is None or newest_ts > state.watermark):
                state.watermark = newest_ts
            self._prune(state)
        return loaded

    def drop(self, tenants: Iterable[str]) -> None:
        """Forget these tenants (their partition of the fleet topic went elsewhere)."""
        for tenant in tenants:
            self.tenants.pop(tenant, None)

    # -- internals -------------------------------------------------------

    def _tenant(self, tenant: str) -> TenantState:
        state = self.tenants.get(tenant)
        if state is None:
            book = AlertBook(tenant, self.settings.repeat_interval_seconds)
            state = self.tenants[tenant] = TenantState(tenant, book)
        return state

    def _new_counts(self) -> WindowCounts:
        counts = WindowCounts()
        counts.top.capacity = self.settings.top_sessions
        return counts

    def _prune(self, state: TenantState) -> None:
        newest = state.newest()
        if newest is None:
            return
        cutoff = newest - self.settings.retention_seconds
        for start in [s for s in state.windows if s <= cutoff]:
            del state.windows[start]

    def _verdict(
        self,
        state: TenantState,
        rule: Rule,
        window: Window,
        counts: WindowCounts,
        ts: float,
        now: float,
    ) -> list[FleetAlert]:
        verdict = rule.evaluate(counts, self.settings.alert_sample_sessions)
        if not verdict.firing:
            return []
        alert = state.book.fire(rule, window, verdict, ts, now)
        return [alert] if alert is not None else []

    def _close(self, state: TenantState, limit: float, now: float) -> list[FleetAlert]:
        if limit <= state.closed_through:
            return []
        size = self.settings.window_seconds
        alerts: list[FleetAlert] = []
        for start in sorted(state.windows):
            window = Window(start, start + size)
            if not state.closed_through < window.end <= limit:
                continue
            for rule in self.rules:
                if not rule.instant:
                    alerts.extend(
                        self._verdict(state, rule, window, state.windows[start], window.end, now)
                    )
        state.closed_through = limit
        alerts.extend(self._resolve(state, now))
        return alerts

    def _judge_late(
        self, state: TenantState, window: Window, counts: WindowCounts, ts: float, now: float
    ) -> list[FleetAlert]:
        """A partial of a closed window (a worker that lagged, a data path re-sending
        after a crash while the tenant's idle timer ran out): every rule that has not
        fired in this window or a later one is judged again on the grown counts, so
        late data can add a firing alert, never withdraw one. An alert whose quiet
        window is closed already is resolved at once."""
        alerts: list[FleetAlert] = []
        for rule in self.rules:
            known = state.book.states.get(rule.name)
            if known is None or (known.status == "resolved" and known.last_window < window):
                alerts.extend(self._verdict(state, rule, window, counts, ts, now))
        if alerts:
            alerts.extend(self._resolve(state, now))
        return alerts

    def _resolve(self, state: TenantState, now: float) -> list[FleetAlert]:
        counts_of = lambda rule, w: self._count(state, rule, w)  # noqa: E731
        return state.book.resolve_closed(state.closed_through, counts_of, now)

    def _count(self, state: TenantState, rule_name: str, window: Window) -> int:
        rule = self._rules_by_name.get(rule_name)
        counts = state.windows.get(window.start)
        if rule is None or counts is None:
            return 0
        return rule.evaluate(counts, 0).count

    def _idle(self, state: TenantState, now: float) -> bool:
        return now - state.last_seen_wall >= self.settings.idle_seconds

    def _open_limit(self, state: TenantState) -> float | None:
        """Where an idle close must reach to judge every open window and resolve every
        alert that can resolve: the end of the window after the newest; None when
        nothing is open."""
        newest = state.newest()
        candidates = [newest + 2 * self.settings.window_seconds] if newest is not None else []
        candidates += [a.last_window.next().end for a in state.book.active()]
        limit = max(candidates, default=None)
        if limit is None or limit <= state.closed_through:
            return None
        return limit
