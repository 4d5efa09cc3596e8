"""The murmur2 partitioner equals the Java client's, and `produce` keys every line it can."""

from __future__ import annotations

import pytest

from spanguard.streams.kafka_io.keys import session_key
from spanguard.streams.kafka_io.partitioning import murmur2, partition_for

# Utils.murmur2 values from Kafka's own UtilsTest and from running
# org.apache.kafka.common.utils.Utils (kafka-clients 4.1.1) on these keys.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"sess-0001": -1684403725,
    b"s1": 322709757,
    b"tenant-a/session-42": 378748702,
    "ü-session".encode(): -821086461,
    b"": 275646681,
}

# toPositive(murmur2(key)) % n from the same Java run, for n = 3, 4, 12.
JAVA_PARTITIONS = {
    b"21": (0, 0, 0),
    b"foobar": (0, 2, 6),
    b"abc": (0, 3, 3),
    b"sess-0001": (1, 3, 7),
    b"s1": (0, 1, 9),
    b"tenant-a/session-42": (1, 2, 10),
    "ü-session".encode(): (2, 3, 11),
    b"": (0, 1, 9),
}


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2.items())
def test_murmur2_equals_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS.items())
def test_partition_for_equals_java(key: bytes, expected: tuple[int, int, int]) -> None:
    assert tuple(partition_for(key, n) for n in (3, 4, 12)) == expected


def test_partition_for_refuses_no_partitions() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for(b"s1", 0)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"span.added","session_id":"s-7","seq":1}',
        # NaN and Infinity: orjson refuses them, the engine reads them (NON_FINITE_SCORE)
        b'{"type":"scores.computed","session_id":"s-7","scores":[{"score":NaN}]}',
        b'{"session_id":"s-7","score":-Infinity}',
        # truncated JSON: the session is still readable
        b'{"type":"span.added","session_id":"s-7","text":"cut off he',
        b'{"type": "x", "session_id" : "s-7"',
        # a wrong type elsewhere, or an unknown event type, is still keyed
        b'{"type":"no.such.type","session_id":"s-7","seq":"one"}',
    ],
)
def test_session_key_is_found_in_bad_lines(line: bytes) -> None:
    assert session_key(line) == b"s-7"


def test_session_key_reads_escapes_in_truncated_lines() -> None:
    assert session_key(b'{"session_id":"a\\"b\\u00fc","text":"x') == 'a"bü'.encode()


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b"[1,2,3]",
        b'{"session_id": 42}',
        b'{"session_id": ""}',
        b'{"tenant":"t"}',
        b'{"tenant":"t","text":"no session_id in here',
        b"\xff\xfe garbage",
    ],
)
def test_session_key_is_none_without_a_session(line: bytes) -> None:
    assert session_key(line) is None


def test_a_session_id_with_a_lone_surrogate_gives_no_key() -> None:
    # found by bench/e2e.py's garbage mix: the producer crashed encoding the key
    assert session_key(b'{"session_id": "s-\\ud800", "type": "span.added"}') is None
