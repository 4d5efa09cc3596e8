"""A soak of months: never-closed sessions through one real worker, sampled as it goes.

    .venv/bin/python -m bench.soak                       # 1,000,000 sessions over 30 days
    .venv/bin/python -m bench.soak --sessions 5000       # a quick one

``--sessions`` simulated sessions open evenly over ``--days`` days of event time
(issue 22, item 4). None sends ``session.closed``. Each opens with two
``span.added``, a ``scores.computed`` and, one in four, an ``eviction.requested``;
one in ten comes back after 20 h (still live under the 24 h ``idle_timeout``: a
``span.added`` and a ``scores.computed``), one in ten after 30 h (expired: its
``span.added`` is refused ``SESSION_EXPIRED``). The trace is generated lazily and
deterministically (``--seed``), produced keyed by session to a broker of the soak's
own (the project's local broker on free ports) and, line by line, replayed in
this process with one engine per partition (``spanguard replay --partitions N``).

At 25, 50, 75 and 100% of the sessions opened, once the worker has committed every
input record, the soak samples:

* the worker's RSS (``/proc/<pid>/status``);
* its live sessions (``spanguard_live_sessions`` on ``/metrics``) beside replay's
  and the sessions with an event in the last ``idle_timeout`` of their partition's
  clock (the bound);
* the changelog's bytes on disk (the ``.log`` segments in the broker's log dir),
  once the log cleaner has caught up with every segment but the active one. The
  soak creates the changelog itself with ``segment.ms``/``segment.bytes`` small,
  ``min.cleanable.dirty.ratio`` 0.01 and ``min.compaction.lag.ms`` 0, so the cleaner
  keeps up, and ``delete.retention.ms`` 60 s so tombstones leave soon after;
* a fresh worker's start-to-ready time: a second worker (empty data dir) joins the
  group, takes its share of the partitions and restores them from the changelog;
  it is stopped at once and the first worker takes its partitions back. This is
  done three times (``fresh_tries``) and the fastest counts: a busy machine only
  ever adds to a start.

At the end every output topic is read and compared with replay (identities of every
output, dead letters by reason and raw input). Printed: a table and the targets,
met or not. Results: ``bench/results/soak.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import os
import random
import tempfile
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from spanguard.schemas import OUTPUT_SUFFIXES, text_sha256
from spanguard.schemas.codec import encode_output
from spanguard.streams.app.processes import WorkerProcess, spawn_worker
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.outputs import OutputReader
from spanguard.streams.kafka_io.partitioning import partition_for
from spanguard.streams.kafka_io.producer import murmur2_partitioner
from spanguard.streams.kafka_io.topics import ensure_topics
from spanguard.streams.localbroker.broker import DEFAULT_HOME, LocalBroker, free_ports
from spanguard.streams.runtime.config import changelog_topic
from spanguard.streams.runtime.testing import output_identity
from spanguard.streams.settings import load_settings

RESULTS = Path(__file__).resolve().parent / "results"
START = datetime(2026, 3, 1, tzinfo=UTC)
"""Event time of the first session: in the past, so that no broker timestamp clamps the
partitions' clocks (``max_clock_skew``) and Kafka expires exactly as replay does."""
HOUR_MS = 3600 * 1000
Line = tuple[str, int, bytes]
"""(session id, event time in ms, the JSON line)."""
CHANGELOG_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "20000",
    "segment.bytes": str(1024 * 1024),
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "60000",
    "max.message.bytes": str(8 * 1024 * 1024),
}
"""The soak's changelog: segments roll every 20 s (or 1 MB) and the cleaner takes
any dirty share, so the bytes on disk follow the live state. A tombstone stays a
minute after its segment is cleaned (a restore takes less)."""


