"""Reading output topics from the beginning, read committed."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer


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
