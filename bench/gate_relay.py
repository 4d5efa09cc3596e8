"""The gate's floor under the contract's order: a relay with no engine and no runtime.

    python -m bench.gate_relay --bootstrap HOST:PORT --prefix P --sessions N

``bench.gate_tail`` starts it in place of a worker (its ``relay`` rows). It reads
``<P>.events`` and, for each input record of ``demo_fleet(N)``, writes the outputs the
real engine made of it (computed before it says ``ready``), batch by batch as the
worker's data path does, with the one wait the contract orders: a session's decision
(or compaction record) goes only once the faults, pins and recompute requests of its
session in the same batch are acknowledged. Nothing else waits: no engine, no state,
no changelog, no checkpoint, no order kept across batches, and the next batch is
polled while acknowledgements are pending. Its latency is therefore a lower bound
for any worker that keeps that order on this machine and broker: what the rule and
the broker cost, without the guard's own work.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.e2e import PARTITIONS
from spanguard.schemas import TOPIC_OF, ContextCompacted, EventRejected, EvictionDecided
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.settings import load_settings
from spanguard.streams.sim.scenarios import demo_fleet

Record = tuple[str, bytes | None, bytes]
"""(topic, key, value) of one output."""
Script = dict[bytes, tuple[bytes | None, list[tuple[Record, bool]]]]
"""Each input line's session key and outputs, each with whether it is a decision (or
compaction record), which waits for its session's causes in the same batch."""


def script(prefix: str, sessions: int) -> Script:
    """What the real engine writes for each line of ``demo_fleet(sessions)``."""
    engine = Engine()
    made: Script = {}
    for offset, line in enumerate(demo_fleet(sessions)):
        outputs = []
        session = None
        for event in engine.process_raw(line, Source(f"{prefix}.events", 0, offset)):
            key = None if isinstance(event, EventRejected) else event.session_id.encode()
            session = session or key
            record = (f"{prefix}.{TOPIC_OF[event.type]}", key, encode_output(event))
            outputs.append((record, isinstance(event, EvictionDecided | ContextCompacted)))
        made[line] = (session, outputs)
    return made


async def relay(bootstrap: str, prefix: str, made: Script) -> None:
    """Relay until cancelled (a SIGTERM ends the process)."""
    settings = load_settings()  # the worker's fetch wait and batch size (SPANGUARD_* apply)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=max(1, round(settings.fetch_wait * 1000)),
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0
    )
    await consumer.start()
    await producer.start()
    parts = [TopicPartition(f"{prefix}.events", p) for p in range(PARTITIONS)]
    consumer.assign(parts)
    await consumer.seek_to_beginning(*parts)
    for tp in parts:
        await consumer.position(tp)
    print("ready", flush=True)
    pending: set[asyncio.Task[None]] = set()
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=100, max_records=settings.batch_size)
            now: list[Record] = []
            later: list[Record] = []
            caused: set[bytes | None] = set()
            for records in batch.values():
                for record in records:
                    session, outputs = made.get(record.value or b"", (None, []))
                    for output, decision in outputs:
                        if not decision:
                            caused.add(session)
                        (later if decision and session in caused else now).append(output)
            acks = [await producer.send(topic, value, key=key) for topic, key, value in now]
            if later:
                task = asyncio.create_task(_after(producer, acks, later))
                pending.add(task)
                task.add_done_callback(pending.discard)
    finally:
        await consumer.stop()
        await producer.stop()


async def _after(
    producer: AIOKafkaProducer, acks: Sequence[asyncio.Future[object]], later: list[Record]
) -> None:
    await asyncio.gather(*acks)
    for topic, key, value in later:
        await producer.send(topic, value, key=key)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--sessions", type=int, required=True)
    args = parser.parse_args(argv)
    asyncio.run(relay(args.bootstrap, args.prefix, script(args.prefix, args.sessions)))


if __name__ == "__main__":
    main()
