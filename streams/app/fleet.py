"""Fleet monitoring in the worker: :func:`build_fleet` makes its parts from the settings
and the runtime, :mod:`spanguard.streams.app.topology` wires them into the app.

What it adds (docs/monitoring.md, "How it works"):

* the runtime's fleet hook, a :class:`~spanguard.streams.fleet.combiner.FleetCombiner`:
  per record the worker's metrics, the inspector's ring of recent records and
  the optional OTLP export (log records; one span per compaction); per
  checkpoint one partial count per tenant, which the runtime writes to
  ``<prefix>.fleet`` in the checkpoint's transaction;
* the aggregator (:class:`~spanguard.streams.fleet.aggregator.FleetAggregator`), a
  partition owner like the data path, with its own transport: consumer group ``<app_id>-fleet``
  on ``<prefix>.fleet`` (read committed), state changelog
  ``<app_id>-fleet-state``; it sums the partials of the tenants of its
  partitions, evaluates the rules, and writes ``fleet.alert`` records to
  ``<prefix>.alerts`` in its own transactions (then to Alertmanager);
* heartbeats on ``<prefix>.workers`` (:mod:`spanguard.streams.fleet.membership`): how
  ``/fleet`` and the session inspector find the other workers;
* :meth:`Fleet.tick`, the ``fleet-tick`` timer's work: the active-alert and lag
  gauges, Alertmanager renewals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from mode import Service

from spanguard.schemas import FaultKind, FleetAlert, Severity
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine
from spanguard.streams.fleet.aggregator import FleetAggregator
from spanguard.streams.fleet.alertmanager import AlertmanagerClient, AlertmanagerNotifier, Links
from spanguard.streams.fleet.combiner import (
    FleetCombiner,
    partition_cycles,
    partition_expiries,
)
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.fleet_view import local_view
from spanguard.streams.fleet.membership import Members, MembershipService
from spanguard.streams.fleet.metrics import FleetMetrics, engine_figures
from spanguard.streams.fleet.otel import OtlpExport
from spanguard.streams.fleet.recent import RecentRecords
from spanguard.streams.fleet.rules import Rule, load_rules
from spanguard.streams.fleet.session_view import session_view
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.security import aiokafka_security
from spanguard.streams.runtime.config import RuntimeConfig
from spanguard.streams.runtime.kafka_transport import KafkaTransport
from spanguard.streams.runtime.owner import OwnerConfig
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.settings import Settings
from spanguard.streams.version import build_version

log = logging.getLogger(__name__)

FLEET_SUFFIX = "fleet"
"""``<prefix>.fleet``: the partials, keyed by tenant."""
WORKERS_SUFFIX = "workers"
"""``<prefix>.workers``: the heartbeats of the workers' web servers."""
FLEET_SESSION_TIMEOUT = 15.0
"""Least session timeout of the aggregators' consumer group, seconds."""
FLEET_FETCH_WAIT = 0.5
"""Seconds the broker may hold the aggregator's fetch of ``<prefix>.fleet`` with nothing
new. Partials arrive a few times a second (one transaction per checkpoint) and alerts
are judged in seconds; with the data path's 5 ms the aggregator sent ~100 empty fetches
a second, each a socket write and a response parsed on the loop the gate runs on
(issue 26: with the combiner's deferred counting, the gate's p99 at 1,000 events/s went
from 45.4 to 31.5 ms with 2,000 sessions, medians of 3 rows; BENCHMARKS.md)."""


@dataclass
class Alerting:
    """What follows the alerts the aggregator committed: metrics, log, Alertmanager."""

    metrics: FleetMetrics
    evaluator: FleetEvaluator
    alertmanager: AlertmanagerNotifier | None = None

    def on_alerts(self, alerts: list[FleetAlert]) -> None:
        """Alerts the aggregator committed: count, log, post to Alertmanager."""
        changed = []
        for alert in alerts:
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

    def tick(self, now: float) -> None:
        """The gauges of active alerts and the Alertmanager renewals."""
        active = self.evaluator.active_alerts()
        self.metrics.set_active_alerts((a.rule, a.severity.value) for _, a in active)
        if self.alertmanager is not None:
            self.alertmanager.renew(active, now)