@dataclass
class SoakPlan:
    """What one soak does."""

    sessions: int = 1_000_000
    days: float = 30.0
    partitions: int = 4
    seed: int = 22
    resume_live: float = 0.1
    """Share of sessions that come back after 20 h (still live)."""
    resume_expired: float = 0.1
    """Share of sessions that come back after 30 h (expired by then)."""
    evict_every: int = 4
    samples: tuple[int, ...] = (25, 50, 75, 100)
    fresh_worker: tuple[int, ...] = (25, 50, 75, 100)
    """The samples at which a fresh worker's start to ready is timed."""
    fresh_tries: int = 3
    """Fresh workers started one after the other at each timed sample; the fastest is
    the sample's figure. Other jobs on the machine only ever add to a start, so the
    fastest of a few is the state's own cost, where one start is also the load's."""
    guarantee: str = "at_least_once"
    fleet: bool = True
    """Fleet monitoring on in the worker (as shipped)."""
    batch: int = 20_000
    """Lines produced (and replayed) per round."""
    ready_timeout: float = 600.0
    commit_timeout: float = 1800.0
    cleaner_timeout: float = 300.0


# -- traffic ------------------------------------------------------------------


def _ts(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class SoakTraffic:
    """The soak's trace, generated in event-time order as sessions open.

    Session ``i`` opens at ``START + i * days / sessions``; the resumptions due by
    then come first. :meth:`until` yields the lines up to a number of sessions opened,
    so the trace can be cut at the sample points and resumed.
    """

    def __init__(self, plan: SoakPlan) -> None:
        self.plan = plan
        self.opened = 0
        self.events = 0
        self._rng = random.Random(plan.seed)
        self._start_ms = int(START.timestamp() * 1000)
        self._span_ms = int(plan.days * 24 * HOUR_MS)
        self._resumes: list[tuple[int, int, int]] = []
        """(due ms, session, seq) of the sessions that will come back."""
        self.last_ms = self._start_ms

    def session_id(self, i: int) -> str:
        return f"soak-{i:07d}"

    def tenant(self, i: int) -> str:
        return f"t{i % 5}"

    def _line(self, i: int, seq: int, ms: int, type_: str, **fields: Any) -> Line:
        self.events += 1
        self.last_ms = max(self.last_ms, ms)
        sid = self.session_id(i)
        return (
            sid,
            ms,
            orjson.dumps(
                {
                    "type": type_,
                    "schema_version": 1,
                    "event_id": f"{sid}-e{seq}",
                    "session_id": sid,
                    "tenant": self.tenant(i),
                    "seq": seq,
                    "turn": seq // 3,
                    "ts": _ts(ms),
                    **fields,
                }
            ),
        )

    def _span(self, i: int, seq: int, ms: int, span: str, text: str, role: str) -> Line:
        return self._line(
            i,
            seq,
            ms,
            "span.added",
            span_id=span,
            position=seq,
            tokens=len(text.split()),
            role=role,
            text=text,
        )

    def _scores(self, i: int, seq: int, ms: int, scores: list[tuple[str, str, float]]) -> Line:
        entries = [
            {
                "score_id": f"sc-{seq}-{n}",
                "span_id": span,
                "score": value,
                "text_sha256": text_sha256(text),
            }
            for n, (span, text, value) in enumerate(scores)
        ]
        return self._line(i, seq, ms, "scores.computed", scorer="relevance-v1", scores=entries)

    def _open(self, i: int) -> Iterator[Line]:
        ms = self._start_ms + i * self._span_ms // self.plan.sessions
        system = f"You are agent {i % 50} of tenant {self.tenant(i)}; answer briefly."
        user = f"Customer {i} asks where order {100000 + i} is and when it ships."
        yield self._span(i, 0, ms, "a0", system, "system")
        yield self._span(i, 1, ms + 1000, "a1", user, "user")
        yield self._scores(i, 2, ms + 2000, [("a0", system, 0.9), ("a1", user, 0.2)])
        seq = 3
        if i % self.plan.evict_every == 0:
            yield self._line(
                i,
                3,
                ms + 3000,
                "eviction.requested",
                request_id="req-1",
                policy={"threshold": 0.5},
            )
            seq = 4
        draw = self._rng.random()
        if draw < self.plan.resume_live:
            heapq.heappush(self._resumes, (ms + 20 * HOUR_MS, i, seq))
        elif draw < self.plan.resume_live + self.plan.resume_expired:
            heapq.heappush(self._resumes, (ms + 30 * HOUR_MS, i, seq))

    def _resume(self, due: int, i: int, seq: int) -> Iterator[Line]:
        text = f"Customer {i} is back: any news on order {100000 + i}?"
        yield self._span(i, seq, due, "a2", text, "user")
        yield self._scores(i, seq + 1, due + 1000, [("a2", text, 0.8)])

    def until(self, opened: int) -> Iterator[Line]:
        """(session, ts in ms, line) of the lines until session ``opened`` opens."""
        while self.opened < min(opened, self.plan.sessions):
            i = self.opened
            at = self._start_ms + i * self._span_ms // self.plan.sessions
            while self._resumes and self._resumes[0][0] <= at:
                yield from self._resume(*heapq.heappop(self._resumes))
            yield from self._open(i)
            self.opened += 1


# -- replay, alongside ----------------------------------------------------------


@dataclass
class Replay:
    """``spanguard replay --partitions N`` of the lines seen so far, and the sessions
    each partition saw in the last ``idle_timeout`` of its clock."""

    partitions: int
    engines: dict[int, Engine] = field(default_factory=dict)
    outputs: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    _recent: dict[int, deque[tuple[int, str]]] = field(default_factory=dict)
    _recent_count: dict[int, Counter[str]] = field(default_factory=dict)

    def feed(self, session: str, ms: int, line: bytes) -> None:
        partition = partition_for(session.encode(), self.partitions)
        engine = self.engines.get(partition)
        if engine is None:
            engine = self.engines[partition] = Engine()
        for output in engine.process_raw(line, Source("replay", partition, self.lines)):
            self.outputs[output_identity(encode_output(output))] += 1
        self.lines += 1
        self._recent.setdefault(partition, deque()).append((ms, session))
        self._recent_count.setdefault(partition, Counter())[session] += 1

    @property
    def live(self) -> int:
        return sum(len(e.sessions) for e in self.engines.values())

    @property
    def expired(self) -> int:
        return sum(e.stats.sessions_expired for e in self.engines.values())

    def active(self) -> int:
        """Sessions with an event at or after their partition's clock - ``idle_timeout``
        (a live session can be no other)."""
        total = 0
        for partition, engine in self.engines.items():
            clock = engine.lifetimes.clock
            recent = self._recent[partition]
            counts = self._recent_count[partition]
            if clock is not None:
                horizon = (clock - engine.settings.idle_timeout).timestamp() * 1000
                while recent and recent[0][0] < horizon:
                    _, session = recent.popleft()
                    counts[session] -= 1
                    if not counts[session]:
                        del counts[session]
            total += len(counts)
        return total


# -- the broker side --------------------------------------------------------------


@dataclass
class Sample:
    """One row of the soak's table."""

    percent: int
    sessions_opened: int
    events: int
    event_time: str
    worker_rss_mb: float
    live_sessions: int
    replay_live_sessions: int
    active_in_idle_timeout: int
    sessions_expired: int
    """Sessions expired so far (replay's count; Kafka's outputs equal replay's)."""
    worker_expired_metric: int
    """``spanguard_sessions_expired`` of the worker (its engines count from their
    last assignment: partitions it gave the fresh worker start again at 0)."""
    changelog_bytes: int
    changelog_cleaned: bool
    fresh_worker_ready_s: float | None
    """From the fresh worker's ``Worker: Starting`` to its ``Worker: Ready`` (its log),
    the fastest of ``fresh_tries``."""
    fresh_worker_spawn_to_ready_s: float | None
    """From its spawn (interpreter start and imports included) to ready, of that worker."""
    fresh_worker_ready_tries: list[float]
    """Every try's ``Starting`` to ``Ready``, in order."""
    fresh_worker_restored: list[str]
    wall_s: float


def _logged_at(line: str) -> datetime:
    """The time at the head of a worker's log line (``[2026-12-03 13:15:39,483] ...``)."""
    return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid`` in MB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for {pid}")


def scrape(port: int) -> dict[str, float]:
    """The worker's unlabelled metrics (name -> value) from ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    figures: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                figures[name] = float(value)
    return figures


def changelog_on_disk(log_dir: Path, topic: str, partitions: int) -> tuple[int, bool]:
    """(bytes of the changelog's ``.log`` segments, whether the cleaner has cleaned
    every segment but the active one of each partition)."""
    checkpoint: dict[int, int] = {}
    point = log_dir / "cleaner-offset-checkpoint"
    if point.is_file():
        for line in point.read_text().splitlines()[2:]:
            name, part, offset = line.rsplit(" ", 2)
            if name == topic:
                checkpoint[int(part)] = int(offset)
    size = 0
    cleaned = True
    for p in range(partitions):
        segments = sorted((log_dir / f"{topic}-{p}").glob("*.log"))
        size += sum(s.stat().st_size for s in segments)
        if len(segments) > 1 and checkpoint.get(p, 0) < int(segments[-1].stem):
            cleaned = False
    return size, cleaned


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> bool:
    """Whether ``group`` has committed every record of ``topic``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await admin.start()
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(parts)
        offsets = await admin.list_consumer_group_offsets(group, partitions=parts)
        return all(
            end == 0 or (tp in offsets and offsets[tp].offset >= end) for tp, end in ends.items()
        )
    finally:
        await consumer.stop()
        await admin.close()


class Soak:
    """One soak on the broker at ``bootstrap`` whose log dir is ``log_dir``."""

    def __init__(
        self, plan: SoakPlan, bootstrap: str, log_dir: Path | None, home: Path, prefix: str
    ) -> None:
        """``log_dir``: the broker's log dir (None: a broker elsewhere, the changelog's
        bytes are not measured)."""
        self.plan = plan
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.home = home
        self.prefix = prefix
        self.app = f"{prefix}-app"
        self.changelog = changelog_topic(self.app)
        self.traffic = SoakTraffic(plan)
        self.replay = Replay(plan.partitions)
        self.samples: list[Sample] = []
        self._workers = 0
        self._started = time.monotonic()

    def env(self, name: str, web_port: int) -> dict[str, str]:
        fleet = "true" if self.plan.fleet else "false"
        return {
            "SPANGUARD_BROKER": f"kafka://{self.bootstrap}",
            "SPANGUARD_TOPIC_PREFIX": self.prefix,
            "SPANGUARD_APP_ID": self.app,
            "SPANGUARD_PARTITIONS": str(self.plan.partitions),
            "SPANGUARD_DATA_DIR": str(self.home / f"data-{name}"),
            "SPANGUARD_WEB_ENABLED": "true",
            "SPANGUARD_WEB_PORT": str(web_port),
            "SPANGUARD_SESSION_TIMEOUT": "6",
            "SPANGUARD_PROCESSING_GUARANTEE": self.plan.guarantee,
            "SPANGUARD_FLEET": f'{{"enabled": {fleet}}}',
        }

    def spawn(self, name: str) -> tuple[WorkerProcess, int]:
        [port] = free_ports(1)
        self._workers += 1
        worker = spawn_worker(name, self.env(name, port), self.home / f"{self.prefix}-{name}.log")
        return worker, port

    async def create_topics(self) -> None:
        settings = load_settings(
            broker=f"kafka://{self.bootstrap}",
            topic_prefix=self.prefix,
            partitions=self.plan.partitions,
        )
        await ensure_topics(settings)
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(self.changelog, self.plan.partitions, 1, topic_configs=CHANGELOG_CONFIGS)]
            )
        finally:
            await admin.close()

    async def produce(self, producer: AIOKafkaProducer, upto: int) -> None:
        """Produce (and replay) the lines until ``upto`` sessions have opened."""
        topic = f"{self.prefix}.events"
        pending = []
        for session, ms, line in self.traffic.until(upto):
            self.replay.feed(session, ms, line)
            pending.append(await producer.send(topic, line, key=session.encode()))
            if len(pending) >= self.plan.batch:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)

    def wait_committed(self) -> None:
        deadline = time.monotonic() + self.plan.commit_timeout
        topic = f"{self.prefix}.events"
        while not asyncio.run(committed(self.bootstrap, self.app, topic, self.plan.partitions)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"input not committed after {self.plan.commit_timeout}s")
            time.sleep(0.5)

    def wait_cleaned(self) -> tuple[int, bool]:
        if self.log_dir is None:
            return -1, False
        deadline = time.monotonic() + self.plan.cleaner_timeout
        while True:
            size, cleaned = changelog_on_disk(self.log_dir, self.changelog, self.plan.partitions)
            if cleaned or time.monotonic() > deadline:
                return size, cleaned
            time.sleep(1)

    def fresh_worker(self) -> tuple[float, float, list[str]]:
        """Start a second worker (empty data dir) in the group: seconds from spawn to
        ready, from its log's ``Worker: Starting`` to ``Worker: Ready`` (without the
        interpreter's start and imports, which a loaded machine stretches), and its
        restore lines. It is stopped again at once."""
        t0 = time.monotonic()
        worker, _ = self.spawn(f"fresh{self._workers}")
        try:
            worker.wait_ready(timeout=self.plan.ready_timeout)
            ready = time.monotonic() - t0
        finally:
            worker.stop()
        log = worker.log_text().splitlines()
        started = next(_logged_at(line) for line in log if "[^Worker]: Starting" in line)
        logged = next(_logged_at(line) for line in log if "[^Worker]: Ready" in line)
        restored = [line.split("spanguard: ", 1)[-1] for line in log if "restored:" in line]
        return round(ready, 2), round((logged - started).total_seconds(), 2), restored

    def run(self) -> list[Sample]:
        asyncio.run(self.create_topics())
        worker, port = self.spawn("main")
        try:
            worker.wait_ready(timeout=self.plan.ready_timeout)
            for percent in self.plan.samples:
                upto = self.plan.sessions * percent // 100
                asyncio.run(self._produce_until(upto))
                self.wait_committed()
                self.samples.append(self.sample(percent, worker, port))
                _print_row(self.samples[-1])
            self.wait_committed()
        finally:
            worker.stop()
        return self.samples

    async def _produce_until(self, upto: int) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=20,
            partitioner=murmur2_partitioner,
        )
        await producer.start()
        try:
            await self.produce(producer, upto)
        finally:
            await producer.stop()

    def sample(self, percent: int, worker: WorkerProcess, port: int) -> Sample:
        metrics = scrape(port) if self.plan.fleet else {}
        rss = rss_mb(worker.process.pid)
        size, cleaned = self.wait_cleaned()
        tries = (
            [self.fresh_worker() for _ in range(self.plan.fresh_tries)]
            if percent in self.plan.fresh_worker
            else []
        )
        spawned, ready, restored = min(tries, key=lambda t: t[1]) if tries else (None, None, [])
        return Sample(
            percent=percent,
            sessions_opened=self.traffic.opened,
            events=self.traffic.events,
            event_time=_ts(self.traffic.last_ms),
            worker_rss_mb=rss,
            live_sessions=int(metrics.get("spanguard_live_sessions", -1)),
            replay_live_sessions=self.replay.live,
            active_in_idle_timeout=self.replay.active(),
            sessions_expired=self.replay.expired,
            worker_expired_metric=int(metrics.get("spanguard_sessions_expired_total", -1)),
            changelog_bytes=size,
            changelog_cleaned=cleaned,
            fresh_worker_ready_s=ready,
            fresh_worker_spawn_to_ready_s=spawned,
            fresh_worker_ready_tries=[t[1] for t in tries],
            fresh_worker_restored=restored,
            wall_s=round(time.monotonic() - self._started, 1),
        )

    def kafka_outputs(self, settle: float = 5.0, timeout: float = 600.0) -> Counter[str]:
        """Every output the workers wrote (alerts aside: replay makes none), by identity,
        read until every output of replay is there and nothing came for ``settle`` s."""
        return asyncio.run(self._read(settle, timeout))

    async def _read(self, settle: float, timeout: float) -> Counter[str]:
        topics = [f"{self.prefix}.{s}" for s in OUTPUT_SUFFIXES if s != "alerts"]
        wanted = set(self.replay.outputs)
        got: Counter[str] = Counter()
        deadline = time.monotonic() + timeout
        async with OutputReader(self.bootstrap, topics) as reader:
            last = time.monotonic()
            while time.monotonic() < deadline:
                records = await reader.poll(timeout_ms=500)
                if records:
                    last = time.monotonic()
                    got.update(output_identity(r.value) for r in records)
                    continue
                # the workers are stopped: every output is in its topic already
                idle = time.monotonic() - last
                if idle > 4 * settle or (idle > settle and wanted <= got.keys()):
                    break
        return got


