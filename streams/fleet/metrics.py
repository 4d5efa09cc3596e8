"""Prometheus metrics of one worker, in a registry of its own.

A worker counts what it processed itself (its partitions); Prometheus sums the
workers. Labels are bounded: a tenant gets its own ``tenant`` label only among
the first ``max_tenant_labels`` tenants the worker sees, the rest share
``tenant="other"``; session ids never become labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from schemas import (
    EventRejected,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    SpanPinned,
)

OTHER = "other"
"""The tenant label of every tenant past the cap."""
UNKNOWN = "unknown"
"""The tenant label of input records whose tenant could not be read."""

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class TenantLabels:
    """Maps tenants to label values, keeping at most ``limit`` distinct ones."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._known: set[str] = set()

    def __call__(self, tenant: str | None) -> str:
        """The label value for ``tenant``."""
        if tenant is None:
            return UNKNOWN
        if tenant in self._known:
            return tenant
        if len(self._known) < self.limit:
            self._known.add(tenant)
            return tenant
        return OTHER


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """The engine counters that produce no output of their own."""

    duplicates: int
    rejected: int
    cycles_closed: int
    cycles_healthy: int
    live_sessions: int
    sessions_closed: int


class _EngineCollector(Collector):
    """Reads the engine's counters at scrape time (no work per record)."""

    def __init__(self, figures: Callable[[], EngineFigures | None]) -> None:
        self._figures = figures

    def collect(self) -> Iterable[Metric]:
        figures = self._figures()
        if figures is None:
            return []
        cycles = CounterMetricFamily(
            "spanguard_rewrite_cycles",
            "Closed rewrite cycles (before/after windows of a rewrite), by outcome",
            labels=["outcome"],
        )
        cycles.add_metric(["healthy"], figures.cycles_healthy)
        cycles.add_metric(["unhealthy"], figures.cycles_closed - figures.cycles_healthy)
        return [
            CounterMetricFamily(
                "spanguard_duplicates",
                "Input events ignored as duplicates (event id seen in the session's window)",
                value=figures.duplicates,
            ),
            CounterMetricFamily(
                "spanguard_rejected",
                "Input records rejected to the dead-letter topic",
                value=figures.rejected,
            ),
            cycles,
            GaugeMetricFamily(
                "spanguard_live_sessions",
                "Sessions in this worker's state (its partitions)",
                value=figures.live_sessions,
            ),
            CounterMetricFamily(
                "spanguard_sessions_closed",
                "Sessions closed by session.closed",
                value=figures.sessions_closed,
            ),
        ]


class FleetMetrics:
    """Every metric a worker exposes on ``/metrics``."""

    def __init__(
        self, max_tenant_labels: int, figures: Callable[[], EngineFigures | None] | None = None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.tenant = TenantLabels(max_tenant_labels)
        r = self.registry
        self.events = Counter("spanguard_events", "Input records processed", ["tenant"], registry=r)
        self.faults = Counter(
            "spanguard_faults",
            "integrity.fault outputs",
            ["tenant", "kind", "severity"],
            registry=r,
        )
        self.decisions = Counter(
            "spanguard_decisions", "eviction.decided outputs", ["tenant", "action"], registry=r
        )
        self.pins = Counter("spanguard_pins", "span.pinned outputs", ["tenant"], registry=r)
        self.recomputes = Counter(
            "spanguard_recompute_requests",
            "scores.recompute_requested outputs",
            ["tenant"],
            registry=r,
        )
        self.dead_letters = Counter(
            "spanguard_dead_letters", "event.rejected outputs", ["reason"], registry=r
        )
        self.latency = Histogram(
            "spanguard_processing_seconds",
            "Time to process one input record: engine, outputs acknowledged, state written",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "spanguard_consumer_lag",
            "Records on <prefix>.events not yet processed, per assigned partition",
            ["partition"],
            registry=r,
        )
        self.alerts = Counter(
            "spanguard_alerts",
            "fleet.alert outputs sent by this worker",
            ["rule", "severity", "status"],
            registry=r,
        )
        self.active_alerts = Gauge(
            "spanguard_active_alerts",
            "Alerts firing among the tenants this worker aggregates",
            ["rule", "severity"],
            registry=r,
        )
        self.webhook_failures = Counter(
            "spanguard_webhook_failures",
            "Alerts the Alertmanager webhook did not accept after every attempt",
            registry=r,
        )
        self._children: dict[tuple[int, tuple[str, ...]], Counter] = {}
        if figures is not None:
            r.register(_EngineCollector(figures))

    def observe_record(self, tenant: str | None, outputs: Sequence[OutputEvent]) -> None:
        """Count one processed input record and the outputs it caused."""
        child = self._child
        child(self.events, self.tenant(tenant)).inc()
        for event in outputs:
            if isinstance(event, IntegrityFault):
                label = self.tenant(event.tenant)
                child(self.faults, label, event.kind.value, event.severity.value).inc()
            elif isinstance(event, EvictionDecided):
                child(self.decisions, self.tenant(event.tenant), event.action.value).inc()
            elif isinstance(event, SpanPinned):
                child(self.pins, self.tenant(event.tenant)).inc()
            elif isinstance(event, ScoresRecomputeRequested):
                child(self.recomputes, self.tenant(event.tenant)).inc()
            elif isinstance(event, EventRejected):
                child(self.dead_letters, event.reason.value).inc()

    def _child(self, metric: Counter, *labels: str) -> Counter:
        # ``labels()`` takes a lock and validates on every call; this runs once per
        # output, so children are cached (their number is bounded by the label cap).
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def set_active_alerts(self, active: Iterable[tuple[str, str]]) -> None:
        """Replace the active-alert gauge with counts of (rule, severity) pairs."""
        counts: dict[tuple[str, str], int] = {}
        for key in active:
            counts[key] = counts.get(key, 0) + 1
        self.active_alerts.clear()
        for (rule, severity), n in counts.items():
            self.active_alerts.labels(rule, severity).set(n)

    def set_consumer_lag(self, lag: dict[int, int]) -> None:
        """Replace the lag gauge with ``{partition: records behind}``."""
        self.consumer_lag.clear()
        for partition, behind in sorted(lag.items()):
            self.consumer_lag.labels(str(partition)).set(behind)

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        return generate_latest(self.registry)
