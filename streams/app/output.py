"""Producing an input's outputs with the contract's ordering guarantee.

Every fault, pin, recompute request and dead-letter record an input causes is
sent and acknowledged by the broker before its ``eviction.decided`` is sent;
the decision lists their ids. Under exactly-once all of it also belongs to the
worker's Kafka transaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from schemas import ID_FIELD, TOPIC_OF, EventRejected, EvictionDecided, OutputEvent
from streams.codec import encode_output


@dataclass(frozen=True, slots=True)
class Ack:
    """Where and when the broker acknowledged an output (for the ordering journal)."""

    output_id: str
    type: str
    topic: str
    partition: int
    offset: int
    acked_ns: int
    sent_ns: int


class Send(Protocol):
    """Sends one record to an output topic on behalf of an input partition and
    returns the future of its acknowledgement (RecordMetadata)."""

    async def __call__(
        self, suffix: str, key: bytes | None, value: bytes, source_partition: int
    ) -> Awaitable[Any]: ...


Journal = Callable[[Ack], None]


def file_journal(path: Path) -> Journal:
    """A journal that appends one JSON line per ack to ``path`` (for verification)."""
    handle = path.open("ab", buffering=0)

    def record(ack: Ack) -> None:
        handle.write(orjson.dumps(dataclasses.asdict(ack)) + b"\n")

    return record


def output_id(event: OutputEvent) -> str:
    """The output's own id (``fault_id``, ``pin_id``, ...)."""
    return str(getattr(event, ID_FIELD[event.type]))


class OutputProducer:
    """Sends outputs to their topics; a decision only after its causes are acked."""

    def __init__(self, send: Send, journal: Journal | None = None) -> None:
        self._send_record = send
        self._journal = journal

    async def _send(self, event: OutputEvent, partition: int) -> tuple[Awaitable[Any], int]:
        key = None if isinstance(event, EventRejected) else event.session_id.encode("utf-8")
        sent_ns = time.monotonic_ns()
        future = await self._send_record(TOPIC_OF[event.type], key, encode_output(event), partition)
        return future, sent_ns

    async def _settle(self, sent: Sequence[tuple[OutputEvent, Awaitable[Any], int]]) -> None:
        metadata = await asyncio.gather(*(future for _, future, _ in sent))
        if self._journal is None:
            return
        acked = time.monotonic_ns()
        for (event, _, sent_ns), meta in zip(sent, metadata, strict=True):
            self._journal(
                Ack(
                    output_id(event),
                    event.type,
                    meta.topic,
                    meta.partition,
                    meta.offset,
                    acked,
                    sent_ns,
                )
            )

    async def emit(self, batch: Sequence[tuple[Sequence[OutputEvent], int]]) -> None:
        """Send the outputs of a batch of inputs (each with its input partition) and
        wait for every ack: first everything but decisions, then the decisions."""
        causes = [
            (o, p) for outputs, p in batch for o in outputs if not isinstance(o, EvictionDecided)
        ]
        decisions = [
            (o, p) for outputs, p in batch for o in outputs if isinstance(o, EvictionDecided)
        ]
        for group in (causes, decisions):
            if group:
                await self._settle([(o, *await self._send(o, p)) for o, p in group])
