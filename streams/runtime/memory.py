"""An in-memory Kafka for the runtime: topics, transactions, fencing, offsets.

It keeps exactly the semantics the runtime relies on, so the broker-less tests
(:mod:`spanguard.streams.runtime.testing`) exercise the real ordering and persistence
code: records of an open transaction are invisible to read-committed readers
and block them (the last stable offset), an aborted transaction's records are
never visible, opening a partition's writer fences the previous one and aborts
its open transaction, and offsets committed in a transaction apply only when
it commits. A crash can be injected before any write
(:attr:`MemoryBroker.crash_at`): from then on the crashed worker's every call
raises :class:`Crash`, as if the process had died there.

Acknowledgements of outputs produced outside a transaction can come late
(:attr:`MemoryBroker.ack_turns` event-loop turns after the send, so that the
runtime's batches overlap), and a crash can lose the records whose
acknowledgement had not come yet (:attr:`MemoryBroker.lose_unacked`), as a dying
producer loses what its buffer held.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from spanguard.streams.kafka_io.partitioning import partition_for
from spanguard.streams.runtime.errors import FencedError
from spanguard.streams.runtime.records import InputRecord, OutRecord


class Crash(BaseException):
    """The simulated worker process died (a BaseException, so no handler in the
    runtime can swallow it)."""


@dataclass(slots=True)
class Stored:
    key: bytes | None
    value: bytes | None
    txn: int | None = None


@dataclass
class MemoryBroker:
    """Topics, transactions and the consumer group's committed offsets."""

    partitions: int = 4
    topics: dict[str, list[list[Stored]]] = field(default_factory=dict)
    txn_state: dict[int, str] = field(default_factory=dict)
    """Transaction serial -> ``open`` | ``committed`` | ``aborted``."""
    committed: dict[int, int] = field(default_factory=dict)
    """The group's committed input position per partition."""
    epochs: dict[int, int] = field(default_factory=dict)
    open_txn: dict[int, int] = field(default_factory=dict)
    """Partition -> its writer's open transaction serial."""
    pending_offsets: dict[int, tuple[int, int]] = field(default_factory=dict)
    writes: int = 0
    crash_at: int | None = None
    """Crash the worker before its write number ``crash_at`` (1-based)."""
    crashed: bool = False
    ack_turns: int = 0
    """Event-loop turns between a non-transactional send and its acknowledgement."""
    lose_unacked: bool = False
    """Whether a crash removes the non-transactional records not yet acknowledged."""
    unacked: list[tuple[list[Stored], Stored, asyncio.Future[Any]]] = field(default_factory=list)

    def log(self, topic: str, partition: int) -> list[Stored]:
        """The records of one topic partition (created on first use)."""
        parts = self.topics.setdefault(topic, [[] for _ in range(self.partitions)])
        return parts[partition]

    def write(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        txn: int | None,
    ) -> tuple[int, int]:
        """Append a record; returns (partition, offset). Counts as one write."""
        self.before_write()
        if partition is None:
            partition = 0 if key is None else partition_for(key, self.partitions)
        records = self.log(topic, partition)
        records.append(Stored(key, value, txn))
        return partition, len(records) - 1

    def before_write(self) -> None:
        """Where an injected crash happens."""
        if self.crashed:
            raise Crash
        self.writes += 1
        if self.crash_at is not None and self.writes >= self.crash_at:
            self.crashed = True
            self.crash_at = None
            for records, lost, ack in self.unacked:
                if self.lose_unacked:
                    del records[next(i for i, r in enumerate(records) if r is lost)]
                # The process died: whatever of it awaits an acknowledgement dies too
                # (instead of waiting io_timeout for one that never comes).
                if not ack.done():
                    ack.set_exception(Crash())
                    ack.exception()  # retrieved: the abandoned runtime may never look
            self.unacked.clear()
            raise Crash

    def acknowledge_later(self, topic: str, partition: int) -> asyncio.Future[Any]:
        """The acknowledgement of the record just written to ``topic``/``partition``
        outside a transaction, ``ack_turns`` event-loop turns from now (a crash
        meanwhile fails it with :class:`Crash`)."""
        if self.ack_turns <= 0:
            return _done()
        records = self.log(topic, partition)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        entry = (records, records[-1], future)
        self.unacked.append(entry)

        def tick(turns: int) -> None:
            if turns > 0:
                loop.call_soon(tick, turns - 1)
                return
            at = next((i for i, e in enumerate(self.unacked) if e is entry), None)
            if at is not None:  # not lost by a crash
                del self.unacked[at]
                if not future.done():
                    future.set_result(None)

        loop.call_soon(tick, self.ack_turns - 1)
        return future

    def visible(self, record: Stored) -> bool:
        """Read-committed visibility of a record."""
        return record.txn is None or self.txn_state[record.txn] == "committed"

    def stable(self, topic: str, partition: int) -> list[Stored]:
        """What a read-committed reader sees, up to the last stable offset."""
        seen: list[Stored] = []
        for record in self.log(topic, partition):
            if record.txn is not None and self.txn_state[record.txn] == "open":
                break
            seen.append(record)
        return seen

    def read_committed(self, topic: str) -> list[bytes]:
        """Every visible value of a topic, partition by partition (for assertions)."""
        return [
            r.value
            for p in range(self.partitions)
            for r in self.stable(topic, p)
            if self.visible(r) and r.value is not None
        ]

    def read_all(self, topic: str) -> list[bytes]:
        """Every value written to a topic, visible or not (what at-least-once risks)."""
        return [r.value for p in range(self.partitions) for r in self.log(topic, p) if r.value]

    def abort_open(self, partition: int) -> None:
        txn = self.open_txn.pop(partition, None)
        if txn is not None:
            self.txn_state[txn] = "aborted"
            self.pending_offsets.pop(txn, None)


