"""The runtime's transport on a real broker, with aiokafka.

* one consumer in the group ``app_id`` over the input topic (read committed,
  no auto-commit: offsets are committed only inside checkpoint transactions);
  its rebalance listener calls :meth:`Runtime.revoke` / :meth:`Runtime.assign`;
* two idempotent producers for at-least-once outputs: one for what a step sends at
  once, one for what is sent after waiting for acknowledgements (a decision after
  its causes). aiokafka keeps one produce request in flight per broker and
  producer: on one producer, each such decision queued behind the next batch's
  request before its own (none when the input topic's owner has no outputs: the
  fleet aggregator);
* one transactional producer per owned input partition, with the transactional
  id ``<app_id>-state-<partition>``: starting it fences any earlier owner of the
  partition and aborts that owner's open transaction (Kafka's zombie fencing);
* one restore consumer (no group, read committed) that reads a partition's
  changelog up to its last stable offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import ProducerFenced, TopicAlreadyExistsError

from spanguard.streams.runtime.config import RuntimeConfig
from spanguard.streams.runtime.errors import FencedError
from spanguard.streams.runtime.records import InputRecord, OutRecord

log = logging.getLogger(__name__)

RESTORE_FETCH_WAIT_MS = 20
"""Longest a changelog fetch waits on the broker for data (aiokafka's default,
500 ms, adds half a second to every restore step and seek)."""
MAX_REQUEST_BYTES = 8 << 20
"""Largest produce request (a decision over a 10,000-span session is ~1 MB)."""
CHANGELOG_SEGMENT_MS = 3600 * 1000
"""The changelog's segments roll every hour. The log cleaner never touches the active
segment, and under the broker's defaults (7 days or 1 GB) a quiet partition's changelog
would keep a week of superseded records and expired sessions' tombstones, all of which
every restore reads; an hour bounds that to an hour of writes plus the cleaner's dirty
share."""


class KafkaWriter:
    """A partition's transactional producer
    (a :class:`~spanguard.streams.runtime.ports.PartitionWriter`)."""

    def __init__(self, producer: AIOKafkaProducer, input_tp: TopicPartition, group: str) -> None:
        self._producer = producer
        self._tp = input_tp
        self._group = group
        self._open = False

    async def send(self, record: OutRecord) -> Awaitable[Any]:
        try:
            if not self._open:
                await self._producer.begin_transaction()
                self._open = True
            future: Awaitable[Any] = await self._producer.send(
                record.topic, record.value, key=record.key, partition=record.partition
            )
            return future
        except ProducerFenced as exc:
            raise FencedError(str(exc)) from exc

    async def commit(self, next_offset: int) -> None:
        try:
            if not self._open:
                await self._producer.begin_transaction()
                self._open = True
            await self._producer.send_offsets_to_transaction({self._tp: next_offset}, self._group)
            await self._producer.commit_transaction()
            self._open = False
        except ProducerFenced as exc:
            raise FencedError(str(exc)) from exc

    async def abort(self) -> None:
        if self._open:
            self._open = False
            await self._producer.abort_transaction()

    async def close(self) -> None:
        await self._producer.stop()


class KafkaTransport:
    """See :class:`~spanguard.streams.runtime.ports.Transport`."""

    def __init__(
        self,
        bootstrap: str,
        config: RuntimeConfig,
        group_id: str,
        *,
        partitions: int,
        replication: int = 1,
        session_timeout: float = 10.0,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.config = config
        self.group_id = group_id
        self.partitions = partitions
        self.replication = replication
        self._options = dict(client_options or {})
        self._session_timeout = session_timeout
        self._input_partitions = partitions
        # aiokafka clients need the running loop: created in start()
        self._consumer: AIOKafkaConsumer
        self._restore: AIOKafkaConsumer
        self._outputs: tuple[AIOKafkaProducer, ...] = ()
        """The output producers: [0] a step's sends, [1] those after acknowledgements."""

    def _producer(self, transactional_id: str | None = None) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            enable_idempotence=True,
            acks="all",
            # A step hands all its outputs to the producer before the loop turns: they
            # are in the accumulator when the sender runs, so lingering only adds latency.
            linger_ms=0,
            max_batch_size=256 * 1024,
            max_request_size=MAX_REQUEST_BYTES,
            transactional_id=transactional_id,
            request_timeout_ms=int(self.config.io_timeout * 1000),
            **self._options,
        )

    async def start(
        self,
        on_assigned: Callable[[Iterable[int]], Awaitable[None]],
        on_revoked: Callable[[Iterable[int]], Awaitable[None]],
    ) -> None:
        """Create the internal topics, connect, and join the group."""
        self._consumer = AIOKafkaConsumer(**self.input_consumer_options())
        self._restore = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            max_partition_fetch_bytes=MAX_REQUEST_BYTES,
            fetch_max_wait_ms=RESTORE_FETCH_WAIT_MS,
            **self._options,
        )
        if self.config.output_topics:
            self._outputs = (self._producer(), self._producer())
        self._input_partitions = await self.ensure_internal_topics()
        for producer in self._outputs:
            await producer.start()
        await self._restore.start()
        topic = self.config.input_topic
        self._consumer.subscribe([topic], listener=_Listener(topic, on_assigned, on_revoked))
        await self._consumer.start()

    def input_consumer_options(self) -> dict[str, Any]:
        """The input consumer's settings (group member, read committed, offsets only
        in checkpoint transactions)."""
        timeout_ms = int(self._session_timeout * 1000)
        return {
            "bootstrap_servers": self.bootstrap,
            "group_id": self.group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "isolation_level": "read_committed",
            "session_timeout_ms": timeout_ms,
            "heartbeat_interval_ms": max(300, timeout_ms // 4),
            "max_partition_fetch_bytes": MAX_REQUEST_BYTES,
            # aiokafka serves seeks and offset look-ups between fetches, and a record
            # on a partition left out of the fetch in flight waits for it to return:
            # aiokafka's default (500 ms) would delay both that long.
            "fetch_max_wait_ms": max(1, round(self.config.fetch_wait * 1000)),
            **self._options,
        }

    async def ensure_internal_topics(self) -> int:
        """Create the changelog (compacted, as many partitions as the input) and the
        fleet topic; returns the input topic's partition count."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self._options)
        await admin.start()
        try:
            described = await admin.describe_topics([self.config.input_topic])
            partitions = [len(t["partitions"]) for t in described if not t["error_code"]]
            if not partitions:
                raise RuntimeError(f"input topic {self.config.input_topic} does not exist")
            existing = set(await admin.list_topics())
            wanted = []
            if self.config.changelog_topic not in existing:
                wanted.append(
                    NewTopic(
                        self.config.changelog_topic,
                        partitions[0],
                        self.replication,
                        topic_configs={
                            "cleanup.policy": "compact",
                            "max.message.bytes": str(MAX_REQUEST_BYTES),
                            "min.compaction.lag.ms": "60000",
                            "segment.ms": str(CHANGELOG_SEGMENT_MS),
                        },
                    )
                )
            fleet = self.config.fleet_topic
            if fleet is not None and fleet not in existing:
                wanted.append(
                    NewTopic(
                        fleet,
                        self.partitions,
                        self.replication,
                        topic_configs={"retention.ms": str(24 * 3600 * 1000)},
                    )
                )
            if wanted:
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics(wanted)
            return partitions[0]
        finally:
            await admin.close()

    async def stop(self) -> None:
        """Leave the group and close every client (those that were started)."""
        started = [getattr(self, name, None) for name in ("_consumer", "_restore")]
        for client in [*started, *self._outputs]:  # absent when start() never ran
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), 5)

    # -- Transport -------------------------------------------------------------

    async def poll(self, max_records: int, timeout: float) -> dict[int, list[InputRecord]]:
        batch = await self._consumer.getmany(
            timeout_ms=int(timeout * 1000), max_records=max_records
        )
        return {
            tp.partition: [
                InputRecord(
                    tp.partition,
                    r.offset,
                    r.key,
                    r.value,
                    r.timestamp,
                    tuple((k, v) for k, v in r.headers),
                )
                for r in records
            ]
            for tp, records in batch.items()
        }

    async def open_partition(self, partition: int) -> KafkaWriter:
        producer = self._producer(f"{self.group_id}-state-{partition}")
        await producer.start()  # InitProducerId: fences the previous owner, aborts its txn
        return KafkaWriter(
            producer, TopicPartition(self.config.input_topic, partition), self.group_id
        )

    async def read_changelog(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        tp = TopicPartition(self.config.changelog_topic, partition)
        # The end first: asked right after assign(), aiokafka 0.14 sometimes answers 0,
        # which would restore nothing. Read until the end is reached and still the end.
        end = (await self._restore.end_offsets([tp]))[tp]
        self._restore.assign([tp])
        await self._restore.seek_to_beginning(tp)
        records: list[tuple[bytes, bytes | None]] = []
        while True:
            while await self._restore.position(tp) < end:
                batch = await self._restore.getmany(tp, timeout_ms=500, max_records=10_000)
                records.extend((r.key, r.value) for r in batch.get(tp, ()) if r.key is not None)
            latest = (await self._restore.end_offsets([tp]))[tp]
            if latest <= end:
                return records
            end = latest

    async def committed(self, partition: int) -> int | None:
        offset: int | None = await self._consumer.committed(
            TopicPartition(self.config.input_topic, partition)
        )
        return offset

    def seek(self, partition: int, offset: int) -> None:
        self._consumer.seek(TopicPartition(self.config.input_topic, partition), offset)

    def pause(self, partition: int) -> None:
        self._consumer.pause(TopicPartition(self.config.input_topic, partition))

    def resume(self, partition: int) -> None:
        self._consumer.resume(TopicPartition(self.config.input_topic, partition))

    def input_partitions(self) -> int:
        return self._input_partitions

    async def send(self, record: OutRecord, *, after_acks: bool = False) -> Awaitable[Any]:
        producer = self._outputs[1 if after_acks else 0]
        future: Awaitable[Any] = await producer.send(
            record.topic, record.value, key=record.key, partition=record.partition
        )
        return future

    async def lag(self, positions: dict[int, int]) -> int:
        if not positions:
            return 0
        tps = {TopicPartition(self.config.input_topic, p): o for p, o in positions.items()}
        ends = await self._restore.end_offsets(list(tps))
        return sum(max(0, ends[tp] - offset) for tp, offset in tps.items())


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(
        self,
        topic: str,
        on_assigned: Callable[[Iterable[int]], Awaitable[None]],
        on_revoked: Callable[[Iterable[int]], Awaitable[None]],
    ) -> None:
        self._topic = topic
        self._assigned = on_assigned
        self._revoked = on_revoked

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._revoked([tp.partition for tp in revoked if tp.topic == self._topic])

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self._assigned([tp.partition for tp in assigned if tp.topic == self._topic])
