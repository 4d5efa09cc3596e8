"""Hostile input and a broker that goes away, through the real worker."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer

from bench.fuzz import garbage_mix
from spanguard.streams.kafka_io.keys import session_key
from spanguard.streams.kafka_io.partitioning import partition_for
from spanguard.streams.localbroker.broker import LocalBroker, free_ports
from spanguard.streams.sim.scenarios import broken, demo_fleet
from tests.pipeline import Pipeline, has_ids, identities, identity, replay_outputs

PARTITIONS = 4  # the topics the pipeline's workers create (settings default)


def test_a_garbage_mix_is_dead_lettered_and_changes_no_valid_output(pipeline: Pipeline) -> None:
    valid = demo_fleet(24)
    mixed, garbage = garbage_mix(valid, share=0.1, too_large=False)
    expected = replay_outputs(valid)
    worker = pipeline.start_worker("mix")
    worker.wait_ready()

    async def send() -> None:
        # as a third-party producer would: keyed by session when one is readable, a header each
        producer = AIOKafkaProducer(bootstrap_servers=pipeline.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            acks = [
                await producer.send(
                    pipeline.topic("events"),
                    line,
                    key=session_key(line),
                    headers=[("trace", f"t-{n}".encode())],
                )
                for n, line in enumerate(mixed)
            ]
            await asyncio.gather(*acks)
        finally:
            await producer.stop()

    asyncio.run(send())
    want = set(identities(expected))
    got = pipeline.read_settled(
        lambda seen: (
            want <= set(identities(seen))
            and sum(orjson.loads(r)["type"] == "event.rejected" for r in seen) >= len(garbage)
        )
    )
    outputs = [r for r in got if orjson.loads(r)["type"] != "event.rejected"]
    assert set(identities(outputs)) == set(
        identities([r for r in expected if orjson.loads(r)["type"] != "event.rejected"])
    )
    rejected = [orjson.loads(r) for r in got if orjson.loads(r)["type"] == "event.rejected"]
    by_raw = {base64.b64decode(r["raw"]): r for r in rejected}
    for item in garbage:
        assert item.raw in by_raw, f"{item.category}: no dead letter"
        letter = by_raw[item.raw]
        assert letter["reason"] in {r.value for r in item.expected}, item.category
        sent = {f"t-{n}" for n, line in enumerate(mixed) if line == item.raw}
        traces = {
            base64.b64decode(h["value_b64"]).decode()
            for r in rejected
            if base64.b64decode(r["raw"]) == item.raw
            for h in r["headers"]
            if h["key"] == "trace"
        }
        assert traces == sent, item.category
        key = session_key(item.raw)
        assert letter["key"] == (None if key is None else base64.b64encode(key).decode())


def test_a_record_on_the_wrong_partition_is_refused_and_never_applied(
    pipeline: Pipeline,
) -> None:
    lines = demo_fleet(4)
    key = session_key(lines[0])
    assert key is not None
    wrong = (partition_for(key, PARTITIONS) + 1) % PARTITIONS
    intruder = lines[0]
    worker = pipeline.start_worker("part")
    worker.wait_ready()

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=pipeline.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(
                pipeline.topic("events"), intruder, key=key, partition=wrong
            )
        finally:
            await producer.stop()

    asyncio.run(send())
    got = pipeline.read_settled(lambda seen: len(seen) >= 1)
    [record] = [orjson.loads(r) for r in got]
    assert record["type"] == "event.rejected"
    assert record["reason"] == "INVALID_FIELD"
    assert f"partition {wrong}" in record["detail"]
    assert base64.b64decode(record["raw"]) == intruder
    # the refused record was not applied: the session starts afresh on its own partition
    pipeline.produce(lines)
    expected = replay_outputs(lines)
    again = pipeline.read_settled(has_ids(set(identities(expected))))
    assert set(identities(expected)) <= set(identities(again))
    assert {identity(r) for r in again} - set(identities(expected)) == {identity(got[0])}


def test_the_worker_rides_out_a_broker_restart(tmp_path: Path, shared_lib_dir: Path) -> None:
    port, controller = free_ports(2)
    broker = LocalBroker(
        home=tmp_path / "broker",
        port=port,
        controller_port=controller,
        lib_dir=shared_lib_dir,
        stop_with_parent=True,
    )
    broker.fetch()
    bootstrap = broker.start(timeout=120)
    pipeline = Pipeline(bootstrap, "restart", tmp_path)
    try:
        lines = demo_fleet(40)
        half = len(lines) // 2
        expected = replay_outputs(lines)
        worker = pipeline.start_worker("w")
        worker.wait_ready()
        pipeline.produce(lines[:half])
        pipeline.read_until(has_ids(set(identities(replay_outputs(lines[:half])))))
        broker.stop()
        broker.start(timeout=120)
        pipeline.produce(lines[half:])
        got = pipeline.read_settled(has_ids(set(identities(expected))), timeout=180)
        assert set(identities(got)) == set(identities(expected))
        assert worker.process.poll() is None, "the worker kept running"
    finally:
        pipeline.stop_all()
        broker.stop()


def test_a_900_kb_invalid_record_is_dead_lettered_and_its_session_loses_nothing(
    pipeline: Pipeline,
) -> None:
    """Issue 10's first repro: its dead letter (base64) used to exceed the producer's
    request size, and the burst's decisions and pin were lost with it."""
    lines = broken("s-big").lines()
    big = orjson.loads(lines[3])
    big.update(event_id="big-1", span_id="huge", position=-1, text="x" * 900_000)
    raw = orjson.dumps(big)
    assert 850_000 < len(raw) < 1 << 20
    burst = [*lines[:4], raw, *lines[4:]]
    _, got = pipeline.processes_like_replay("big", burst)
    [letter] = [orjson.loads(r) for r in got if orjson.loads(r)["type"] == "event.rejected"]
    assert letter["reason"] == "INVALID_FIELD" and letter["raw_size"] == len(raw)
    assert letter["raw_truncated"] is True and len(letter["raw"]) < 100_000
    assert sum(orjson.loads(r)["type"] == "eviction.decided" for r in got) >= 3
