"""Which partition a session's records belong on: Kafka's default (murmur2) partitioner.

All input of one session must reach one partition, or its state splits across
workers. Every producer therefore has to hash the key exactly as the Java
client's default partitioner does: ``toPositive(murmur2(key)) % partitions``.
librdkafka clients (kcat, confluent-kafka-python, ...) get this with
``partitioner=murmur2_random``; their default (``consistent_random``, CRC32)
puts sessions elsewhere.

This module is pure (no Faust, no network) so that both the producer and the
worker's partition check can import it.
"""

from __future__ import annotations

import functools

from aiokafka.partitioner import murmur2 as _aiokafka_murmur2

__all__ = ["murmur2", "partition_for"]

_INT31 = 0x7FFFFFFF


def murmur2(key: bytes) -> int:
    """Kafka's murmur2 hash of ``key`` as the Java client computes it (a signed 32-bit int)."""
    unsigned = int(_aiokafka_murmur2(key)) & 0xFFFFFFFF
    return unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned


# Every record of a session is checked (by the worker) or placed (by producers) with the
# same key: hashing it once per session instead of once per record saves ~5 us each.
@functools.lru_cache(maxsize=1 << 16)
def partition_for(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key``.

    Equal to ``Utils.toPositive(Utils.murmur2(key)) % partitions`` (Kafka's
    ``BuiltInPartitioner.partitionForKey``).

    Raises:
        ValueError: When ``partitions`` is not positive.
    """
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return (murmur2(key) & _INT31) % partitions
