"""Kill workers on a schedule while a simulated fleet streams in; compare with replay.

    .venv/bin/python -m bench.chaos                          # 2 workers, at-least-once
    .venv/bin/python -m bench.chaos --workers 1 --guarantee exactly_once --runs 10

Each run: a fresh topic prefix; ``--sessions`` simulated sessions spread over
``--hours`` hours of event time (72), with ``--idle-sessions`` sessions that go quiet
(contract 1.2's idle expiry, 24 h): a third come back after 30 h (expired, refused
``SESSION_EXPIRED``), a third after 20 h (still live), a third never (expired a day
later); their expiries fall between 34% and 88% of the trace, where the kills land;
all of it produced in
``--chunks`` chunks ``--chunk-gap`` seconds apart; every ``--kill-every`` seconds
one worker (round robin) gets SIGKILL and is restarted ``--restart-after``
seconds later. Once everything is produced and every worker is back, the output
topics are read (read committed) until every output replay makes is there or
``--settle`` seconds pass without news. Printed per run, against
``spanguard replay --partitions 4`` of the same trace (one expiry clock per partition):

* missing: outputs replay makes that never appeared;
* extra: outputs that replay does not make (diverged state);
* duplicate: outputs read more than once (must be 0 under exactly-once;
  at-least-once may repeat an output, with the same id, after a kill);
* stalled: sessions with a missing output;
* expired: sessions replay expired (``SESSION_EXPIRED``: the events refused so).

Results go to ``bench/results/chaos.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.e2e import Bench
from spanguard.schemas import ID_FIELD, OUTPUT_SUFFIXES
from spanguard.schemas.codec import encode_output
from spanguard.streams.app.processes import WorkerProcess, spawn_worker
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.kafka_io.keys import line_partition
from spanguard.streams.kafka_io.outputs import OutputReader
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.sim import SimConfig, simulate

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 4
EPOCH = datetime(2026, 6, 1, tzinfo=UTC)
"""Event time of the trace's start: in the past, so that the broker timestamps (now)
never clamp a partition's clock and Kafka expires as replay does."""


@dataclass
class ChaosResult:
    """One run's counts against replay."""

    workers: int
    guarantee: str
    sessions: int
    events: int
    expected: int
    kills: int
    missing: int
    extra: int
    duplicate: int
    stalled: int
    seconds: float
    expired: int = 0
    """Sessions replay expired (idle for more than idle_timeout)."""
    refused_expired: int = 0
    """Events replay refused ``SESSION_EXPIRED``."""

    @property
    def clean(self) -> bool:
        """No output missing or invented, no session stalled (and, under
        exactly-once, nothing read twice)."""
        dupes_ok = self.guarantee != "exactly_once" or self.duplicate == 0
        return self.missing == self.extra == self.stalled == 0 and dupes_ok


@dataclass
class ChaosPlan:
    """What one run does."""

    workers: int = 2
    guarantee: str = "at_least_once"
    sessions: int = 300
    seed: int = 11
    events_per_session: int = 60
    chunks: int = 10
    chunk_gap: float = 2.0
    kill_every: float = 8.0
    restart_after: float = 2.0
    settle: float = 30.0
    timeout: float = 300.0
    hours: float = 72.0
    """Event time the trace spans (0: the simulator's own, a few minutes)."""
    idle_sessions: int = 48


def identity(raw: bytes) -> tuple[str, str]:
    """(session, output id); dead letters by reason and raw input (their source
    position differs between replay and Kafka)."""
    data = orjson.loads(raw)
    session = str(data.get("session_id") or "")
    if data["type"] == "event.rejected":
        return session, f"rejected:{data['reason']}:{data['raw']}"
    return session, str(data[ID_FIELD[data["type"]]])


def replay(lines: list[bytes]) -> Counter[tuple[str, str]]:
    """Outputs of ``spanguard replay --partitions 4`` of ``lines``, by identity."""
    return replay_engines(lines)[0]


def replay_engines(lines: list[bytes]) -> tuple[Counter[tuple[str, str]], list[Engine]]:
    """Replay's outputs of ``lines`` (one engine and expiry clock per partition, as
    the workers have) and its engines."""
    engines = {p: Engine() for p in range(PARTITIONS)}
    outputs: Counter[tuple[str, str]] = Counter()
    for i, line in enumerate(lines):
        partition = line_partition(line, PARTITIONS)
        for o in engines[partition].process_raw(line, Source("replay", partition, i)):
            outputs[identity(encode_output(o))] += 1
    return outputs, list(engines.values())


