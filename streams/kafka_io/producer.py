"""Publishing input traces: keyed by session, in order, every ack awaited."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from spanguard.streams.kafka_io.keys import session_key
from spanguard.streams.kafka_io.partitioning import partition_for


async def produce_lines(
    bootstrap: str,
    topic: str,
    lines: Iterable[bytes],
    rate: float | None = None,
    security: Mapping[str, Any] | None = None,
    max_request_size: int = 1024 * 1024,
) -> int:
    """Publish each line in order, keyed by session (murmur2), and wait for every ack.

    The producer is idempotent with one request in flight per connection, so the
    order of a session's events on its partition is the order of ``lines``.
    ``rate`` limits records per second (None: as fast as possible). ``security``:
    the connection's TLS/SASL kwargs
    (:func:`spanguard.streams.kafka_io.security.aiokafka_security`).
    ``max_request_size``: the largest record sent (see ``topics.max_record_bytes``).
    """
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        partitioner=murmur2_partitioner,
        max_request_size=max_request_size,
        **(security or {}),
    )
    sent = 0
    try:
        await producer.start()  # inside try: a failed start still closes the producer
        started = time.monotonic()
        pending: list[asyncio.Future[RecordMetadata]] = []
        for line in lines:
            pending.append(await producer.send(topic, value=line, key=session_key(line)))
            sent += 1
            if rate:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if len(pending) >= 1000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent


def murmur2_partitioner(
    key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]
) -> int:
    """aiokafka partitioner: a keyed record goes where Java's default partitioner puts it.

    Stated explicitly (it is also aiokafka's default) because the worker refuses
    records that are not on :func:`~spanguard.streams.kafka_io.partitioning.partition_for`'s
    partition. A keyless record (no session found) goes to any partition.
    """
    if key is None:
        return random.choice(list(available) or list(all_partitions))
    return all_partitions[partition_for(key, len(all_partitions))]
