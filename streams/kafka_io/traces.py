"""Publishing input traces and reading output topics with aiokafka."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from spanguard.streams.kafka_io.partitioning import partition_for


def bootstrap_servers(broker: str) -> str:
    """``kafka://h:p;kafka://h2:p`` (Faust's form) or ``h:p,h2:p`` -> ``h:p,h2:p``."""
    parts = [p.strip() for p in broker.replace(";", ",").split(",") if p.strip()]
    return ",".join(p.split("://", 1)[-1] for p in parts)


def line_partition(raw: bytes, partitions: int) -> int:
    """The input partition a line lands on when produced keyed by its session (Kafka's
    murmur2 partitioner; a line with no readable session goes to 0, as replay reads
    the contract for a record with no key)."""
    key = session_key(raw)
    return 0 if key is None else partition_for(key, partitions)


def session_key(raw: bytes) -> bytes | None:
    """The Kafka key of an input line: its ``session_id`` (UTF-8), or None when it has none.

    Every line is keyed by its session when one can be found, valid or not, so a
    bad line lands on its session's partition (and its dead letter and ``seq``
    accounting stay with the session). The search is lenient: strict JSON first,
    then JSON with ``NaN``/``Infinity`` (which the engine reads, to report
    ``NON_FINITE_SCORE``), then, for truncated or otherwise broken lines, the
    first ``"session_id": "..."`` string in the text.
    """
    data = _parse_leniently(raw)
    if data is _UNPARSABLE:
        match = _SESSION_FIELD.search(raw)
        if match is None:
            return None
        try:
            session = json.loads(b'"' + match.group(1) + b'"')
        except ValueError:  # includes invalid UTF-8
            return None
    else:
        session = data.get("session_id") if isinstance(data, dict) else None
    if not isinstance(session, str) or not session:
        return None
    try:
        return session.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape: no session can have that id
        return None


_UNPARSABLE = object()
#: ``"session_id" : "<JSON string body>"``, for lines that do not parse as a whole.
_SESSION_FIELD = re.compile(rb'"session_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _parse_leniently(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)  # reads NaN and Infinity, like the engine's decoder
    except (ValueError, RecursionError):
        return _UNPARSABLE


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


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """One record read from an output topic."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    value: bytes


class OutputReader:
    """Reads output topics from the beginning (read-committed), batch by batch."""

    def __init__(
        self, bootstrap: str, topics: Sequence[str], security: Mapping[str, Any] | None = None
    ) -> None:
        self._consumer = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            metadata_max_age_ms=2000,
            **(security or {}),
        )

    async def __aenter__(self) -> OutputReader:
        try:
            await self._consumer.start()
        except BaseException:
            await self._consumer.stop()  # a failed start still closes its connections
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def poll(self, timeout_ms: int = 200) -> list[OutputRecord]:
        """The records that arrived within ``timeout_ms`` (possibly none)."""
        batch = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=5000)
        return [
            OutputRecord(tp.topic, tp.partition, r.offset, r.timestamp, r.value or b"")
            for tp, records in sorted(batch.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
            for r in records
        ]


async def read_outputs(
    bootstrap: str,
    topics: Sequence[str],
    idle_seconds: float,
    follow: bool = False,
    security: Mapping[str, Any] | None = None,
) -> AsyncIterator[OutputRecord]:
    """Yield every record of ``topics`` from the beginning; stop after ``idle_seconds``
    without a new record (never, with ``follow``)."""
    async with OutputReader(bootstrap, topics, security) as reader:
        last = time.monotonic()
        while follow or time.monotonic() - last < idle_seconds:
            records = await reader.poll()
            if records:
                last = time.monotonic()
            for record in records:
                yield record