# -- verdicts -------------------------------------------------------------------


@dataclass
class Verdict:
    target: str
    figure: str
    met: bool


def verdicts(samples: list[Sample], kafka: Counter[str], replay: Counter[str]) -> list[Verdict]:
    """The issue's targets against the samples, and Kafka against replay."""
    by = {s.percent: s for s in samples}
    rows: list[Verdict] = []
    half, full = by.get(50), by.get(100)
    if half and full:
        ratio = full.worker_rss_mb / half.worker_rss_mb
        rows.append(Verdict("RSS at 100% <= 1.2x RSS at 50%", f"{ratio:.2f}x", ratio <= 1.2))
        if half.changelog_bytes > 0:
            ratio = full.changelog_bytes / half.changelog_bytes
            rows.append(Verdict("changelog at 100% <= 1.5x at 50%", f"{ratio:.2f}x", ratio <= 1.5))
        if half.fresh_worker_ready_s and full.fresh_worker_ready_s:
            ratio = full.fresh_worker_ready_s / half.fresh_worker_ready_s
            rows.append(
                Verdict("fresh worker ready at 100% <= 1.5x at 50%", f"{ratio:.2f}x", ratio <= 1.5)
            )
    bounded = all(0 <= s.live_sessions <= s.active_in_idle_timeout for s in samples)
    rows.append(
        Verdict(
            "live sessions <= sessions active in the last idle_timeout",
            ", ".join(f"{s.live_sessions}<={s.active_in_idle_timeout}" for s in samples),
            bounded,
        )
    )
    same = set(kafka) == set(replay)
    missing = len(set(replay) - set(kafka))
    extra = len(set(kafka) - set(replay))
    duplicates = sum(n - 1 for n in kafka.values() if n > 1)
    rows.append(
        Verdict(
            "Kafka == replay --partitions N",
            f"{len(replay)} outputs, missing {missing}, extra {extra}, duplicates {duplicates}",
            same,
        )
    )
    return rows