def spread(lines: list[bytes], hours: float, idle_sessions: int) -> list[bytes]:
    """``lines`` spread evenly over ``hours`` of event time from :data:`EPOCH` (a line's
    ``ts`` becomes its place in the trace, so each session keeps its order), merged
    with ``idle_sessions`` sessions that have a turn every 2 hours and go quiet: one
    in three for 30 h (it comes back expired), one in three for 20 h (still live), the
    others for good (expired a day later, never back)."""
    step = timedelta(hours=hours) / max(1, len(lines))
    timed: list[tuple[datetime, int, bytes]] = []
    for j, line in enumerate(lines):
        at = EPOCH + step * j
        try:
            data = orjson.loads(line)
            datetime.fromisoformat(str(data["ts"]).replace("Z", "+00:00"))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            timed.append((at, len(timed), line))  # left as it is: its own dead letter
            continue
        data["ts"] = at.isoformat().replace("+00:00", "Z")
        timed.append((at, len(timed), orjson.dumps(data)))
    for i in range(idle_sessions):
        script = SessionScript(session_id=f"idle-{i:03d}", tenant=f"idle-{i % 3}")
        kind = i % 3
        # quiet from hour q on: the expiries fall all over the trace's second half
        q = 2 + (i * 7) % int(max(1, hours * 0.55))
        for hour in range(i % 2, int(hours), 2):
            quiet = (kind == 0 and q <= hour < q + 30) or (kind == 1 and q <= hour < q + 20)
            if quiet or (kind == 2 and hour >= q):
                continue
            event = script.add(f"h{hour}", f"turn at hour {hour} of {i}")
            at = EPOCH + timedelta(hours=hour, minutes=i)
            event["ts"] = at.isoformat().replace("+00:00", "Z")
            timed.append((at, len(timed), orjson.dumps(event)))
    return [line for _, _, line in sorted(timed)]


def worker_env(
    bootstrap: str, prefix: str, home: Path, name: str, guarantee: str
) -> dict[str, str]:
    """A chaos worker's settings (fleet monitoring off: replay makes no alerts)."""
    return {
        "SPANGUARD_BROKER": f"kafka://{bootstrap}",
        "SPANGUARD_TOPIC_PREFIX": prefix,
        "SPANGUARD_APP_ID": f"{prefix}-app",
        "SPANGUARD_PARTITIONS": str(PARTITIONS),
        "SPANGUARD_DATA_DIR": str(home / f"data-{name}"),
        "SPANGUARD_WEB_ENABLED": "false",
        "SPANGUARD_SESSION_TIMEOUT": "3",
        "SPANGUARD_PROCESSING_GUARANTEE": guarantee,
        "SPANGUARD_FLEET": '{"enabled": false}',
    }


