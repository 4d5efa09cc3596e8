"""The tests' reader (tests/pipeline.py) reads to the end offsets, not until silence: an
output written after ``done`` held but before the input was committed is read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

from tests.pipeline import Pipeline


async def _create(bootstrap: str, topics: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(t, num_partitions=1, replication_factor=1) for t in topics]
        )
    finally:
        await admin.close()


async def _send(bootstrap: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.commit({tp: OffsetAndMetadata(offset, "")})
    finally:
        await consumer.stop()


def test_read_settled_reads_a_duplicate_written_after_done(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    pipeline = Pipeline(kafka_bootstrap, unique_name("reader"), tmp_path)
    events, group = pipeline.data_path()
    faults = pipeline.topic("faults")
    asyncio.run(_create(kafka_bootstrap, [events, *pipeline.output_topics()]))
    asyncio.run(_send(kafka_bootstrap, events, b"input"))
    asyncio.run(_send(kafka_bootstrap, faults, b"output"))

    done = threading.Event()
    got: list[list[bytes]] = []

    def read() -> None:
        got.append(pipeline.read_settled(lambda seen: bool(seen) and not done.set(), timeout=60))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert done.wait(60), "the reader never saw the first output"
        # the "worker" writes the output again, then commits its input
        asyncio.run(_send(kafka_bootstrap, faults, b"output"))
        asyncio.run(_commit(kafka_bootstrap, group, events, 1))
    finally:
        reader.join(90)
    assert got == [[b"output", b"output"]]
