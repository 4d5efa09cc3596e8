"""The one step the agent runs per input record: engine, outputs, then changelog."""

from __future__ import annotations

import gc
from collections.abc import Iterable, MutableMapping
from datetime import UTC, datetime

from streams.app.output import OutputProducer
from streams.engine.engine import Engine, Source


class Processor:
    """Feeds raw records to the engine and persists what changed.

    Order matters for at-least-once: outputs are acknowledged before the state
    records are written, so a crash in between re-processes the record (same
    deterministic ids, consumers deduplicate) instead of losing its outputs.
    """

    def __init__(
        self, engine: Engine, producer: OutputProducer, table: MutableMapping[bytes, bytes]
    ) -> None:
        self.engine = engine
        self.producer = producer
        self.table = table
        self.processed = 0

    async def handle(
        self, topic: str, partition: int, offset: int, timestamp: float | None, value: bytes | None
    ) -> int:
        """Process one input record; returns the number of outputs produced."""
        received = datetime.fromtimestamp(timestamp, UTC) if timestamp else None
        outputs = self.engine.process_raw(value or b"", Source(topic, partition, offset, received))
        await self.producer.emit(outputs, partition)
        table = self.table
        for key, record in self.engine.drain_changes():
            if record is not None:
                table[key] = record
            elif key in table:
                del table[key]
        self.processed += 1
        return len(outputs)

    def rebuild(self, records: Iterable[tuple[bytes, bytes]]) -> int:
        """Replace the engine's sessions with those in ``records`` (after a rebalance)."""
        self.engine.sessions.clear()
        self.engine.stats.closed_sessions.clear()
        restored = self.engine.restore(records)
        # Restored state lives as long as the assignment: keep it out of GC scans.
        gc.freeze()
        return restored
