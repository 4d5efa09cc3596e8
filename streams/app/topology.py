"""Build the worker: the one place where its parts are made and wired together.

``build_topology(settings)`` is a plain factory that the worker command and the
tests call; nothing happens at import time and nothing is module-global. Each
part gets the collaborators it uses, named (no part is handed the whole worker):

* the data path, :class:`~spanguard.streams.runtime.runtime.Runtime` on its
  aiokafka :class:`~spanguard.streams.runtime.kafka_transport.KafkaTransport`
  (consumer group ``app_id``): input batches, engine, outputs, changelog, offsets;
* fleet monitoring when enabled (:func:`~spanguard.streams.app.fleet.build_fleet`):
  the runtime's fleet hook, the aggregator (another partition owner, group
  ``<app_id>-fleet``), the heartbeats and the ``fleet-tick`` timer;
* the Faust app that hosts them (:mod:`spanguard.streams.app.host`): each partition
  owner runs as an :class:`~spanguard.streams.app.host.OwnerService` of the app,
  which also serves the web routes (:mod:`spanguard.streams.app.web`) and runs the
  timer. Faust itself consumes and produces nothing: its per-message path cost ~25x
  a raw aiokafka passthrough (BENCHMARKS.md), and its tables could not give the
  state guarantees of docs/operations.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.streams.app.fleet import Fleet, FleetClients, build_fleet
from spanguard.streams.app.host import OwnerService, faust_app
from spanguard.streams.app.output import Journal, file_journal, journal_hook
from spanguard.streams.app.web import install_health, install_web
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.security import aiokafka_security
from spanguard.streams.runtime.config import RuntimeConfig, changelog_topic
from spanguard.streams.runtime.kafka_transport import KafkaTransport
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.settings import Settings

READY_TIMEOUT = 60.0
"""Seconds a starting worker waits for its first assignment before it says ready."""


@dataclass
class Topology:
    """Everything a worker runs, reachable for tests."""

    settings: Settings
    app: faust.App
    runtime: Runtime
    transport: KafkaTransport
    fleet: Fleet | None = None


def runtime_config(settings: Settings) -> RuntimeConfig:
    """The data path's configuration derived from ours."""
    exactly_once = settings.processing_guarantee == "exactly_once"
    interval = settings.commit_interval or (0.1 if exactly_once else 1.0)
    return RuntimeConfig(
        input_topic=settings.topic("events"),
        output_topics={s: settings.topic(s) for s in OUTPUT_SUFFIXES},
        changelog_topic=changelog_topic(settings.app_id),
        fleet_topic=settings.topic("fleet") if settings.fleet.enabled else None,
        exactly_once=exactly_once,
        batch_size=settings.batch_size,
        poll_timeout=settings.batch_within,
        fetch_wait=settings.fetch_wait,
        max_pending_batches=settings.max_pending_batches,
        commit_interval=interval,
        commit_every=settings.commit_every,
        io_timeout=settings.io_timeout,
    )


def build_topology(settings: Settings, journal: Journal | None = None) -> Topology:
    """Make the worker's parts and wire them into a Faust app (nothing started)."""
    app = faust_app(settings)
    config = runtime_config(settings)
    transport = KafkaTransport(
        bootstrap_servers(settings.broker),
        config,
        group_id=settings.app_id,
        partitions=settings.partitions,
        replication=settings.replication,
        session_timeout=settings.session_timeout,
        client_options=aiokafka_security(settings.broker_credentials),
    )
    runtime = Runtime(config, transport, settings.engine)
    if journal is None and settings.ack_journal is not None:
        journal = file_journal(settings.ack_journal)
    if journal is not None:
        runtime.on_ack = journal_hook(journal)
    services: dict[str, Any] = {"loop": app.loop, "beacon": app.beacon}
    app.add_dependency(OwnerService(runtime, transport, ready_timeout=READY_TIMEOUT, **services))
    if settings.web_enabled:
        install_health(app, runtime.health)
    fleet = None
    if settings.fleet.enabled:
        fleet = build_fleet(settings, runtime, lambda: app.http_client)
        metrics = fleet.metrics
        app.add_dependency(
            OwnerService(
                fleet.aggregator,
                fleet.transport,
                on_crash=lambda: metrics.agent_crashed("fleet-aggregate"),
                **services,
            )
        )
        app.add_dependency(FleetClients(fleet, **services))
        # Registered by call rather than as a decorator: Faust's decorators are untyped.
        app.timer(fleet.settings.tick_seconds, name="fleet-tick")(fleet.tick)
        if settings.web_enabled:
            install_web(app, settings.api_token, fleet)
    return Topology(settings, app, runtime, transport, fleet)