def run_chaos(bootstrap: str, plan: ChaosPlan, home: Path, prefix: str) -> ChaosResult:
    """One chaos run on the broker at ``bootstrap`` (topics under ``prefix``)."""
    from spanguard.streams.kafka_io.topics import ensure_topics
    from spanguard.streams.settings import load_settings

    started = time.monotonic()
    lines = simulate(
        SimConfig(
            sessions=plan.sessions, seed=plan.seed, events_per_session=plan.events_per_session
        )
    ).lines
    if plan.hours:
        lines = spread(lines, plan.hours, plan.idle_sessions)
    expected, engines = replay_engines(lines)
    settings = load_settings(
        broker=f"kafka://{bootstrap}", topic_prefix=prefix, partitions=PARTITIONS
    )
    asyncio.run(ensure_topics(settings))

    def spawn(i: int, generation: int) -> WorkerProcess:
        name = f"w{i}-{generation}"
        env = worker_env(bootstrap, prefix, home, f"w{i}", plan.guarantee)
        return spawn_worker(name, env, home / f"{prefix}-{name}.log")

    workers = [spawn(i, 0) for i in range(plan.workers)]
    for worker in workers:
        worker.wait_ready()
    done = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        victim = 0
        while not done.wait(plan.kill_every):
            workers[victim].kill()
            kills += 1
            if done.wait(plan.restart_after):
                workers[victim] = spawn(victim, kills)
                break
            workers[victim] = spawn(victim, kills)
            victim = (victim + 1) % plan.workers

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    chunk = max(1, len(lines) // plan.chunks)
    try:
        for start in range(0, len(lines), chunk):
            asyncio.run(produce_lines(bootstrap, f"{prefix}.events", lines[start : start + chunk]))
            time.sleep(plan.chunk_gap)
        done.set()
        thread.join()
        got = asyncio.run(_read(bootstrap, prefix, set(expected), plan.settle, plan.timeout))
    finally:
        done.set()
        for worker in workers:
            worker.kill()
    missing = set(expected) - set(got)
    return ChaosResult(
        workers=plan.workers,
        guarantee=plan.guarantee,
        sessions=plan.sessions,
        events=len(lines),
        expected=len(expected),
        kills=kills,
        missing=len(missing),
        extra=len(set(got) - set(expected)),
        duplicate=sum(n - 1 for n in got.values() if n > 1),
        stalled=len({session for session, _ in missing}),
        seconds=round(time.monotonic() - started, 1),
        expired=sum(e.stats.sessions_expired for e in engines),
        refused_expired=sum(
            n for (_, key), n in expected.items() if key.startswith("rejected:SESSION_EXPIRED")
        ),
    )


async def _read(
    bootstrap: str, prefix: str, wanted: set[tuple[str, str]], settle: float, timeout: float
) -> Counter[tuple[str, str]]:
    """Read the outputs until every wanted one is there, or the workers have
    committed all input and nothing new came for ``settle`` seconds (a stall), or
    ``timeout``."""
    topics = [f"{prefix}.{s}" for s in OUTPUT_SUFFIXES]
    got: Counter[tuple[str, str]] = Counter()
    deadline = time.monotonic() + timeout
    async with OutputReader(bootstrap, topics) as reader:
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            records = await reader.poll(timeout_ms=500)
            if records:
                last_new = time.monotonic()
                got.update(identity(r.value) for r in records)
            # Late duplicates or extras would show up within a few quiet seconds.
            idle = time.monotonic() - last_new
            if wanted <= set(got) and idle > 3:
                break
            if idle > settle and await _all_committed(bootstrap, prefix):
                break
    return got


async def _all_committed(bootstrap: str, prefix: str) -> bool:
    """Whether the workers' group has committed every input record."""
    topic = f"{prefix}.events"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    await admin.start()
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(parts)
        committed = await admin.list_consumer_group_offsets(f"{prefix}-app", partitions=parts)
        return all(tp in committed and committed[tp].offset >= end for tp, end in ends.items())
    finally:
        await consumer.stop()
        await admin.close()


def main() -> None:
    """Command line: run ``--runs`` chaos runs and print one line per run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    plan = ChaosPlan()
    for name, value in asdict(plan).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--out", type=Path, default=RESULTS / "chaos.json")
    parser.add_argument("--keep", type=Path, help="keep worker logs in this folder")
    args = parser.parse_args()
    chosen = ChaosPlan(**{k: getattr(args, k) for k in asdict(plan)})
    results: list[ChaosResult] = []
    with tempfile.TemporaryDirectory(prefix="spanguard-chaos-") as tmp:
        home = args.keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        if args.bootstrap:
            runs = [(args.bootstrap, f"chaos{i}-{int(time.time())}") for i in range(args.runs)]
            for bootstrap, prefix in runs:
                results.append(_report(run_chaos(bootstrap, chosen, home, prefix)))
        else:
            with Bench(home) as bench:
                for _ in range(args.runs):
                    prefix = bench.prefix("chaos")
                    results.append(_report(run_chaos(bench.bootstrap, chosen, home, prefix)))
    clean = sum(r.clean for r in results)
    print(f"{clean}/{len(results)} runs clean")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"plan": asdict(chosen), "runs": [asdict(r) for r in results]}, indent=2)
    )
    raise SystemExit(0 if clean == len(results) else 1)


def _report(result: ChaosResult) -> ChaosResult:
    print(
        f"workers={result.workers} {result.guarantee} events={result.events} "
        f"kills={result.kills} expected={result.expected} missing={result.missing} "
        f"extra={result.extra} duplicate={result.duplicate} stalled={result.stalled} "
        f"expired={result.expired} refused_expired={result.refused_expired} "
        f"({result.seconds}s)",
        flush=True,
    )
    return result


if __name__ == "__main__":
    main()
