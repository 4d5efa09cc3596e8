"""Exactly-once under a crash, and changelog bytes per event at two session sizes."""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.kafka_io.topics import topic_config
from spanguard.streams.runtime.config import changelog_topic
from spanguard.streams.runtime.kafka_transport import CHANGELOG_SEGMENT_MS
from tests.kafka.traces import scenario_traces
from tests.pipeline import Pipeline, has_ids, identities, replay_outputs


def test_exactly_once_leaves_no_duplicate_after_a_kill(pipeline: Pipeline) -> None:
    pipeline.settings["SPANGUARD_PROCESSING_GUARANTEE"] = "exactly_once"
    lines = scenario_traces()
    half = len(lines) // 2
    expected = replay_outputs(lines)
    first_ids = set(identities(replay_outputs(lines[:half])))
    first = pipeline.start_worker("first")
    first.wait_ready()
    pipeline.produce(lines[:half])
    pipeline.read_until(has_ids(first_ids))
    pipeline.produce(lines[half:])
    # Kill while the second half is being processed: some of its outputs are out.
    pipeline.read_until(lambda seen: len(set(identities(seen)) - first_ids) >= 5)
    first.kill()
    second = pipeline.start_worker("second")
    second.wait_ready()
    # to the end offsets once every input offset is committed: a late duplicate is read
    got = pipeline.read_settled(has_ids(set(identities(expected))), timeout=180)
    counts = identities(got)
    duplicates = {k: n for k, n in counts.items() if n > 1}
    assert set(counts) == set(identities(expected))
    assert duplicates == {}, f"{len(duplicates)} outputs seen more than once"


def changelog_bytes(bootstrap: str, topic: str, since: dict[int, int]) -> Counter[str]:
    """Bytes (key + value) written to the changelog per session since ``since`` offsets."""

    async def run() -> Counter[str]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed"
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in since]
            ends = await consumer.end_offsets(tps)  # before assign(): see read_changelog
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, since[tp.partition])
            totals: Counter[str] = Counter()

            async def behind() -> bool:
                return any([await consumer.position(tp) < ends[tp] for tp in tps])

            while await behind():
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for r in records:
                        session = orjson.loads(r.key)[1]
                        totals[session] += len(r.key or b"") + len(r.value or b"")
            return totals
        finally:
            await consumer.stop()

    return asyncio.run(run())


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    async def run() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            parts = consumer.partitions_for_topic(topic) or set()
            for _ in range(100):
                if parts:
                    break
                await consumer._client.force_metadata_update()
                parts = consumer.partitions_for_topic(topic) or set()
            assert parts, f"topic {topic} does not exist"
            ends = await consumer.end_offsets([TopicPartition(topic, p) for p in parts])
            return {tp.partition: off for tp, off in ends.items()}
        finally:
            await consumer.stop()

    return asyncio.run(run())


def test_changelog_bytes_per_event_do_not_grow_with_session_size(pipeline: Pipeline) -> None:
    sizes = {"small": 100, "large": 10_000}
    scripts = {name: SessionScript(f"cost-{name}") for name in sizes}
    for name, size in sizes.items():
        s = scripts[name]
        for i in range(size):
            s.add(f"a{i}", f"turn {i} about order {10000 + i}")
        s.score(*[(f"a{i}", 0.5) for i in range(0, size, max(1, size // 50))])
        s.evict(["a0"])
    worker = pipeline.start_worker("cost")
    worker.wait_ready()
    pipeline.produce([line for s in scripts.values() for line in s.lines()])
    warm = set(identities(replay_outputs([line for s in scripts.values() for line in s.lines()])))
    pipeline.read_until(has_ids(warm), timeout=300)
    # Outputs are visible before the checkpoint that covers their state commits (every
    # second, in the background): measure from the warm-up's checkpoint, not before it.
    pipeline.wait_committed()

    changelog = changelog_topic(f"{pipeline.prefix}-app")
    # the worker created it compacted, with segments that roll hourly for the cleaner
    config = asyncio.run(topic_config(pipeline.bootstrap, changelog))
    assert config["cleanup.policy"] == "compact"
    assert config["segment.ms"] == str(CHANGELOG_SEGMENT_MS)
    before = end_offsets(pipeline.bootstrap, changelog)
    steps = 40
    marks = {}
    for s in scripts.values():
        marks[s.session_id] = len(s.raw)
        for i in range(steps):
            s.add(f"new{i}", f"new turn {i}")
            s.score((f"new{i}", 0.7))
        s.evict(["a1"])
    tail = [line for s in scripts.values() for line in s.lines()[marks[s.session_id] :]]
    pipeline.produce(tail)
    everything = [line for s in scripts.values() for line in s.lines()]
    pipeline.read_until(has_ids(set(identities(replay_outputs(everything)))), timeout=300)
    pipeline.wait_committed()
    written = changelog_bytes(pipeline.bootstrap, changelog, before)
    events = 2 * steps + 1
    per_event = {name: written[f"cost-{name}"] / events for name in sizes}
    assert per_event["small"] > 0
    assert per_event["large"] / per_event["small"] < 1.5
