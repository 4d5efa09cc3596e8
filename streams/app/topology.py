"""Build the worker: a Faust application that hosts the aiokafka data path.

``build_topology(settings)`` is a plain factory that the worker command and the
tests call; nothing happens at import time and nothing is module-global.

Faust serves what it is good at: supervision and signals, the web server,
timers and fleet monitoring's low-volume agents. The data path (input batches,
engine, outputs, changelog, offsets) is :class:`~spanguard.streams.runtime.runtime.Runtime`
on aiokafka, started as a dependency of the app: Faust's per-message produce
path and Table cost ~25x a raw aiokafka passthrough (BENCHMARKS.md), and its
changelog could not give the state guarantees of docs/operations.md.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import faust
from mode import Service

from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.streams.app.fleet import Fleet, install_fleet
from spanguard.streams.app.output import Journal, file_journal, journal_hook
from spanguard.streams.kafka_io.security import BrokerCredentials, aiokafka_security
from spanguard.streams.kafka_io.traces import bootstrap_servers
from spanguard.streams.runtime.config import RuntimeConfig, changelog_topic
from spanguard.streams.runtime.kafka_transport import KafkaTransport
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.settings import Settings

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
"""Seconds a starting worker waits for its first assignment before it says ready."""
STOP_TIMEOUT = 8.0
"""Seconds a stopping worker gives its last checkpoint before it closes anyway
(SIGTERM must end a worker within 10 s)."""


@dataclass
class Topology:
    """Everything a worker runs, reachable for tests and views."""

    settings: Settings
    app: faust.App
    runtime: Runtime
    transport: KafkaTransport
    events: Any
    """The Faust topic object of ``<prefix>.events`` (web routes by its key)."""
    outputs: dict[str, Any]
    """Faust topic objects of the output topics (fleet monitoring sends alerts)."""
    fleet: Fleet | None = None


def control_app_id(app_id: str) -> str:
    """The Faust app's id (its consumer group, for fleet monitoring's agents): the
    data path's group is ``app_id`` itself, with a different assignor."""
    return f"{app_id}-control"


def faust_config(settings: Settings) -> dict[str, Any]:
    """The Faust settings derived from ours (one place, so tests see what runs)."""
    config: dict[str, Any] = {
        "broker": settings.broker,
        "store": "memory://",  # no Faust table: the data path keeps its own state
        "processing_guarantee": "at_least_once",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": settings.replication,
        "datadir": str(settings.data_dir),
        "web_enabled": settings.web_enabled,
        "web_port": settings.web_port,
        "web_bind": settings.web_host,
        "web_host": settings.web_host,
        "broker_session_timeout": settings.session_timeout,
        "broker_heartbeat_interval": max(0.5, settings.session_timeout / 6),
        "consumer_auto_offset_reset": "earliest",
        "producer_acks": -1,
        "autodiscover": False,
        "topic_allow_declare": True,
    }
    if settings.broker_credentials is not None:
        config["broker_credentials"] = _credentials(settings.broker_credentials)
    return config


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
        commit_interval=interval,
        commit_every=settings.commit_every,
        io_timeout=settings.io_timeout,
    )


def _credentials(credentials: BrokerCredentials) -> Any:
    """Faust's form of the same credentials the data path's aiokafka clients use."""
    context = credentials.ssl_context()
    if credentials.username is not None:
        return faust.SASLCredentials(
            username=credentials.username,
            password=credentials.read_password(),
            mechanism=credentials.mechanism,
            ssl_context=context if credentials.effective_protocol == "SASL_SSL" else None,
        )
    return faust.SSLCredentials(context)


class DataPath(Service):
    """Runs the runtime inside the Faust app: joins the group when the app starts,
    checkpoints and leaves it when the app stops."""

    def __init__(self, runtime: Runtime, transport: KafkaTransport, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runtime = runtime
        self.transport = transport
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def on_start(self) -> None:
        await self.transport.start(self.runtime.assign, self.runtime.revoke)
        self._task = asyncio.ensure_future(self.runtime.run(self._stopping))
        # "Ready" (logged by Faust once this returns) means partitions assigned and
        # restored, so that a started worker really takes part in the group.
        try:
            await asyncio.wait_for(self.runtime.assigned.wait(), READY_TIMEOUT)
        except TimeoutError:
            log.warning("spanguard: no partitions assigned after %.0fs", READY_TIMEOUT)

    async def on_stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT)
            except Exception as exc:  # past the deadline: the next owner redoes the rest
                log.warning("spanguard: data path did not stop cleanly: %r", exc)
                self._task.cancel()
        await self.transport.stop()


def build_topology(settings: Settings, journal: Journal | None = None) -> Topology:
    """Create the app and the data path; add fleet monitoring when enabled."""
    app = faust.App(control_app_id(settings.app_id), **faust_config(settings))

    def topic(suffix: str) -> Any:
        return app.topic(
            settings.topic(suffix),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )

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
    app.add_dependency(DataPath(runtime, transport, loop=app.loop, beacon=app.beacon))
    topology = Topology(
        settings,
        app,
        runtime,
        transport,
        events=topic("events"),
        outputs={s: topic(s) for s in config.output_topics},
    )
    if settings.fleet.enabled:
        topology.fleet = install_fleet(topology)
    return topology
