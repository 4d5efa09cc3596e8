"""Running real ``spanguard worker`` processes against the test broker, and the traces
and replay references the Kafka tests compare them with."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from schemas import ID_FIELD, OUTPUT_SUFFIXES
from schemas.codec import encode_output
from streams.app.processes import WorkerProcess, spawn_worker
from streams.engine.engine import Engine, Source
from streams.engine.trace import SessionScript, interleave
from streams.kafka_io.traces import OutputReader, produce_lines
from streams.sim.scenarios import broken, demo_fleet, healthy
from tests.engine.scripts import build

Done = Callable[[list[bytes]], bool]


@dataclass
class Pipeline:
    """A topic prefix, a consumer group and the workers running on them."""

    bootstrap: str
    prefix: str
    tmp: Path
    settings: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)

    def env(self, name: str) -> dict[str, str]:
        env = dict(
            {
                "SPANGUARD_BROKER": f"kafka://{self.bootstrap}",
                "SPANGUARD_TOPIC_PREFIX": self.prefix,
                "SPANGUARD_APP_ID": f"{self.prefix}-app",
                "SPANGUARD_DATA_DIR": str(self.tmp / f"data-{name}"),
                "SPANGUARD_WEB_ENABLED": "false",
                "SPANGUARD_SESSION_TIMEOUT": "3",
                "SPANGUARD_ACK_JOURNAL": str(self.tmp / f"journal-{name}.jsonl"),
                # These tests compare outputs with replay, which makes no fleet alerts.
                "SPANGUARD_FLEET": '{"enabled": false}',
            }
        )
        env.update(self.settings)
        return env

    def start_worker(self, name: str, *args: str) -> WorkerProcess:
        worker = spawn_worker(
            name,
            self.env(name),
            self.tmp / f"worker-{name}.log",
            cwd=self.tmp,
            journal=self.tmp / f"journal-{name}.jsonl",
            args=args,
        )
        self.workers.append(worker)
        return worker

    def stop_all(self) -> None:
        for worker in self.workers:
            worker.kill()

    def topic(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}"

    def produce(self, lines: Iterable[bytes]) -> int:
        return asyncio.run(produce_lines(self.bootstrap, self.topic("events"), list(lines)))

    def wait_committed(self, timeout: float = 120.0) -> None:
        """Wait until the workers' group has committed every input offset: all of it is
        processed, its outputs acknowledged and its changelog flushed."""
        asyncio.run(self._wait_committed(timeout))

    async def _wait_committed(self, timeout: float) -> None:
        topic = self.topic("events")
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap)
        await admin.start()
        await consumer.start()
        try:
            # partitions from the admin client: a fresh consumer has no metadata yet, and
            # an empty list would make the wait below pass without checking anything
            [described] = await admin.describe_topics([topic])
            parts = [TopicPartition(topic, p["partition"]) for p in described["partitions"]]
            assert parts, f"{topic} has no partitions"
            ends = await consumer.end_offsets(parts)
            deadline = time.monotonic() + timeout
            while True:
                committed = await admin.list_consumer_group_offsets(f"{self.prefix}-app")
                if all(tp in committed and committed[tp].offset >= end for tp, end in ends.items()):
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"offsets not committed after {timeout}s: {committed}")
                await asyncio.sleep(0.2)
        finally:
            await consumer.stop()
            await admin.close()

    def read_until(self, done: Done, timeout: float = 120.0, idle: float = 3.0) -> list[bytes]:
        """Read every output topic from the beginning until ``done(records)`` holds and
        nothing new arrived for ``idle`` seconds; fail after ``timeout``."""
        return asyncio.run(self._read_until(done, timeout, idle))

    async def _read_until(self, done: Done, timeout: float, idle: float) -> list[bytes]:
        topics = [self.topic(s) for s in OUTPUT_SUFFIXES]
        records: list[bytes] = []
        deadline = time.monotonic() + timeout
        async with OutputReader(self.bootstrap, topics) as reader:
            last_new = time.monotonic()
            while True:
                batch = await reader.poll(timeout_ms=250)
                if batch:
                    records.extend(r.value for r in batch)
                    last_new = time.monotonic()
                elif done(records) and time.monotonic() - last_new >= idle:
                    return records
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"outputs incomplete after {timeout}s: {len(records)} records"
                    )


def has_ids(expected: set[str]) -> Done:
    """Done when every expected output identity has been read."""
    return lambda records: expected <= {identity(r) for r in records}


def identity(raw: bytes) -> str:
    """An output's id, except dead letters: their reason and raw input (the source
    position differs between replay and Kafka)."""
    data = orjson.loads(raw)
    if data["type"] == "event.rejected":
        return f"rejected:{data['reason']}:{data['raw']}"
    return str(data[ID_FIELD[data["type"]]])


def scenario_traces() -> list[bytes]:
    """Every scenario of the suite in one interleaved fleet (distinct session ids)."""
    scripts: list[SessionScript] = [healthy(), broken()]
    for i, actions in enumerate(_random_action_lists()):
        script = build(actions)
        for event in script.raw:
            event["session_id"] = f"prop-{i}"
            event["event_id"] = f"prop-{i}-{event['seq']}"
        scripts.append(script)
    lines = interleave(scripts) + demo_fleet(24)
    return lines


def _random_action_lists() -> Iterator[list[tuple]]:  # type: ignore[type-arg]
    from hypothesis import HealthCheck, given, settings

    from tests.engine.scripts import actions

    found: list[list[tuple]] = []  # type: ignore[type-arg]

    @settings(
        max_examples=12, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(actions())
    def collect(value: list[tuple]) -> None:  # type: ignore[type-arg]
        found.append(value)

    collect()
    return iter(found)


def replay_outputs(lines: list[bytes]) -> list[bytes]:
    """What ``spanguard replay`` outputs for ``lines``, as bytes on the wire."""
    engine = Engine()
    return [
        encode_output(o)
        for i, line in enumerate(lines)
        for o in engine.process_raw(line, Source("replay", -1, i))
    ]


def identities(records: list[bytes]) -> Counter[str]:
    """The outputs' identities, counted."""
    return Counter(identity(r) for r in records)
