"""The one pipeline helper of the tests that run real ``spanguard worker`` processes
on a broker (tests/kafka, tests/fleet, tests/reliability, tests/sdk), and the replay
references they compare the workers' outputs with.

The ``pipeline`` fixture (tests/conftest.py) gives each test a fresh one on the
session's broker; tests on another broker (SASL, a broker of their own) build one.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.schemas.codec import encode_output
from spanguard.streams.app.processes import WorkerProcess, spawn_worker
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.keys import line_partition
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.runtime.testing import output_identity

Done = Callable[[list[bytes]], bool]


@dataclass
class Pipeline:
    """A topic prefix, a consumer group and the workers running on them.

    ``settings`` override the workers' environment (see :meth:`env`); with
    ``journal`` each worker keeps an ack journal next to its log.
    """

    bootstrap: str
    prefix: str
    tmp: Path
    settings: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)
    journal: bool = True

    def env(self, name: str) -> dict[str, str]:
        """Worker ``name``'s environment: no web server, no fleet monitoring (these tests
        compare outputs with replay, which makes no fleet alerts), then ``settings``."""
        env = {
            "SPANGUARD_BROKER": f"kafka://{self.bootstrap}",
            "SPANGUARD_TOPIC_PREFIX": self.prefix,
            "SPANGUARD_APP_ID": f"{self.prefix}-app",
            "SPANGUARD_DATA_DIR": str(self.tmp / f"data-{name}"),
            "SPANGUARD_WEB_ENABLED": "false",
            "SPANGUARD_SESSION_TIMEOUT": "3",
            "SPANGUARD_FLEET": '{"enabled": false}',
        }
        if self.journal:
            env["SPANGUARD_ACK_JOURNAL"] = str(self._journal(name))
        env.update(self.settings)
        return env

    def _journal(self, name: str) -> Path:
        return self.tmp / f"journal-{name}.jsonl"

    def start_worker(
        self, name: str, *args: str, env: Mapping[str, str] | None = None
    ) -> WorkerProcess:
        """Start worker ``name`` (``env``: this worker's own settings, over the others)."""
        worker = spawn_worker(
            name,
            {**self.env(name), **(env or {})},
            self.tmp / f"worker-{name}.log",
            cwd=self.tmp,
            journal=self._journal(name) if self.journal else None,
            args=args,
        )
        self.workers.append(worker)
        return worker

    def stop_all(self) -> None:
        """Kill every worker this pipeline started."""
        for worker in self.workers:
            worker.kill()

    def topic(self, suffix: str) -> str:
        """The full name of topic ``<prefix>.<suffix>``."""
        return f"{self.prefix}.{suffix}"

    def produce(self, lines: Iterable[bytes]) -> int:
        """Produce ``lines`` to the input topic, keyed by session."""
        return asyncio.run(produce_lines(self.bootstrap, self.topic("events"), list(lines)))

    def processes_like_replay(
        self, name: str, lines: list[bytes], *args: str
    ) -> tuple[WorkerProcess, list[bytes]]:
        """Start worker ``name`` (command line ``args``), produce ``lines`` and read until
        every output of their replay came; fails unless the worker's outputs are exactly
        the replay's (by identity). Returns the worker and its outputs."""
        expected = set(identities(replay_outputs(lines)))
        worker = self.start_worker(name, *args)
        worker.wait_ready()
        self.produce(lines)
        got = self.read_settled(has_ids(expected))
        assert set(identities(got)) == expected
        return worker, got

    def wait_committed(self, timeout: float = 120.0) -> None:
        """Wait until the workers' group has committed every input offset: all of it is
        processed, its outputs acknowledged and its changelog flushed."""
        asyncio.run(self._wait_committed(timeout))

    def data_path(self) -> tuple[str, str]:
        """The workers' input topic and consumer group."""
        return self.topic("events"), f"{self.prefix}-app"

    async def _wait_committed(
        self, timeout: float, consumed: tuple[str, str] | None = None
    ) -> None:
        """Wait until group ``consumed[1]`` committed every offset of topic ``consumed[0]``
        (default: :meth:`data_path`) with a record after it: what is left past its offsets,
        up to the (last stable) end offsets of the start, is no record it would read. A
        transactional writer's commit marker, which the group's consumers never return
        and so need not commit past, is left."""
        topic, group = consumed or self.data_path()
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        await admin.start()
        await consumer.start()
        try:
            # partitions from the admin client: a fresh consumer has no metadata yet, and
            # an empty list would make the wait below pass without checking anything
            [described] = await admin.describe_topics([topic])
            parts = [TopicPartition(topic, p["partition"]) for p in described["partitions"]]
            assert parts, f"{topic} has no partitions"
            ends = await consumer.end_offsets(parts)
            consumer.assign(parts)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    committed = await admin.list_consumer_group_offsets(group)
                except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
                    committed = {}  # the offsets topic is still being made: nothing yet
                done_to = {tp: max(committed[tp].offset, 0) for tp in ends if tp in committed}
                behind = {tp: done_to.get(tp, 0) for tp, end in ends.items()}
                behind = {tp: since for tp, since in behind.items() if ends[tp] > since}
                # a partition that never had input has nothing to commit
                if not [
                    tp
                    for tp, since in behind.items()
                    if await _has_records(consumer, tp, since, ends[tp], deadline)
                ]:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{group}: offsets of {topic} not committed after {timeout:.0f} s:"
                        f" {committed}, ends {ends}"
                    )
                await asyncio.sleep(0.2)
        finally:
            await consumer.stop()
            await admin.close()

    def read_until(self, done: Done, timeout: float = 120.0) -> list[bytes]:
        """Read every output topic from the beginning until ``done(records)`` holds, then
        on to the topics' end offsets of that moment (no waiting for silence); fail after
        ``timeout``. For a check that an output came *once*, or that nothing else came,
        use :meth:`read_settled`."""
        return self.read_topics(self.output_topics(), done, timeout)

    def read_settled(self, done: Done, timeout: float = 120.0) -> list[bytes]:
        """:meth:`read_until`, but before taking the end offsets wait until the workers'
        group has committed every input offset (:meth:`wait_committed`): every output the
        input makes (a late duplicate or an extra included) is written by then, and read."""
        return self.read_topics(self.output_topics(), done, timeout, settle=[self.data_path()])

    def output_topics(self) -> list[str]:
        return [self.topic(s) for s in OUTPUT_SUFFIXES]

    def read_topics(
        self,
        topics: list[str],
        done: Done,
        timeout: float = 120.0,
        describe: Callable[[list[bytes]], str] = lambda records: f"{len(records)} records",
        settle: Sequence[tuple[str, str]] = (),
    ) -> list[bytes]:
        """:meth:`read_until` for ``topics``; the failure says ``describe(records)``. Once
        done, and before taking the end offsets, wait for each ``(topic, group)`` of
        ``settle`` in turn: the group has committed every offset of the topic
        (:meth:`read_settled` settles on :meth:`data_path`)."""
        return asyncio.run(self._read_topics(topics, done, timeout, describe, settle))

    async def _read_topics(
        self,
        topics: list[str],
        done: Done,
        timeout: float,
        describe: Callable[[list[bytes]], str],
        settle: Sequence[tuple[str, str]],
    ) -> list[bytes]:
        records: list[bytes] = []
        deadline = time.monotonic() + timeout
        consumer = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=self.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",  # end offsets are the last stable offsets
            metadata_max_age_ms=2000,
        )
        await consumer.start()
        try:
            ends: dict[TopicPartition, int] | None = None
            while True:
                batch = await consumer.getmany(timeout_ms=250, max_records=5000)
                for _, got in sorted(batch.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
                    records.extend(r.value or b"" for r in got)
                assigned = consumer.assignment()
                # every topic's partitions, or a topic not yet assigned would be skipped
                if ends is None and {tp.topic for tp in assigned} >= set(topics) and done(records):
                    for consumed in settle:
                        left = max(deadline - time.monotonic(), 1.0)
                        await self._wait_committed(left, consumed)
                    ends = await consumer.end_offsets(list(assigned))
                if ends is not None and all(
                    [await consumer.position(tp) >= end for tp, end in ends.items()]
                ):
                    return records
                if time.monotonic() > deadline:
                    state = "done, not yet at the end offsets" if ends else "not done"
                    raise AssertionError(
                        f"incomplete after {timeout}s ({state}): {describe(records)}"
                    )
        finally:
            await consumer.stop()


async def _has_records(
    consumer: AIOKafkaConsumer, tp: TopicPartition, since: int, end: int, deadline: float
) -> bool:
    """Whether ``tp`` holds a record ``consumer`` returns between ``since`` and ``end``."""
    consumer.seek(tp, since)
    while await consumer.position(tp) < end:
        if (await consumer.getmany(tp, timeout_ms=200)).get(tp):
            return True
        if time.monotonic() > deadline:
            raise AssertionError(f"{tp}: could not read from {since} to {end}")
    return False


def has_ids(expected: set[str]) -> Done:
    """Done when every expected output identity has been read."""
    return lambda records: expected <= {identity(r) for r in records}


identity = output_identity
"""An output's id; for dead letters their reason and raw input (the runtime driver's)."""


def identities(records: list[bytes]) -> Counter[str]:
    """The outputs' identities, counted."""
    return Counter(identity(r) for r in records)


def replay_outputs(lines: list[bytes], partitions: int = 0) -> list[bytes]:
    """What ``spanguard replay [--partitions N]`` outputs for ``lines``, as bytes on the
    wire (with ``partitions``, one engine and one expiry clock per input partition)."""
    engines: dict[int, Engine] = {}
    outputs: list[bytes] = []
    for i, line in enumerate(lines):
        partition = line_partition(line, partitions) if partitions else -1
        engine = engines.setdefault(partition, Engine())
        outputs.extend(
            encode_output(o) for o in engine.process_raw(line, Source("replay", partition, i))
        )
    return outputs
