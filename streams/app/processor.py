"""The step the agent runs per batch of input records: engine, outputs, then changelog."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas import OutputEvent
from streams.app.output import OutputProducer
from streams.engine.engine import Engine, Source
from streams.engine.persist import Record
from streams.fleet.observer import ProcessorObserver

Persist = Callable[["InputRecord", Sequence[Record]], None]
"""Writes one input record's state changes to the changelog-backed table."""


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record of the input topic, as the agent received it."""

    topic: str
    partition: int
    offset: int
    timestamp: float | None
    value: bytes | None
    event: Any = None
    """The Faust event it came in (the table needs it to pick the changelog partition)."""


class Processor:
    """Feeds raw records to the engine and persists what changed.

    Order matters for at-least-once. Per batch: every output is acknowledged
    (a decision only after the faults, pins and recompute request it lists),
    then the state records are written to the table, then the producer is
    flushed, and only then does the agent take the next batch, which lets Faust
    commit this batch's offsets. So a committed offset always has its outputs
    and its changelog behind it; a crash before that re-processes the batch
    (same deterministic ids, consumers deduplicate) instead of losing anything.
    """

    def __init__(
        self,
        engine: Engine,
        producer: OutputProducer,
        persist: Persist,
        flush: Callable[[], Awaitable[None]],
    ) -> None:
        self.engine = engine
        self.producer = producer
        self._persist = persist
        self._flush = flush
        self.processed = 0
        self.observer: ProcessorObserver | None = None
        """Fleet monitoring's per-record hook (metrics, inspector), when installed."""

    async def handle(self, records: Sequence[InputRecord]) -> int:
        """Process a batch of input records in order; returns the number of outputs."""
        started = time.perf_counter()
        observer = self.observer
        batch: list[tuple[list[OutputEvent], int]] = []
        changes: list[list[Record]] = []
        for record in records:
            received = datetime.fromtimestamp(record.timestamp, UTC) if record.timestamp else None
            source = Source(record.topic, record.partition, record.offset, received)
            outputs = self.engine.process_raw(record.value or b"", source)
            if observer is not None:
                observer.record(record.value, outputs)
            batch.append((outputs, record.partition))
            changes.append(self.engine.drain_changes())
        await self.producer.emit(batch)
        for record, changed in zip(records, changes, strict=True):
            if changed:
                self._persist(record, changed)
        await self._flush()
        if observer is not None:
            observer.batch(len(records), time.perf_counter() - started)
        self.processed += len(records)
        return sum(len(outputs) for outputs, _ in batch)

    def rebuild(self, records: Iterable[tuple[bytes, bytes]]) -> int:
        """Replace the engine's sessions with those in ``records`` (after a rebalance)."""
        self.engine.sessions.clear()
        self.engine.stats.closed_sessions.clear()
        restored = self.engine.restore(records)
        # Restored state lives as long as the assignment: keep it out of GC scans.
        gc.freeze()
        return restored
