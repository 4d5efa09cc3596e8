"""Faust against the real broker: an agent counts into a Table backed by a changelog topic.

The app runs in-process (``await app.start()`` / ``await app.stop()``), one app per test with
unique ids and topic names. Source topics are declared ``internal=True`` so Faust creates them
before it subscribes (a topic that does not exist at subscription time is ignored until the
consumer's next metadata refresh, minutes later).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from faust.types import TableT, TopicT

WaitUntil = Callable[..., Awaitable[None]]  # the conftest fixture ``wait_until``

HAS_ROCKSDICT = importlib.util.find_spec("rocksdict") is not None
STORES = [
    "memory://",
    pytest.param(
        "rocksdb://",
        marks=pytest.mark.skipif(not HAS_ROCKSDICT, reason="rocksdict is not installed"),
    ),
]

#: Faust settings for tests against a local single-node broker (see docs/kafka-notes.md).
TEST_SETTINGS: dict[str, Any] = {
    "web_enabled": False,
    "topic_partitions": 1,
    "topic_replication_factor": 1,
    "table_standby_replicas": 0,
    "consumer_auto_offset_reset": "earliest",
    "broker_session_timeout": 6.0,
    "broker_heartbeat_interval": 1.0,
    "broker_rebalance_timeout": 10.0,
    "broker_commit_every": 10,
    "broker_commit_interval": 0.5,
    "producer_linger": 0.0,
}


@dataclass
class CountingApp:
    """A Faust app whose agent counts events per key into the ``counts`` table."""

    app: faust.App
    events: TopicT
    counts: TableT[Any, Any]
    processed: list[bytes] = field(default_factory=list)

    @property
    def changelog_topic(self) -> str:
        name: str = self.counts.changelog_topic.get_topic_name()
        return name

    def snapshot(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.counts.items()}


def counting_app(
    app_id: str,
    bootstrap: str,
    *,
    store: str,
    datadir: Path,
    events_topic: str,
    **settings: Any,
) -> CountingApp:
    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap}",
        store=store,
        datadir=str(datadir),
        **{**TEST_SETTINGS, **settings},
    )
    events = app.topic(
        events_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=1,
        internal=True,
    )
    counts = app.Table("counts", default=int, partitions=1)
    built = CountingApp(app=app, events=events, counts=counts)

    @app.agent(events)
    async def count(stream: Any) -> None:
        async for event in stream.events():
            counts[event.key.decode()] += 1
            built.processed.append(event.key)

    return built


async def produce(bootstrap: str, topic: str, keys: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i, key in enumerate(keys):
            await producer.send(topic, f"event-{i}".encode(), key=key.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def latest_per_key(
    bootstrap: str, topic: str, *, isolation_level: str = "read_uncommitted", timeout: float = 30
) -> tuple[int, dict[bytes, bytes]]:
    """(number of records, last value per key) of a single-partition topic."""
    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        begin = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, begin)
        count, latest = 0, {}
        deadline = time.monotonic() + timeout
        while await consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"could not read {topic} up to offset {end}"
            for record in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                count += 1
                if record.key is not None and record.value is not None:
                    latest[record.key] = record.value
        return count, latest
    finally:
        await consumer.stop()


def expected_counts(keys: list[str]) -> dict[str, int]:
    result: dict[str, int] = {}
    for key in keys:
        result[key] = result.get(key, 0) + 1
    return result


def as_changelog(counts: dict[str, int]) -> dict[bytes, bytes]:
    """How Faust's default JSON serializer writes ``str -> int`` table entries."""
    return {f'"{k}"'.encode(): str(v).encode() for k, v in counts.items()}


@pytest.mark.parametrize("store", STORES)
async def test_agent_counts_into_table_and_changelog(
    store: str,
    kafka_bootstrap: str,
    tmp_path: Path,
    unique_name: Callable[[str], str],
    wait_until: WaitUntil,
) -> None:
    keys = [f"k{i % 3}" for i in range(30)]
    counter = counting_app(
        unique_name("smoke"),
        kafka_bootstrap,
        store=store,
        datadir=tmp_path / "faust",
        events_topic=unique_name("events"),
    )
    await counter.app.start()
    try:
        await produce(kafka_bootstrap, counter.events.get_topic_name(), keys)
        await wait_until(
            lambda: counter.snapshot() == expected_counts(keys),
            timeout=60,
            what=f"table counts {expected_counts(keys)} (have {counter.snapshot()})",
        )
        assert len(counter.processed) == len(keys)
    finally:
        await counter.app.stop()

    if store.startswith("rocksdb"):  # the table really lived in RocksDB files
        assert list((tmp_path / "faust").rglob("counts-*.db/CURRENT"))

    records, latest = await latest_per_key(kafka_bootstrap, counter.changelog_topic)
    assert records >= 3  # one per update unless compaction already ran
    assert latest == as_changelog(expected_counts(keys))


@pytest.mark.parametrize("store", STORES)
async def test_table_recovers_after_restart(
    store: str,
    kafka_bootstrap: str,
    tmp_path: Path,
    unique_name: Callable[[str], str],
    wait_until: WaitUntil,
) -> None:
    app_id, topic = unique_name("recover"), unique_name("events")
    first_keys = [f"k{i % 4}" for i in range(12)]
    more_keys = ["k0", "k0", "k9"]

    first = counting_app(
        app_id, kafka_bootstrap, store=store, datadir=tmp_path / "faust", events_topic=topic
    )
    await first.app.start()
    try:
        await produce(kafka_bootstrap, topic, first_keys)
        await wait_until(
            lambda: first.snapshot() == expected_counts(first_keys), timeout=60, what="counts"
        )
    finally:
        await first.app.stop()

    # a new worker of the same app: memory:// recovers the table from the changelog topic,
    # rocksdb:// from its local files (plus the changelog beyond their offsets)
    second = counting_app(
        app_id, kafka_bootstrap, store=store, datadir=tmp_path / "faust", events_topic=topic
    )
    await second.app.start()
    try:
        await wait_until(
            lambda: second.snapshot() == expected_counts(first_keys),
            timeout=60,
            what="the recovered table",
        )
        assert second.processed == []  # committed offsets: nothing is processed twice
        await produce(kafka_bootstrap, topic, more_keys)
        await wait_until(
            lambda: second.snapshot() == expected_counts(first_keys + more_keys),
            timeout=60,
            what=f"counts after restart (have {second.snapshot()})",
        )
    finally:
        await second.app.stop()


async def test_exactly_once_guarantee_commits_changelog_transactions(
    kafka_bootstrap: str,
    tmp_path: Path,
    unique_name: Callable[[str], str],
    wait_until: WaitUntil,
) -> None:
    keys = [f"k{i % 2}" for i in range(10)]
    counter = counting_app(
        unique_name("eos"),
        kafka_bootstrap,
        store="memory://",
        datadir=tmp_path / "faust",
        events_topic=unique_name("events"),
        processing_guarantee="exactly_once",
    )
    await counter.app.start()
    try:
        await produce(kafka_bootstrap, counter.events.get_topic_name(), keys)
        await wait_until(
            lambda: counter.snapshot() == expected_counts(keys), timeout=60, what="counts"
        )
    finally:
        await counter.app.stop()

    # the changelog writes were transactional and committed: read_committed sees them
    _, latest = await latest_per_key(
        kafka_bootstrap, counter.changelog_topic, isolation_level="read_committed"
    )
    assert latest == as_changelog(expected_counts(keys))
