"""What the runtime reads and writes, independent of the Kafka client."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Header = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record of the input topic, as the transport delivered it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class OutRecord:
    """One record to produce: an output, a changelog record or a fleet partial.

    ``partition`` None lets the producer's (murmur2) partitioner choose from the key.
    """

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None


def latest_per_key(records: Iterable[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes]]:
    """What a compacted changelog means: the last value of every key, tombstones
    removed (``records`` in offset order)."""
    latest: dict[bytes, bytes | None] = {}
    for key, value in records:
        latest[key] = value
    return [(key, value) for key, value in latest.items() if value is not None]
