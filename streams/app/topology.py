"""Build the Faust application: a plain factory that the worker and the tests call.

``build_topology(settings)`` returns the app, its topics, the state table and
the processor; nothing happens at import time and nothing is module-global.
"""

from __future__ import annotations

import logging
import ssl
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import faust
from faust.streams import _current_event

from streams.app.fleet import Fleet, install_fleet
from streams.app.output import Journal, OutputProducer, file_journal
from streams.app.processor import InputRecord, Processor
from streams.client.kafka_io import OUTPUT_SUFFIXES
from streams.engine.engine import Engine
from streams.engine.persist import Record
from streams.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Topology:
    """Everything a worker runs, reachable for tests and views."""

    settings: Settings
    app: faust.App
    events: Any
    outputs: dict[str, Any]
    table: Any
    processor: Processor
    restored_sessions: list[int] = field(default_factory=list)
    fleet: Fleet | None = None


def faust_config(settings: Settings) -> dict[str, Any]:
    """The Faust settings derived from ours (one place, so tests see what runs)."""
    config: dict[str, Any] = {
        "broker": settings.broker,
        "store": settings.store,
        "processing_guarantee": settings.processing_guarantee,
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
        "table_standby_replicas": settings.standby_replicas,
        "autodiscover": False,
        "topic_allow_declare": True,
    }
    if settings.broker_credentials:
        config["broker_credentials"] = _credentials(settings.broker_credentials)
    return config


def _credentials(raw: dict[str, str]) -> Any:
    mechanism = raw.get("mechanism", "PLAIN").upper()
    ssl_context = ssl.create_default_context(cafile=raw["cafile"]) if raw.get("cafile") else None
    if "username" in raw:
        return faust.SASLCredentials(
            username=raw["username"],
            password=raw.get("password", ""),
            mechanism=mechanism,
            ssl_context=ssl_context,
        )
    return faust.SSLCredentials(ssl_context)


def build_topology(settings: Settings, journal: Journal | None = None) -> Topology:
    """Create the app, declare the contract's topics and the state table, and
    wire the single agent over ``<prefix>.events``."""
    app = faust.App(settings.app_id, **faust_config(settings))

    def topic(suffix: str) -> Any:
        return app.topic(
            settings.topic(suffix),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )

    events = topic("events")
    outputs = {suffix: topic(suffix) for suffix in OUTPUT_SUFFIXES}
    table = app.Table(
        "state",
        key_type=bytes,  # bytes -> Faust's "raw" codec for the changelog
        value_type=bytes,
        partitions=settings.partitions,
        help="spanguard session state: one record per header, span, gone span, dedup slot",
    )
    if journal is None and settings.ack_journal is not None:
        journal = file_journal(settings.ack_journal)
    engine = Engine(settings.engine_settings(), track_changes=True)
    exactly_once = settings.processing_guarantee == "exactly_once"

    async def send(suffix: str, key: bytes | None, value: bytes, source_partition: int) -> Any:
        if not exactly_once:
            return await outputs[suffix].send(key=key, value=value)
        # Faust only routes a send into a transaction when the target topic is one
        # it consumes; outputs go into the transaction of the input partition that
        # caused them, so they commit (or abort) with its offset and changelog.
        group = app.assignor.group_for_topic(events.get_topic_name())
        transactional_id = f"{app.conf.id}-{group}-{source_partition}"
        return await app.producer.send(
            settings.topic(suffix),
            key,
            value,
            None,
            None,
            None,
            transactional_id=transactional_id,
        )

    async def flush() -> None:
        await app.producer.flush()

    def persist(record: InputRecord, changes: Sequence[Record]) -> None:
        # Faust picks a table write's changelog partition (and RocksDB column)
        # from the "current event"; batches are written after their outputs are
        # acknowledged, so each record's writes are made in its own event's name.
        token = _current_event.set(weakref.ref(record.event))
        try:
            for key, value in changes:
                if value is not None:
                    table[key] = value
                elif key in table:
                    del table[key]
        finally:
            _current_event.reset(token)

    processor = Processor(engine, OutputProducer(send, journal), persist, flush)
    topology = Topology(settings, app, events, outputs, table, processor)

    @table.on_recover
    async def rebuild() -> None:
        count = processor.rebuild(table.items())
        topology.restored_sessions.append(count)
        log.info("spanguard: %d session(s) restored from the changelog", count)

    @app.agent(events, name="guard")
    async def guard(stream: Any) -> None:
        async for batch in stream.take_events(settings.batch_size, within=settings.batch_within):
            await processor.handle(
                [
                    InputRecord(m.topic, m.partition, m.offset, m.timestamp, event.value, event)
                    for event in batch
                    for m in (event.message,)
                ]
            )

    if settings.fleet.enabled:
        topology.fleet = install_fleet(topology)
    return topology