@dataclass
class Fleet:
    """Everything fleet monitoring added to one worker (for the views and tests)."""

    settings: FleetSettings
    runtime: Runtime
    rules: list[Rule]
    metrics: FleetMetrics
    evaluator: FleetEvaluator
    combiner: FleetCombiner
    recent: RecentRecords
    aggregator: FleetAggregator
    transport: KafkaTransport
    """The aggregator's (consumer group ``<app_id>-fleet``)."""
    members: Members
    alerting: Alerting
    http: Callable[[], aiohttp.ClientSession]
    """The worker's HTTP client (Alertmanager, the other workers' views)."""
    membership: MembershipService | None = None
    otlp: OtlpExport | None = None

    def session(self, tenant: str, session_id: str) -> dict[str, Any] | None:
        """The inspector's view of a session this worker processes, or None."""
        runtime = self.runtime
        return session_view(
            tenant,
            session_id,
            runtime.session(tenant, session_id),
            self.recent.get(tenant, session_id),
            closed=any((tenant, session_id) in e.markers.closed for e in runtime.engines()),
        )

    def local_view(
        self, windows: int = 1, allowed: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """This worker's part of ``/fleet`` (each tenant's newest ``windows`` windows;
        only the tenants ``allowed``, all by default)."""
        return local_view(self.evaluator, windows, allowed)

    async def tick(self) -> None:
        """The ``fleet-tick`` timer's work: gauges, Alertmanager renewals, lag."""
        with counted_crash(self.metrics, "fleet-tick"):
            self.alerting.tick(time.time())
            self.metrics.set_consumer_lag(await self.consumer_lag())

    async def consumer_lag(self) -> dict[int, int]:
        """Records behind the broker's log end, per owned partition of ``<prefix>.events``."""
        runtime = self.runtime
        lag: dict[int, int] = {}
        positions = runtime.positions()
        answers = await asyncio.gather(
            *(runtime.transport.lag({p: position}) for p, position in positions.items()),
            return_exceptions=True,
        )
        for partition, answer in zip(positions, answers, strict=True):
            if isinstance(answer, int):  # no answer from the broker: no figure
                lag[partition] = answer
        return lag


class FleetClients(Service):
    """The fleet's clients that live as long as the app: the heartbeats, and on the way
    out the Alertmanager session and the OTLP exporter."""

    def __init__(self, fleet: Fleet, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fleet = fleet

    async def on_start(self) -> None:
        if self.fleet.membership is not None:
            self.fleet.membership.start()

    async def on_stop(self) -> None:
        fleet = self.fleet
        if fleet.membership is not None:
            await fleet.membership.stop()
        if fleet.alerting.alertmanager is not None:
            await fleet.alerting.alertmanager.close()
        if fleet.otlp is not None:
            await asyncio.get_running_loop().run_in_executor(None, fleet.otlp.shutdown)


@contextlib.contextmanager
def counted_crash(metrics: FleetMetrics, agent: str) -> Iterator[None]:
    """Count an exception that ends the task ``agent`` (then let it propagate)."""
    try:
        yield
    except Exception:
        metrics.agent_crashed(agent)
        raise


def advertised_url(settings: Settings) -> str:
    """How the other workers reach this worker's web server."""
    host = settings.web_host
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"http://{host}:{settings.web_port}"


def _severities(settings: EngineSettings) -> dict[FaultKind, Severity]:
    """Each fault kind's severity as the engine is configured."""
    return {kind: settings.severity(kind) for kind in FaultKind}


def build_fleet(
    conf: Settings, runtime: Runtime, http: Callable[[], aiohttp.ClientSession]
) -> Fleet:
    """Make fleet monitoring's parts and install its hooks in ``runtime`` (before the
    worker starts); ``http`` is the worker's HTTP client. Raises
    :class:`~spanguard.streams.fleet.rules.RuleError` on an invalid rules file.
    """
    fleet_settings = FleetSettings.from_settings(conf)
    fleet_rules = load_rules(fleet_settings.rules_file)
    metrics = FleetMetrics(
        fleet_settings.max_tenant_labels,
        engine_figures(runtime.engines),
        severities=_severities(conf.engine),
        rules=[(rule.name, rule.alert_severity.value) for rule in fleet_rules],
        labelled_tenants=fleet_settings.labelled_tenants,
    )
    recent = RecentRecords(fleet_settings.ring_size, fleet_settings.ring_sessions)

    def engine_of(partition: int) -> Engine | None:
        state = runtime.parts.get(partition)
        return None if state is None else state.engine

    combiner = FleetCombiner(
        fleet_settings.window_seconds,
        metrics,
        recent,
        partition_cycles(engine_of),
        sample_size=fleet_settings.alert_sample_sessions,
        top_sessions=fleet_settings.top_sessions,
    )
    combiner.expiries = partition_expiries(engine_of)
    evaluator = FleetEvaluator(fleet_settings, fleet_rules)
    notifier = None
    if fleet_settings.alertmanager_urls:
        client = AlertmanagerClient(
            fleet_settings.alertmanager_urls,
            timeout=fleet_settings.alertmanager_timeout_seconds,
            attempts=fleet_settings.alertmanager_attempts,
            on_failure=lambda _url: metrics.send_failed("alertmanager"),
            session=http,  # the worker's client, closed with the worker
        )
        notifier = AlertmanagerNotifier(
            client,
            fleet_rules,
            fleet_settings.alertmanager_resend_seconds,
            Links(fleet_settings.external_url),
        )
    alerting = Alerting(metrics, evaluator, notifier)
    state_topic = f"{conf.app_id}-fleet-state"
    security = aiokafka_security(conf.broker_credentials)  # as the data path's clients
    transport = KafkaTransport(
        bootstrap_servers(conf.broker),
        RuntimeConfig(
            input_topic=conf.topic(FLEET_SUFFIX),
            output_topics={},
            changelog_topic=state_topic,
            io_timeout=conf.io_timeout,
            fetch_wait=FLEET_FETCH_WAIT,
        ),
        group_id=f"{conf.app_id}-fleet",
        partitions=conf.partitions,
        replication=conf.replication,
        # Alerting needs no fast failover; a longer timeout keeps the group calm on
        # a loaded machine (each rebalance moves tenants between aggregators).
        session_timeout=max(conf.session_timeout, FLEET_SESSION_TIMEOUT),
        client_options=security,
    )
    aggregator = FleetAggregator(
        transport,
        evaluator,
        alerts_topic=conf.topic("alerts"),
        state_topic=state_topic,
        config=OwnerConfig("fleet", poll_timeout=0.2, io_timeout=conf.io_timeout),
        tick_seconds=fleet_settings.tick_seconds,
        on_alerts=alerting.on_alerts,
    )
    otlp = None
    if fleet_settings.otlp_endpoint:
        otlp = OtlpExport(
            fleet_settings.otlp_endpoint,
            headers={k: v.get_secret_value() for k, v in fleet_settings.otlp_headers.items()},
            service_version=build_version(),
            on_failure=lambda: metrics.send_failed("otlp"),
        )
        combiner.export = otlp.export
    members = Members(advertised_url(conf), fleet_settings.tick_seconds)
    membership = None
    if conf.web_enabled:
        membership = MembershipService(
            bootstrap_servers(conf.broker),
            conf.topic(WORKERS_SUFFIX),
            members,
            runtime.assigned_partitions,
            client_options=security,
            replication=conf.replication,
        )
    runtime.set_fleet_hook(combiner)
    runtime.on_batch = combiner.batch
    runtime.on_failure = lambda what: (
        metrics.send_failed("kafka_outputs")
        if what == "send"
        else metrics.agent_crashed("data-path")
    )
    return Fleet(
        settings=fleet_settings,
        runtime=runtime,
        rules=fleet_rules,
        metrics=metrics,
        evaluator=evaluator,
        combiner=combiner,
        recent=recent,
        aggregator=aggregator,
        transport=transport,
        members=members,
        alerting=alerting,
        http=http,
        membership=membership,
        otlp=otlp,
    )