def _print_row(s: Sample) -> None:
    ready = (
        "-"
        if s.fresh_worker_ready_s is None
        else f"{s.fresh_worker_ready_s:.1f} s (spawn {s.fresh_worker_spawn_to_ready_s:.1f}, "
        f"tries {'/'.join(f'{t:.1f}' for t in s.fresh_worker_ready_tries)})"
    )
    print(
        f"{s.percent:>4}% {s.sessions_opened:>9,} sessions {s.events:>10,} events "
        f"{s.event_time[:16]}  rss {s.worker_rss_mb:>7.1f} MB  live {s.live_sessions:>8,} "
        f"(replay {s.replay_live_sessions:,}, active {s.active_in_idle_timeout:,})  "
        f"expired {s.sessions_expired:>8,}  changelog {s.changelog_bytes / 1e6:>7.1f} MB"
        f"{'' if s.changelog_cleaned else ' (cleaner behind)'}  fresh ready {ready}  "
        f"[{s.wall_s:.0f} s]",
        flush=True,
    )


def run_soak(
    plan: SoakPlan, bootstrap: str, log_dir: Path | None, home: Path, prefix: str
) -> dict[str, Any]:
    """One soak on a running broker; its samples, verdicts and rates."""
    soak = Soak(plan, bootstrap, log_dir, home, prefix)
    started = time.monotonic()
    samples = soak.run()
    kafka = soak.kafka_outputs()
    seconds = time.monotonic() - started
    rows = verdicts(samples, kafka, soak.replay.outputs)
    return {
        "plan": asdict(plan),
        "samples": [asdict(s) for s in samples],
        "verdicts": [asdict(v) for v in rows],
        "events": soak.traffic.events,
        "outputs": sum(soak.replay.outputs.values()),
        "seconds": round(seconds, 1),
        "sessions_per_s": round(plan.sessions / seconds, 1),
        "events_per_s": round(soak.traffic.events / seconds, 1),
    }


