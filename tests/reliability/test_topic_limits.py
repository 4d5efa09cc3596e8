"""Topics are created with ``max.message.bytes`` consistent with ``max_event_bytes``,
so an input over the limit reaches the engine (TOO_LARGE) and its dead letter fits."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError

from spanguard.schemas import EventRejected, RejectReason
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.topics import (
    contract_topics,
    create_topics,
    ensure_topics,
    max_record_bytes,
    topic_config,
)
from spanguard.streams.settings import Settings
from tests.reliability.secure_broker import SecureBroker

pytestmark = pytest.mark.kafka


async def topic_max_bytes(bootstrap: str, topic: str) -> int:
    return int((await topic_config(bootstrap, topic))["max.message.bytes"])


async def read_one(bootstrap: str, topic: str, partition: int) -> bytes:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    tp = TopicPartition(topic, partition)
    await consumer.start()
    try:
        consumer.assign([tp])
        record = await consumer.getone(tp)
        assert record.value is not None
        return record.value
    finally:
        await consumer.stop()


def test_the_limit_leaves_room_for_oversized_input_and_its_dead_letter() -> None:
    settings = Settings(engine=EngineSettings(max_event_bytes=1 << 20))
    limit = max_record_bytes(settings)
    assert limit > settings.engine.max_event_bytes
    # the dead letter of an input just under max_event_bytes: base64 plus its envelope
    engine = Engine(settings.engine)
    raw = b'{"type": 1, "pad": "' + b"x" * (settings.engine.max_event_bytes - 40) + b'"}'
    assert len(raw) <= settings.engine.max_event_bytes
    [dead_letter] = engine.process_raw(raw, Source("events", 0, 0))
    assert isinstance(dead_letter, EventRejected)
    assert len(encode_output(dead_letter)) < limit


async def test_too_large_is_reachable_through_kafka(secure_broker: SecureBroker) -> None:
    bootstrap = secure_broker.plaintext
    settings = Settings(broker=f"kafka://{bootstrap}", topic_prefix=uuid.uuid4().hex[:10])
    assert sorted(await ensure_topics(settings)) == sorted(contract_topics(settings))
    for topic in contract_topics(settings):
        assert await topic_max_bytes(bootstrap, topic) == max_record_bytes(settings)

    # an input 10% over max_event_bytes, uncompressed, keyed by its session
    body = b"y" * int(settings.engine.max_event_bytes * 1.1)
    raw = b'{"session_id":"big-1","tenant":"t","text":"' + body + b'"}'
    sent = await produce_lines(
        bootstrap, settings.topic("events"), [raw], max_request_size=max_record_bytes(settings)
    )
    assert sent == 1
    partitions = range(settings.partitions)
    values = []
    for partition in partitions:
        consumer_end = await _end(bootstrap, settings.topic("events"), partition)
        if consumer_end:
            values.append(await read_one(bootstrap, settings.topic("events"), partition))
    assert values == [raw]

    [rejected] = Engine(settings.engine).process_raw(raw, Source("events", 0, 0))
    assert isinstance(rejected, EventRejected)
    assert rejected.reason is RejectReason.TOO_LARGE
    # ... and its dead letter can be produced to the dead-letter topic
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, max_request_size=max_record_bytes(settings)
    )
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic("deadletter"), encode_output(rejected))
    finally:
        await producer.stop()


async def test_a_topic_without_the_limit_refuses_such_input(secure_broker: SecureBroker) -> None:
    # what happened before: the broker's default (1 MiB) refuses the record outright
    bootstrap = secure_broker.plaintext
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [topic])
    raw = b'{"text":"' + b"z" * int(1.1 * (1 << 20)) + b'"}'
    with pytest.raises(MessageSizeTooLargeError):
        await produce_lines(bootstrap, topic, [raw], max_request_size=4 << 20)


async def _end(bootstrap: str, topic: str, partition: int) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()