class MemoryWriter:
    """A partition's transactional writer (see :class:`~streams.runtime.ports.PartitionWriter`)."""

    def __init__(self, broker: MemoryBroker, worker: MemoryTransport, partition: int) -> None:
        self._broker = broker
        self._worker = worker
        self._partition = partition
        self._epoch = broker.epochs[partition]

    def _check(self) -> None:
        self._worker.alive()
        if self._broker.epochs[self._partition] != self._epoch:
            raise FencedError(f"partition {self._partition}: a newer writer took over")

    def _txn(self) -> int:
        txn = self._broker.open_txn.get(self._partition)
        if txn is None:
            txn = len(self._broker.txn_state)
            self._broker.txn_state[txn] = "open"
            self._broker.open_txn[self._partition] = txn
        return txn

    async def send(self, record: OutRecord) -> asyncio.Future[Any]:
        self._check()
        self._broker.write(record.topic, record.partition, record.key, record.value, self._txn())
        return _done()

    async def commit(self, next_offset: int) -> None:
        self._check()
        txn = self._txn()
        self._broker.before_write()
        self._broker.txn_state[txn] = "committed"
        self._broker.open_txn.pop(self._partition, None)
        self._broker.committed[self._partition] = next_offset

    async def abort(self) -> None:
        self._check()
        self._broker.abort_open(self._partition)

    async def close(self) -> None:
        """Nothing to release (an open transaction stays open until the next owner)."""


class MemoryTransport:
    """One worker's view of a :class:`MemoryBroker` (see
    :class:`~streams.runtime.ports.Transport`)."""

    def __init__(self, broker: MemoryBroker, input_topic: str, changelog_topic: str) -> None:
        self.broker = broker
        self.input_topic = input_topic
        self.changelog_topic = changelog_topic
        self.positions: dict[int, int] = {}
        self.paused: set[int] = set()
        self.dead = False

    def alive(self) -> None:
        """Raise :class:`Crash` if this worker's process has "died"."""
        if self.dead or self.broker.crashed:
            self.dead = True
            raise Crash

    async def poll(self, max_records: int, timeout: float) -> dict[int, list[InputRecord]]:
        self.alive()
        batch: dict[int, list[InputRecord]] = {}
        budget = max_records
        for p, position in sorted(self.positions.items()):
            if p in self.paused or budget <= 0:
                continue
            log = self.broker.stable(self.input_topic, p)
            taken: list[InputRecord] = []
            offset = position
            while offset < len(log) and len(taken) < budget:
                record = log[offset]
                if self.broker.visible(record):
                    # no broker timestamp (as in replay): a timestamp of 0 would hold
                    # the partition's expiry clock at 1970 + max_clock_skew
                    taken.append(InputRecord(p, offset, record.key, record.value, None))
                offset += 1
            self.positions[p] = offset
            if taken:
                batch[p] = taken
                budget -= len(taken)
        await asyncio.sleep(0)
        return batch

    async def open_partition(self, partition: int) -> MemoryWriter:
        self.alive()
        self.broker.epochs[partition] = self.broker.epochs.get(partition, 0) + 1
        self.broker.abort_open(partition)
        return MemoryWriter(self.broker, self, partition)

    async def read_changelog(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        self.alive()
        return [
            (r.key, r.value)
            for r in self.broker.stable(self.changelog_topic, partition)
            if self.broker.visible(r) and r.key is not None
        ]

    async def committed(self, partition: int) -> int | None:
        self.alive()
        return self.broker.committed.get(partition)

    def seek(self, partition: int, offset: int) -> None:
        self.positions[partition] = offset

    def pause(self, partition: int) -> None:
        self.paused.add(partition)

    def resume(self, partition: int) -> None:
        self.paused.discard(partition)

    def input_partitions(self) -> int:
        return self.broker.partitions

    async def send(self, record: OutRecord, *, after_acks: bool = False) -> asyncio.Future[Any]:
        self.alive()  # one log per partition: which producer wrote it makes no difference
        partition, _ = self.broker.write(
            record.topic, record.partition, record.key, record.value, None
        )
        return self.broker.acknowledge_later(record.topic, partition)

    async def lag(self, positions: dict[int, int]) -> int:
        return sum(
            max(0, len(self.broker.stable(self.input_topic, p)) - offset)
            for p, offset in positions.items()
        )


def _done() -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future
