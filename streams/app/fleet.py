"""Fleet monitoring in the Faust worker: ``install_fleet(topology)``.

What it adds to the app:

* ``<prefix>.fleet`` (declared by the worker, keyed by tenant): observations;
* agent ``fleet-collect`` over the output topics (faults, pins, recompute,
  decisions): one observation per output, re-keyed by tenant. Each worker only
  processes its own partitions of the input, but every observation of a tenant
  lands on the one partition of ``<prefix>.fleet`` that tenant hashes to, so
  the aggregation is fleet-wide;
* agent ``fleet-aggregate`` over ``<prefix>.fleet``: the
  :class:`~streams.fleet.evaluator.FleetEvaluator` counts into tumbling windows
  and evaluates the rules; its state is kept in two tables, ``fleet-windows``
  (Faust windowed table, tumbling, expiring after the retention) and
  ``fleet-alerts`` (per tenant: watermark, closed windows, alert states), and
  alerts go to ``<prefix>.alerts`` keyed by tenant (and to Alertmanager, re-posted while firing);
* timer ``fleet-tick``: flushes this worker's activity counts (active
  sessions, rewrite cycles), sends ticks that close idle tenants' windows,
  refreshes the lag and active-alert gauges;
* the runtime's fleet hook (per-record metrics, timelines, activity), and
  the web views of :mod:`streams.app.web` when the web server is enabled.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from schemas import DEFAULT_SEVERITY, FaultKind, FleetAlert, Severity
from streams.codec import encode_output
from streams.fleet.activity import ActivityTracker
from streams.fleet.aggregates import Window
from streams.fleet.alertmanager import AlertmanagerClient, AlertmanagerNotifier, Links
from streams.fleet.config import FleetSettings
from streams.fleet.evaluator import FleetEvaluator, Outcome
from streams.fleet.fleet_view import local_view
from streams.fleet.metrics import FleetMetrics, build_version
from streams.fleet.observations import Observation, observation_from_output
from streams.fleet.observer import RecordObserver, engine_cycles, engine_figures
from streams.fleet.otel import OtlpLogExport
from streams.fleet.recent import RecentRecords
from streams.fleet.rules import Rule, load_rules
from streams.fleet.session_view import session_view

if TYPE_CHECKING:
    from streams.app.topology import Topology

log = logging.getLogger(__name__)

SOURCE_SUFFIXES = ("faults", "pins", "recompute", "decisions")
"""Output topics the fleet counts (dead letters are counted by the metrics only)."""
FLEET_SUFFIX = "fleet"
"""``<prefix>.fleet``: the observations topic, keyed by tenant."""
OBSERVATION_RETENTION = timedelta(days=1)
"""Observations are consumed within seconds; a day covers any outage worth recovering."""


@dataclass
class Fleet:
    """Everything fleet monitoring added to one worker (for the views and tests)."""

    settings: FleetSettings
    topology: Topology
    rules: list[Rule]
    metrics: FleetMetrics
    evaluator: FleetEvaluator
    activity: ActivityTracker
    recent: RecentRecords
    observer: RecordObserver
    topic: Any
    windows: Any
    alert_table: Any
    alertmanager: AlertmanagerNotifier | None = None
    restored_tenants: int = 0
    _pending: dict[str, set[Window]] = field(default_factory=dict, init=False, repr=False)

    def session(self, tenant: str, session_id: str) -> dict[str, Any] | None:
        """The inspector's view of a session this worker processes, or None."""
        engines = self.topology.runtime.engines()
        return session_view(
            tenant,
            session_id,
            self.topology.runtime.session(tenant, session_id),
            self.recent.get(tenant, session_id),
            closed=any((tenant, session_id) in e.stats.closed_sessions for e in engines),
        )

    def local_view(
        self, windows: int = 1, allowed: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """This worker's part of ``/fleet`` (each tenant's newest ``windows`` windows;
        only the tenants ``allowed``, all by default)."""
        return local_view(self.evaluator, windows, allowed)

    def ready(self) -> bool:
        """True while the data path makes progress (see :meth:`Runtime.health`)."""
        ready, _ = self.topology.runtime.health()
        return ready

    # -- used by the agents ---------------------------------------------

    async def publish(self, alerts: Iterable[FleetAlert]) -> None:
        """Send alerts to ``<prefix>.alerts`` (keyed by tenant), acknowledged, then to
        Alertmanager in the background."""
        topic = self.topology.outputs["alerts"]
        changed = []
        for alert in alerts:
            try:
                ack = await topic.send(key=alert.tenant.encode("utf-8"), value=encode_output(alert))
                await ack
            except Exception:
                self.metrics.send_failed("alerts_topic")
                raise
            self.metrics.alerts.labels(alert.rule, alert.severity.value, alert.status).inc()
            log.info(
                "fleet alert %s %s tenant=%s count=%d",
                alert.rule,
                alert.status,
                alert.tenant,
                alert.count,
            )
            state = self.evaluator.alert_state(alert.tenant, alert.rule)
            if state is not None:
                changed.append((alert.tenant, state))
        if self.alertmanager is not None and changed:
            self.alertmanager.submit(changed, time.time())

    def renew_alerts(self, now: float) -> None:
        """Re-post every firing alert to Alertmanager when the resend interval is up."""
        if self.alertmanager is not None:
            self.alertmanager.renew(self.evaluator.active_alerts(), now)

    def persist(self, outcome: Outcome, flush: bool = False) -> None:
        """Write what the outcome changed to the tables (inside the agent's stream).

        Window counts change with every observation; writing each change would
        put one changelog record per observation on the wire. They are written
        when the tenant's record changes (alerts, closed windows) and otherwise
        on the next tick (``flush``), at most ``tick_seconds`` later. A crash in
        between loses those counts, never an alert's state.
        """
        tenant = outcome.tenant
        pending = self._pending.setdefault(tenant, set())
        pending.update(outcome.windows)
        if not (flush or outcome.alerts or outcome.tenant_changed):
            return
        size = self.settings.window_seconds
        for window in sorted(pending):
            counts = self.evaluator.counts(tenant, window)
            if counts is not None:
                # Faust names a tumbling window (start, start + size - 0.1).
                self.windows[tenant][(window.start, window.start + size - 0.1)] = counts.to_json()
        del self._pending[tenant]
        if outcome.tenant_changed and tenant in self.evaluator.tenants:
            self.alert_table[tenant] = self.evaluator.tenant_record(tenant)

    def pending_tenants(self) -> list[str]:
        """Tenants with window counts not yet written."""
        return [tenant for tenant, windows in self._pending.items() if windows]

    def restore(self) -> int:
        """Rebuild the evaluator from this worker's (active) table partitions."""
        owned = self._owned()
        tenant_records = [
            (str(k), v) for k, v in self.alert_table.items() if isinstance(v, dict) and owned(k)
        ]
        window_records = []
        for key, value in self.windows.table.items():
            parsed = _window_key(key)
            if parsed is not None and isinstance(value, dict) and owned(parsed[0]):
                window_records.append((parsed[0], parsed[1], value))
        self.restored_tenants = self.evaluator.restore(tenant_records, window_records, time.time())
        self._pending.clear()
        return self.restored_tenants

    def _owned(self) -> Callable[[Any], bool]:
        """Whether a tenant's partition of ``<prefix>.fleet`` is active on this worker.

        The RocksDB store iterates active partitions only, the memory store also
        standbys: a standby's tenants must not appear twice in ``/fleet``.
        """
        app: Any = self.topology.app
        name = self.topic.get_topic_name()
        try:
            actives = app.assignor.assigned_actives()
            producer = app.producer
        except AttributeError:
            return lambda _tenant: True

        def owned(tenant: Any) -> bool:
            if not isinstance(tenant, str):
                return False
            try:
                return producer.key_partition(name, tenant.encode("utf-8")) in actives
            except Exception:  # no metadata yet: keep it rather than lose it
                return True

        return owned

    async def consumer_lag(self) -> dict[int, int]:
        """Records behind the broker's log end, per owned partition of ``<prefix>.events``."""
        runtime = self.topology.runtime
        lag: dict[int, int] = {}
        with contextlib.suppress(Exception):  # no answer from the broker: no figure
            for partition, position in runtime.positions().items():
                lag[partition] = await runtime.transport.lag({partition: position})
        return lag


@contextlib.contextmanager
def counted_crash(metrics: FleetMetrics, agent: str) -> Iterator[None]:
    """Count an exception that ends the task ``agent`` (then let it propagate)."""
    try:
        yield
    except Exception:
        metrics.agent_crashed(agent)
        raise


def _severities(engine: Any) -> dict[FaultKind, Severity]:
    """Each fault kind's severity as the engine is configured."""
    settings = getattr(engine, "settings", None)
    if settings is None or not hasattr(settings, "severity"):
        return dict(DEFAULT_SEVERITY)
    return {kind: settings.severity(kind) for kind in FaultKind}


def _window_key(key: Any) -> tuple[str, float] | None:
    # Keys come back as (tenant, (start, end)) or, decoded from JSON, as lists.
    if isinstance(key, (list, tuple)) and len(key) == 2:
        tenant, window = key
        if isinstance(tenant, str) and isinstance(window, (list, tuple)) and window:
            return tenant, float(window[0])
    return None


def install_fleet(
    topology: Topology, settings: FleetSettings | None = None, rules: list[Rule] | None = None
) -> Fleet:
    """Add fleet monitoring to the topology's app (call before the worker starts).

    ``settings`` default to ``topology.settings.fleet`` (or the defaults),
    ``rules`` to the rules file they name (or the built-in rules). Raises
    :class:`~streams.fleet.rules.RuleError` on an invalid rules file.
    """
    fleet_settings = settings or FleetSettings.from_settings(topology.settings)
    fleet_rules = rules if rules is not None else load_rules(fleet_settings.rules_file)
    app: Any = topology.app  # Faust's decorators are loosely typed; keep them Any here
    conf = topology.settings
    engine = topology.processor.engine
    figures = engine_figures(engine)
    metrics = FleetMetrics(
        fleet_settings.max_tenant_labels,
        figures,
        severities=_severities(engine),
        rules=[(rule.name, rule.alert_severity.value) for rule in fleet_rules],
    )
    activity = ActivityTracker(fleet_settings.window_seconds, fleet_settings.alert_sample_sessions)
    recent = RecentRecords(fleet_settings.ring_size, fleet_settings.ring_sessions)
    observer = RecordObserver(metrics, activity, recent, engine_cycles(topology.runtime.engines))
    evaluator = FleetEvaluator(fleet_settings, fleet_rules)

    raw: dict[str, Any] = {
        "key_type": bytes,
        "value_type": bytes,
        "key_serializer": "raw",
        "value_serializer": "raw",
    }
    fleet_topic = app.topic(
        conf.topic(FLEET_SUFFIX),
        partitions=conf.partitions,
        internal=True,  # declared by the worker, with the input's partition count
        retention=OBSERVATION_RETENTION,
        **raw,
    )
    sources = app.topic(*(conf.topic(s) for s in SOURCE_SUFFIXES), **raw)
    windows = app.Table(
        "fleet-windows",
        partitions=conf.partitions,
        help="fleet: per-tenant counts per tumbling window",
    ).tumbling(fleet_settings.window_seconds, expires=fleet_settings.retention_seconds)
    alert_table = app.Table(
        "fleet-alerts",
        partitions=conf.partitions,
        help="fleet: per-tenant watermark, closed windows and alert states",
    )
    notifier = None
    if fleet_settings.alertmanager_urls:
        client = AlertmanagerClient(
            fleet_settings.alertmanager_urls,
            timeout=fleet_settings.alertmanager_timeout_seconds,
            attempts=fleet_settings.alertmanager_attempts,
            on_failure=lambda _url: metrics.send_failed("alertmanager"),
            session=lambda: app.http_client,  # Faust's client, closed with the worker
        )
        notifier = AlertmanagerNotifier(
            client,
            fleet_rules,
            fleet_settings.alertmanager_resend_seconds,
            Links(fleet_settings.external_url),
        )
    if fleet_settings.otlp_endpoint:
        otlp = OtlpLogExport(
            fleet_settings.otlp_endpoint,
            headers={k: v.get_secret_value() for k, v in fleet_settings.otlp_headers.items()},
            service_version=build_version(),
            on_failure=lambda: metrics.send_failed("otlp"),
        )
        observer.export = otlp.export
    fleet = Fleet(
        settings=fleet_settings,
        topology=topology,
        rules=fleet_rules,
        metrics=metrics,
        evaluator=evaluator,
        activity=activity,
        recent=recent,
        observer=observer,
        topic=fleet_topic,
        windows=windows,
        alert_table=alert_table,
        alertmanager=notifier,
    )

    topology.runtime.set_fleet_hook(ObserverHook(observer))  # FLEET HOOK
    topology.runtime.on_batch = observer.batch

    async def send(obs: Observation) -> None:
        await fleet_topic.send(key=obs.tenant.encode("utf-8"), value=obs.to_bytes())

    async def restore() -> None:
        count = fleet.restore()
        log.info("fleet: %d tenant(s) restored from the changelog", count)

    async def collect(stream: Any) -> None:
        async for value in stream:
            obs = observation_from_output(value)
            if obs is not None:
                await send(obs)

    async def aggregate(stream: Any) -> None:
        with counted_crash(metrics, "fleet-aggregate"):
            async for value in stream:
                obs = Observation.from_bytes(value)
                if obs is None:
                    continue
                outcome = evaluator.handle(obs, time.time())
                # Alerts are acknowledged before the state that says they were sent is
                # written: a crash in between sends them again, with the same ids.
                await fleet.publish(outcome.alerts)
                fleet.persist(outcome, flush=obs.kind == "tick")

    async def tick() -> None:
        with counted_crash(metrics, "fleet-tick"):
            await tick_once()

    async def tick_once() -> None:
        for obs in activity.flush():
            await send(obs)
        now = time.time()
        # A tick closes an idle tenant's windows and writes its pending counts; it
        # is keyed by tenant, so it reaches the agent that owns the tenant's state.
        for tenant in sorted({*evaluator.ticks_due(now), *fleet.pending_tenants()}):
            await send(Observation(kind="tick", tenant=tenant, ts=now))
        metrics.set_active_alerts((a.rule, a.severity.value) for _, a in evaluator.active_alerts())
        fleet.renew_alerts(now)
        metrics.set_consumer_lag(fleet.consumer_lag())

    # Registered by call rather than as decorators: Faust's decorators are untyped.
    alert_table.on_recover(restore)
    app.agent(sources, name="fleet-collect")(collect)
    app.agent(fleet_topic, name="fleet-aggregate")(aggregate)
    app.timer(fleet_settings.tick_seconds, name="fleet-tick")(tick)

    if conf.web_enabled:
        from streams.app.web import install_web

        install_web(topology, fleet)
    return fleet
