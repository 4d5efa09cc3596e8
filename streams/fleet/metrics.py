"""Prometheus metrics of one worker, in a registry of its own.

A worker counts what it processed itself (its partitions); Prometheus sums the
workers. Labels are bounded: a tenant gets its own ``tenant`` label only among
``max_tenant_labels`` tenants (the configured ``labelled_tenants``, then those of
lowest hash among the tenants seen: the same on every worker), the rest share
``tenant="other"``; session ids never become labels.

Rules built on ``increase()`` need a series to exist before it grows: a counter
born at 1 looks like "no increase" to Prometheus. So every labelled counter is
created at 0 before it is first incremented: dead letters per reason, send
failures per target and agent crashes per agent at start, and a tenant's
faults (every kind, at its configured severity), decisions (every action),
refused spans (every reason), pins, recompute requests and compaction
figures (every outcome; tokens of every known role) the first time the tenant
is seen. Gauges are set to 0 rather than removed (active alerts of
every rule stay exposed). The process, platform and GC collectors of
prometheus-client are registered too, and ``spanguard_build_info``.
"""

from __future__ import annotations

import hashlib
import platform
from bisect import insort
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from spanguard.schemas import (
    DEFAULT_SEVERITY,
    Action,
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    FaultKind,
    IntegrityFault,
    OutputEvent,
    RefusalReason,
    RejectReason,
    ScoresRecomputeRequested,
    Severity,
    SpanPinned,
)
from spanguard.streams.engine.engine import Engine
from spanguard.streams.version import build_version

OTHER = "other"
"""The tenant label of every tenant past the cap."""
UNKNOWN = "unknown"
"""The tenant label of input records whose tenant could not be read."""
_SHARED = frozenset({OTHER, UNKNOWN})

LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0,
)  # fmt: skip
"""Seconds; up to 30 s so that a burst's tail (seconds, not milliseconds) is measured."""
SEND_TARGETS = ("kafka_outputs", "alerts_topic", "alertmanager", "otlp")
"""Where a worker sends on its own (besides the runtime's transactional outputs)."""
AGENTS = ("data-path", "process", "fleet-aggregate", "fleet-tick")
"""The worker's long-running tasks whose crashes are counted."""
OUTCOMES = ("clean", "warning", "critical")
"""A compaction's outcomes (``context.compacted`` ``outcome``)."""
ROLES = ("system", "user", "assistant", "tool", "unknown")
"""Span roles with their own ``role`` label on the compaction token counters; a
harness's other roles share ``role="other"`` (labels stay bounded)."""
THRASHING_MEMORY = 100_000
"""Sessions remembered as already thrashing (so a session counts once; least
recently thrashing forgotten first)."""


def role_label(role: str) -> str:
    """A span role as a bounded label value: one of :data:`ROLES`, else ``other``."""
    return role if role in ROLES else OTHER


@lru_cache(maxsize=4096)
def tenant_rank(tenant: str) -> bytes:
    """A tenant's place in the label order: sha256 of its name, the same on every worker."""
    return hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).digest()


class TenantLabels:
    """Maps tenants to label values, keeping at most ``limit`` distinct ones, chosen
    the same way on every worker (so ``sum by (tenant)`` over workers adds up).

    The ``always`` tenants (``labelled_tenants``) have their own label whatever else is
    seen. The other slots go to the tenants of lowest :func:`tenant_rank` among those the
    worker has seen: independent of the order they came in, so two workers that saw the
    same tenants label the same ones. A tenant that first appears with a lower rank takes
    the slot of the highest-ranked labelled one, which goes to ``other`` from then on (its
    series stops growing); with a stable set of tenants every worker settles on the same
    labels. A tenant named ``other`` or ``unknown`` takes no slot (see ``__call__``).
    """

    __slots__ = ("_labelled", "_ranked", "always", "slots")

    def __init__(self, limit: int, always: Iterable[str] = ()) -> None:
        self.always = frozenset(always)
        self.slots = max(0, limit - len(self.always))
        self._ranked: list[tuple[bytes, str]] = []
        """The labelled tenants outside ``always``, by rank (at most ``slots``)."""
        self._labelled: set[str] = set()

    def __call__(self, tenant: str | None) -> str:
        """The label value for ``tenant``."""
        if tenant is None:
            return UNKNOWN
        if tenant in self._labelled or tenant in self.always:
            return tenant
        if not self.slots or tenant in _SHARED:
            # A tenant named like a shared label is counted under "other": a slot of
            # its own would be indistinguishable from the overflow's series.
            return OTHER
        entry = (tenant_rank(tenant), tenant)
        ranked = self._ranked
        if len(ranked) >= self.slots:
            if entry > ranked[-1]:
                return OTHER
            self._labelled.discard(ranked.pop()[1])
        insort(ranked, entry)
        self._labelled.add(tenant)
        return tenant


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """The engine counters that produce no output of their own."""

    duplicates: int
    rejected: int
    cycles_closed: int
    cycles_healthy: int
    live_sessions: int
    sessions_closed: int
    sessions_expired: int = 0
    cold_sessions: int = 0
    thaws: int = 0


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
            CounterMetricFamily(
                "spanguard_sessions_expired",
                "Sessions expired after idle_timeout without events (contract 1.2)",
                value=figures.sessions_expired,
            ),
            GaugeMetricFamily(
                "spanguard_cold_sessions",
                "Live sessions held packed after cold_after without events (of live_sessions)",
                value=figures.cold_sessions,
            ),
            CounterMetricFamily(
                "spanguard_session_thaws",
                "Cold sessions unpacked to be read (an event after cold_after, an expiry)",
                value=figures.thaws,
            ),
        ]


