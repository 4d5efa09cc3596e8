"""Drive the real runtime without a broker, in the spirit of Kafka Streams'
``TopologyTestDriver``: produce input lines, run until everything is
checkpointed, read the outputs; crash the worker before any write and restart
it, as often as you like.

    driver = RuntimeTestDriver(exactly_once=True)
    driver.produce(lines)
    await driver.run(crash_at=[17, 40])
    assert driver.output_ids() == replay_ids(lines)

``ack_turns`` makes the broker acknowledge outputs late, so that batches overlap
(the next is processed while the last one's outputs wait), and ``lose_unacked``
makes a crash lose the outputs not acknowledged yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import orjson

from spanguard.schemas import ID_FIELD, OUTPUT_SUFFIXES
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.kafka_io.partitioning import partition_for
from spanguard.streams.runtime.config import RuntimeConfig
from spanguard.streams.runtime.memory import Crash, MemoryBroker, MemoryTransport, Stored
from spanguard.streams.runtime.ports import FleetHook
from spanguard.streams.runtime.runtime import Runtime


def session_key(line: bytes) -> bytes | None:
    """The record key a well-behaved producer gives a line: its session_id."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    session = data.get("session_id") if isinstance(data, dict) else None
    return session.encode("utf-8") if isinstance(session, str) else None


class RuntimeTestDriver:
    """One in-memory broker and the runtime(s) that process its input topic."""

    def __init__(
        self,
        *,
        partitions: int = 4,
        exactly_once: bool = False,
        batch_size: int = 7,
        commit_every: int = 5,
        engine_settings: EngineSettings | None = None,
        fleet: FleetHook | None = None,
        ack_turns: int = 0,
        lose_unacked: bool = False,
    ) -> None:
        self.broker = MemoryBroker(
            partitions=partitions, ack_turns=ack_turns, lose_unacked=lose_unacked
        )
        self.config = RuntimeConfig(
            input_topic="in",
            output_topics={s: f"out.{s}" for s in OUTPUT_SUFFIXES},
            changelog_topic="changelog",
            fleet_topic="fleet",
            exactly_once=exactly_once,
            batch_size=batch_size,
            poll_timeout=0,
            commit_interval=float("inf"),
            commit_every=commit_every,
            retry_backoff=Backoff(0.0, 0.0),
        )
        self.engine_settings = engine_settings or EngineSettings()
        self.fleet = fleet
        self.crashes = 0
        self.restarts = 0
        self.overlapped = 0
        """Batches sent while an earlier batch's outputs were unacknowledged (all runs)."""

    def produce(self, lines: Iterable[bytes], key: bytes | None = None) -> None:
        """Append lines to the input topic, keyed by session (or by ``key``)."""
        for line in lines:
            record_key = key if key is not None else session_key(line)
            partition = (
                0 if record_key is None else partition_for(record_key, self.broker.partitions)
            )
            self.broker.log(self.config.input_topic, partition).append(Stored(record_key, line))

    def new_runtime(self) -> tuple[Runtime, MemoryTransport]:
        """A fresh worker process (nothing carried over from a crashed one)."""
        transport = MemoryTransport(
            self.broker, self.config.input_topic, self.config.changelog_topic
        )
        return Runtime(
            self.config, transport, self.engine_settings, self.fleet, sleep=_no_sleep
        ), transport

    async def run(self, crash_at: Sequence[int] = (), max_steps: int = 100_000) -> None:
        """Process every input to the end, crashing before each given write number
        (counted over the whole run) and restarting a new worker each time."""
        crashes = sorted(crash_at)
        runtime, transport = await self._started()
        for _ in range(max_steps):
            if crashes and self.broker.crash_at is None and not self.broker.crashed:
                self.broker.crash_at = crashes.pop(0)
            try:
                await runtime.step()
                if await transport.lag(runtime.positions()) == 0:
                    await runtime.close()
                    if not self.broker.crashed:
                        self.overlapped += runtime.stats.overlapped
                        self.broker.crash_at = None
                        return
            except Crash:
                pass
            if self.broker.crashed:
                self.crashes += 1
                self.broker.crashed = False
                runtime.abandon()  # the process died: its background work dies with it
                self.overlapped += runtime.stats.overlapped
                runtime, transport = await self._started()
        raise AssertionError("the runtime did not finish")

    async def _started(self) -> tuple[Runtime, MemoryTransport]:
        while True:
            runtime, transport = self.new_runtime()
            try:
                await runtime.assign(range(self.broker.partitions))
                self.restarts += 1
                return runtime, transport
            except Crash:
                self.crashes += 1
                self.broker.crashed = False

    def outputs(self, committed_only: bool = True) -> list[bytes]:
        """Every output record (read committed, or everything ever written)."""
        read = self.broker.read_committed if committed_only else self.broker.read_all
        return [v for s in OUTPUT_SUFFIXES for v in read(self.config.output_topics[s])]


def output_identity(raw: bytes) -> str:
    """An output's id; for dead letters their reason and raw input (the source
    position differs between replay and the runtime)."""
    data = orjson.loads(raw)
    if data["type"] == "event.rejected":
        return f"rejected:{data['reason']}:{data['raw']}"
    return str(data[ID_FIELD[data["type"]]])


async def _no_sleep(_: float) -> None:
    return None