def main() -> None:
    """Command line: start a broker of the soak's own, run, print, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=SoakPlan.sessions)
    parser.add_argument("--days", type=float, default=SoakPlan.days)
    parser.add_argument("--partitions", type=int, default=SoakPlan.partitions)
    parser.add_argument("--seed", type=int, default=SoakPlan.seed)
    parser.add_argument("--guarantee", default=SoakPlan.guarantee)
    parser.add_argument(
        "--fresh-tries",
        type=int,
        default=SoakPlan.fresh_tries,
        help="fresh workers started at each timed sample, the fastest counts",
    )
    parser.add_argument("--no-fleet", action="store_true", help="fleet monitoring off")
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    parser.add_argument("--keep", type=Path, help="keep the broker and worker logs here")
    args = parser.parse_args()
    plan = SoakPlan(
        sessions=args.sessions,
        days=args.days,
        partitions=args.partitions,
        seed=args.seed,
        guarantee=args.guarantee,
        fresh_tries=args.fresh_tries,
        fleet=not args.no_fleet,
    )
    with tempfile.TemporaryDirectory(prefix="spanguard-soak-", ignore_cleanup_errors=True) as tmp:
        home = args.keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        port, controller = free_ports(2)
        broker = LocalBroker(
            home=home / "kafka",
            port=port,
            controller_port=controller,
            lib_dir=DEFAULT_HOME / "lib",
            stop_with_parent=True,
        )
        broker.fetch()
        bootstrap = broker.start(timeout=120)
        try:
            result = run_soak(plan, bootstrap, broker.data_dir, home, "soak")
        finally:
            broker.stop()
    result["command"] = "python -m bench.soak " + " ".join(
        f"--{k} {v}" for k, v in (("sessions", plan.sessions), ("days", plan.days))
    )
    result["cpus"] = os.cpu_count()
    print(f"{result['events']:,} events, {result['outputs']:,} outputs in {result['seconds']} s")
    for row in result["verdicts"]:
        print(f"{'met' if row['met'] else 'NOT MET':>8}  {row['target']}: {row['figure']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    raise SystemExit(0 if all(r["met"] for r in result["verdicts"]) else 1)


if __name__ == "__main__":
    main()