def engine_figures(engines: Callable[[], Iterable[Engine]]) -> Callable[[], EngineFigures]:
    """Reads the counters of the worker's engines (one per owned partition), summed."""

    def read() -> EngineFigures:
        owned = list(engines())
        stats = [e.stats for e in owned]
        return EngineFigures(
            duplicates=sum(s.duplicates for s in stats),
            rejected=sum(s.rejected for s in stats),
            cycles_closed=sum(s.cycles_closed for s in stats),
            cycles_healthy=sum(s.cycles_healthy for s in stats),
            live_sessions=sum(len(e.sessions) for e in owned),
            sessions_closed=sum(s.sessions_closed for s in stats),
            sessions_expired=sum(s.sessions_expired for s in stats),
            cold_sessions=sum(e.sessions.cold for e in owned),
            thaws=sum(e.sessions.thaws for e in owned),
        )

    return read


class FleetMetrics:
    """Every metric a worker exposes on ``/metrics``."""

    def __init__(
        self,
        max_tenant_labels: int,
        figures: Callable[[], EngineFigures | None] | None = None,
        severities: Mapping[FaultKind, Severity] | None = None,
        rules: Iterable[tuple[str, str]] = (),
        labelled_tenants: Iterable[str] = (),
    ) -> None:
        """``severities``: each fault kind's configured severity (for counters born at
        0); ``rules``: (name, severity) of the fleet rules (their active-alert gauges
        exist at 0 from the start); ``labelled_tenants``: tenants that always have their
        own label (see :class:`TenantLabels`)."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.tenant = TenantLabels(max_tenant_labels, labelled_tenants)
        self.severities = dict(DEFAULT_SEVERITY if severities is None else severities)
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        Info("spanguard_build", "spanguard build", registry=r).info(
            {"version": build_version(), "python": platform.python_version()}
        )
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
        self.refused = Counter(
            "spanguard_refused_spans",
            "Spans the gate refused to evict (eviction.decided refused entries), by reason",
            ["tenant", "reason"],
            registry=r,
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
        self.compactions = Counter(
            "spanguard_compactions",
            "context.compacted outputs (accepted rewrites), by outcome",
            ["tenant", "outcome"],
            registry=r,
        )
        self.compaction_tokens = Counter(
            "spanguard_compaction_tokens",
            "Live tokens just before (phase=before) and just after (phase=after) each "
            "compaction, by span role",
            ["tenant", "phase", "role"],
            registry=r,
        )
        self.tokens_saved = Counter(
            "spanguard_compaction_tokens_saved",
            "Live tokens compactions removed (tokens_before - tokens_after, when positive)",
            ["tenant"],
            registry=r,
        )
        self.keys_lost = Counter(
            "spanguard_compaction_keys_lost",
            "Referent keys live spans no longer hold after a compaction "
            "(keys_before - keys_after, when positive)",
            ["tenant"],
            registry=r,
        )
        self.thrashing_sessions = Counter(
            "spanguard_thrashing_sessions",
            "Sessions that started thrashing (their first COMPACTION_THRASHING fault)",
            ["tenant"],
            registry=r,
        )
        self.latency = Histogram(
            "spanguard_processing_seconds",
            "Time from an input record's processing by the engine to the checkpoint that "
            "writes its outputs and state, by input event type",
            ["type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.gate_latency = Histogram(
            "spanguard_gate_latency_seconds",
            "Time from an eviction request's ts (the harness's clock) to its decision "
            "being produced (the worker's clock)",
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
            "Fleet alerts firing among the tenants this worker aggregates",
            ["rule", "severity"],
            registry=r,
        )
        self.send_failures = Counter(
            "spanguard_send_failures",
            "Sends that failed after every attempt, by target",
            ["target"],
            registry=r,
        )
        self.agent_crashes = Counter(
            "spanguard_agent_crashes",
            "Long-running tasks of the worker that ended with an exception",
            ["agent"],
            registry=r,
        )
        self._rules = sorted(set(rules))
        self._children: dict[tuple[int, tuple[str, ...]], Counter] = {}
        self._born: set[str] = set()
        self._thrashing: OrderedDict[tuple[str, str], None] = OrderedDict()
        for reason in RejectReason:
            self.dead_letters.labels(reason.value)
        for target in SEND_TARGETS:
            self.send_failures.labels(target)
        for agent in AGENTS:
            self.agent_crashes.labels(agent)
        self.set_active_alerts(())
        if figures is not None:
            r.register(_EngineCollector(figures))

    def observe_record(
        self, tenant: str | None, outputs: Sequence[OutputEvent], now: float | None = None
    ) -> None:
        """Count one processed input record and the outputs it caused (``now``: wall
        time the outputs were produced, for the gate latency)."""
        child = self._child
        label = self.tenant(tenant)
        self._birth(label)
        child(self.events, label).inc()
        for event in outputs:
            if isinstance(event, IntegrityFault):
                label = self._tenant_of(event.tenant)
                child(self.faults, label, event.kind.value, event.severity.value).inc()
                if event.kind is FaultKind.COMPACTION_THRASHING and self._first_thrash(
                    event.tenant, event.session_id
                ):
                    child(self.thrashing_sessions, label).inc()
            elif isinstance(event, EvictionDecided):
                label = self._tenant_of(event.tenant)
                child(self.decisions, label, event.action.value).inc()
                for refusal in event.refused:
                    child(self.refused, label, refusal.reason.value).inc()
                if now is not None:
                    self.gate_latency.observe(max(0.0, now - event.ts.timestamp()))
            elif isinstance(event, SpanPinned):
                child(self.pins, self._tenant_of(event.tenant)).inc()
            elif isinstance(event, ScoresRecomputeRequested):
                child(self.recomputes, self._tenant_of(event.tenant)).inc()
            elif isinstance(event, ContextCompacted):
                self._compacted(event)
            elif isinstance(event, EventRejected):
                child(self.dead_letters, event.reason.value).inc()

    def _compacted(self, event: ContextCompacted) -> None:
        """Count one compaction: its outcome, tokens by role, tokens saved, keys lost."""
        child = self._child
        label = self._tenant_of(event.tenant)
        child(self.compactions, label, event.outcome).inc()
        for phase, by_role in (
            ("before", event.tokens_by_role_before),
            ("after", event.tokens_by_role_after),
        ):
            for role, tokens in by_role.items():
                if tokens > 0:
                    child(self.compaction_tokens, label, phase, role_label(role)).inc(tokens)
        saved = event.tokens_before - event.tokens_after
        if saved > 0:
            child(self.tokens_saved, label).inc(saved)
        lost = event.keys_before - event.keys_after
        if lost > 0:
            child(self.keys_lost, label).inc(lost)

    def _first_thrash(self, tenant: str, session_id: str) -> bool:
        """True the first time ``session_id`` thrashes (within the bounded memory)."""
        key = (tenant, session_id)
        if key in self._thrashing:
            self._thrashing.move_to_end(key)
            return False
        self._thrashing[key] = None
        if len(self._thrashing) > THRASHING_MEMORY:
            self._thrashing.popitem(last=False)
        return True

    def send_failed(self, target: str) -> None:
        """One send to ``target`` (see ``SEND_TARGETS``) failed after every attempt."""
        self.send_failures.labels(target).inc()

    def agent_crashed(self, agent: str) -> None:
        """A long-running task of the worker ended with an exception."""
        self.agent_crashes.labels(agent).inc()

    def _tenant_of(self, tenant: str) -> str:
        label = self.tenant(tenant)
        self._birth(label)
        return label

    def _birth(self, label: str) -> None:
        """Create every counter of a tenant label at 0, once."""
        if label in self._born:
            return
        self._born.add(label)
        for kind in FaultKind:
            self.faults.labels(label, kind.value, self.severities[kind].value)
        for action in Action:
            self.decisions.labels(label, action.value)
        for reason in RefusalReason:
            self.refused.labels(label, reason.value)
        self.pins.labels(label)
        self.recomputes.labels(label)
        for outcome in OUTCOMES:
            self.compactions.labels(label, outcome)
        for phase in ("before", "after"):
            for role in ROLES:
                self.compaction_tokens.labels(label, phase, role)
        self.tokens_saved.labels(label)
        self.keys_lost.labels(label)
        self.thrashing_sessions.labels(label)

    def _child(self, metric: Counter, *labels: str) -> Counter:
        # ``labels()`` takes a lock and validates on every call; this runs once per
        # output, so children are cached (their number is bounded by the label cap).
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def set_active_alerts(self, active: Iterable[tuple[str, str]]) -> None:
        """Set the active-alert gauge to the counts of (rule, severity) pairs; every
        known rule and every pair seen before stays exposed, at 0 when not firing."""
        counts: dict[tuple[str, str], int] = dict.fromkeys(self._rules, 0)
        for key in active:
            counts[key] = counts.get(key, 0) + 1
        for (rule, severity), n in counts.items():
            self.active_alerts.labels(rule, severity).set(n)
        self._rules = sorted(counts)

    def set_consumer_lag(self, lag: dict[int, int]) -> None:
        """Replace the lag gauge with ``{partition: records behind}`` (a revoked
        partition's series goes: another worker reports it)."""
        self.consumer_lag.clear()
        for partition, behind in sorted(lag.items()):
            self.consumer_lag.labels(str(partition)).set(behind)

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        return generate_latest(self.registry)
