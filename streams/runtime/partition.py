"""One assigned input partition: its engine, its writer and its position."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

from spanguard.schemas import OutputEvent, RejectReason
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.keys import session_key
from spanguard.streams.kafka_io.partitioning import partition_for
from spanguard.streams.runtime.owner import Owned
from spanguard.streams.runtime.ports import FleetHook
from spanguard.streams.runtime.records import InputRecord


@dataclass
class PartitionState(Owned):
    """Everything the runtime keeps for one input partition it owns: beside the
    writer and positions of every owned partition, its engine (``next_offset`` is the
    first input offset not yet applied to it) and what is on its way to the broker."""

    engine: Engine
    input_topic: str
    partitions: int
    check_partitioning: bool
    since_checkpoint: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    inflight: asyncio.Task[None] | None = None
    """The checkpoint being committed in the background (at-least-once)."""
    deliveries: deque[asyncio.Future[None]] = field(default_factory=deque)
    """The batches whose outputs are still on their way to the broker, oldest first
    (at-least-once: the next batches are processed meanwhile)."""
    tails: dict[tuple[str | None, str | None], asyncio.Future[bool]] = field(default_factory=dict)
    """Per session, resolved when its latest batch's outputs are all acknowledged
    (True) or could not all be written (False): its next outputs wait for it."""
    failed: BaseException | None = None
    """The first error of a delivery: nothing more is sent or checkpointed for this
    state; the next step resets the partition."""

    def process(self, record: InputRecord, fleet: FleetHook | None) -> list[OutputEvent]:
        """Apply one record to the engine; returns its outputs in production order."""
        source = Source(
            self.input_topic,
            record.partition,
            record.offset,
            None if record.timestamp_ms is None else _utc(record.timestamp_ms),
            key=record.key,
            headers=record.headers,
        )
        misplaced = self._misplaced(record)
        if misplaced is not None:
            outputs: list[OutputEvent] = [
                self.engine.refuse(
                    record.value or b"", source, RejectReason.INVALID_FIELD, misplaced
                )
            ]
        else:
            outputs = self.engine.process_raw(record.value, source)  # None: a tombstone
        self.next_offset = record.offset + 1
        self.since_checkpoint += 1
        if fleet is not None:
            fleet.observe(self.partition, record.value, outputs)
        return outputs

    def _misplaced(self, record: InputRecord) -> str | None:
        """Why the record is on the wrong partition for its session (None: it is not).

        A keyed record must sit where the murmur2 partitioner puts its key. A
        keyless one is only refused when it names a session that belongs
        elsewhere: garbage without a session goes on to be rejected for what it is.
        """
        if not self.check_partitioning:
            return None
        key = record.key
        what = "record key"
        if key is None:
            key = session_key(record.value or b"")
            what = "session_id (the record has no key)"
            if key is None:
                return None
        expected = partition_for(key, self.partitions)
        if expected == record.partition:
            return None
        return (
            f"{what}: the record arrived on partition {record.partition} but its "
            f"session belongs on partition {expected} (Kafka's default murmur2 "
            "partitioner; librdkafka: murmur2_random); a session split across "
            "partitions would split its state, so the record is refused"
        )

    def due(self, now: float, interval: float, every: int) -> bool:
        """Whether a checkpoint is due."""
        if self.inflight is not None and not self.inflight.done():
            return False
        return self.since_checkpoint > 0 and (
            self.since_checkpoint >= every or now - self.last_checkpoint >= interval
        )


def _utc(timestamp_ms: int) -> datetime:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC)
