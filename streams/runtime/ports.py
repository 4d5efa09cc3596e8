"""The transport the runtime runs on: Kafka in the worker, memory in tests.

The contract between them is small on purpose, so that the in-memory
transport can honour it exactly (read-committed visibility, transactions that
commit or abort as a whole, producer fencing, committed offsets) and the tests
that use it prove something about the real worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from spanguard.streams.runtime.records import InputRecord, OutRecord

Ack = Awaitable[Any]
"""Resolves when the broker acknowledged a record (raises if it could not be written)."""


class PartitionWriter(Protocol):
    """The transactional producer that owns one input partition.

    Opening it fences any earlier writer of the same partition (a zombie worker)
    and aborts that writer's open transaction. Everything a checkpoint writes
    (changelog, fleet partials, under exactly-once the outputs) and the input
    offset it commits become visible together, or not at all.
    """

    async def send(self, record: OutRecord) -> Ack:
        """Write a record in the open transaction (begun on the first send)."""

    async def commit(self, next_offset: int) -> None:
        """Commit the input position ``next_offset`` with the open transaction."""

    async def abort(self) -> None:
        """Abort the open transaction, if any."""

    async def close(self) -> None:
        """Release the producer (an open transaction is aborted by the next owner)."""


class Transport(Protocol):
    """Input consumption, output production and changelog reads for one worker."""

    async def poll(self, max_records: int, timeout: float) -> dict[int, list[InputRecord]]:
        """The next records of assigned input partitions (possibly none), in offset order."""

    async def open_partition(self, partition: int) -> PartitionWriter:
        """Take ownership of an input partition's writes (fences earlier owners)."""

    async def read_changelog(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """Every committed record of the partition's changelog, in offset order."""

    async def committed(self, partition: int) -> int | None:
        """The committed input position of the partition (None: nothing committed)."""

    def seek(self, partition: int, offset: int) -> None:
        """Deliver the partition's records from ``offset`` on."""

    def pause(self, partition: int) -> None:
        """Stop delivering the partition's records (until :meth:`resume`)."""

    def resume(self, partition: int) -> None:
        """Deliver the partition's records again."""

    def input_partitions(self) -> int:
        """How many partitions the input topic has (for the partitioner check)."""

    async def send(self, record: OutRecord, *, after_acks: bool = False) -> Ack:
        """Produce outside any transaction (at-least-once outputs).

        ``after_acks``: the output was held until earlier outputs were acknowledged (a
        decision after its causes, a session's outputs after its earlier batch's). A
        transport may give those a producer of their own, so that they never queue
        behind the outputs the next batches send meanwhile, nor those behind them."""

    async def lag(self, positions: dict[int, int]) -> int:
        """Records waiting on the given partitions past the given positions."""


class FleetHook(Protocol):
    """Fleet monitoring's combiner, called by the runtime (see streams/fleet)."""

    def observe(self, partition: int, value: bytes | None, outputs: Sequence[Any]) -> None:
        """One input record of ``partition`` was processed with these outputs (called
        per record, in order; it may only note the record for :meth:`flush`)."""

    def flush(self) -> None:
        """Count what was observed (called once a batch's outputs are handed to the
        producer, so that monitoring delays none of them)."""

    def partials(self, partition: int) -> list[tuple[bytes, bytes]]:
        """Drain what was observed on ``partition`` since the last call, as
        (key, value) records for the fleet topic; written in the checkpoint's
        transaction."""

    def discard(self, partition: int) -> None:
        """Forget what was observed since the last :meth:`partials` (the partition was
        revoked or its checkpoint failed: its inputs will be processed again)."""
