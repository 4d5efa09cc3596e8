"""The combiner on the real runtime (in-memory broker) and the aggregator over its
partials: exactly-once counts and alerts whatever crashes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanguard.schemas import (
    ContextCompacted,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    SpanPinned,
)
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.fleet.aggregates import COUNTERS, window_of
from spanguard.streams.fleet.aggregator import FleetAggregator
from spanguard.streams.fleet.combiner import (
    FleetCombiner,
    Partial,
    partition_cycles,
    partition_expiries,
)
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.metrics import FleetMetrics
from spanguard.streams.fleet.recent import RecentRecords
from spanguard.streams.fleet.rules import parse_rules
from spanguard.streams.runtime.memory import (
    Crash,
    MemoryBroker,
    MemoryTransport,
    MemoryWriter,
    Stored,
)
from spanguard.streams.runtime.owner import OwnerConfig
from spanguard.streams.runtime.records import OutRecord
from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.runtime.testing import RuntimeTestDriver
from spanguard.streams.sim.scenarios import demo_fleet

WINDOW = 60.0
RULES = parse_rules(
    """
rules:
  - {name: critical, kind: fault_severity, at_least: critical}
  - {name: gaps, kind: fault_count, fault: SCORE_PROVENANCE_GAP, above: 1}
  - {name: unhealthy, kind: healthy_share, below: 0.5, min_cycles: 2}
"""
)
Key = tuple[str, float]


class CombinedDriver(RuntimeTestDriver):
    """The runtime test driver with a fresh combiner per worker process (a crashed
    process's combiner dies with it, as in production)."""

    def new_runtime(self) -> tuple[Runtime, MemoryTransport]:
        combiner = FleetCombiner(WINDOW, FleetMetrics(50), RecentRecords(8, 100))
        self.fleet = combiner
        runtime, transport = super().new_runtime()
        combiner.cycles = partition_cycles(
            lambda p: runtime.parts[p].engine if p in runtime.parts else None
        )
        combiner.expiries = partition_expiries(
            lambda p: runtime.parts[p].engine if p in runtime.parts else None
        )
        return runtime, transport


def lines() -> list[bytes]:
    return [*demo_fleet(12), b"{not json"]


def summed(values: Sequence[bytes]) -> dict[Key, dict[str, Any]]:
    """Every committed partial added up, per (tenant, window start)."""
    total: dict[Key, dict[str, Any]] = {}
    for raw in values:
        partial = Partial.from_bytes(raw)
        assert partial is not None
        for start, counts in partial.windows.items():
            row = total.setdefault((partial.tenant, start), Counter())
            for name in COUNTERS:
                row[name] += getattr(counts, name)
            for key, n in counts.faults.items():
                row[f"fault:{key}"] += n
            for key, n in counts.decisions.items():
                row[f"decision:{key}"] += n
            for key, n in counts.compactions.items():
                row[f"compaction:{key}"] += n
    return {k: dict(+v) for k, v in total.items()}


def replayed(trace: Sequence[bytes]) -> dict[Key, dict[str, Any]]:
    """What the partials must add up to: counted directly from a replay."""
    engine = Engine()
    total: dict[Key, Counter[str]] = {}
    sessions: dict[Key, set[str]] = {}
    live: dict[tuple[str, str], float] = {}
    """Each live session's newest ts: it expires idle_timeout later (contract 1.2)."""
    idle = engine.settings.idle_timeout.total_seconds()
    for n, line in enumerate(trace):
        before = (engine.stats.cycles_closed, engine.stats.cycles_healthy)
        outputs: list[OutputEvent] = engine.process_raw(line, Source("replay", 0, n))
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(data, dict) or "tenant" not in data or "ts" not in data:
            continue
        from spanguard.streams.fleet.times import parse_ts

        ts = parse_ts(data["ts"])
        assert ts is not None
        key = (data["tenant"], window_of(ts, WINDOW).start)
        for session_key in [k for k in live if (k[0], k[1]) not in engine.sessions]:
            # ended by this record: expired (in the window of newest ts + idle_timeout)
            # unless it was this record's close
            if data.get("type") != "session.closed" or session_key != (
                data["tenant"],
                data["session_id"],
            ):
                expiry = window_of(live[session_key] + idle, WINDOW).start
                total.setdefault((session_key[0], expiry), Counter())["expired"] += 1
            del live[session_key]
        if (data["tenant"], data["session_id"]) in engine.sessions:
            newest = engine.sessions[(data["tenant"], data["session_id"])].newest_ts
            assert newest is not None
            live[(data["tenant"], data["session_id"])] = newest.timestamp()
        row = total.setdefault(key, Counter())
        row["events"] += 1
        row["cycles"] += engine.stats.cycles_closed - before[0]
        row["healthy"] += engine.stats.cycles_healthy - before[1]
        sessions.setdefault(key, set()).add(data["session_id"])
        for event in outputs:
            out = total.setdefault(
                (event.tenant, window_of(event.ts.timestamp(), WINDOW).start), Counter()
            )
            if isinstance(event, IntegrityFault):
                out[f"fault:{event.kind.value}|{event.severity.value}"] += 1
            elif isinstance(event, EvictionDecided):
                out[f"decision:{event.action.value}"] += 1
                out["refused"] += len(event.refused)
            elif isinstance(event, SpanPinned):
                out["pins"] += 1
            elif isinstance(event, ScoresRecomputeRequested):
                out["recomputes"] += 1
            elif isinstance(event, ContextCompacted):
                out[f"compaction:{event.outcome}"] += 1
                out["tokens_before"] += event.tokens_before
                out["tokens_after"] += event.tokens_after
                out["tokens_saved"] += max(0, event.tokens_before - event.tokens_after)
                out["keys_lost"] += max(0, event.keys_before - event.keys_after)
    for key, seen in sessions.items():
        total[key]["sessions"] = len(seen)
    return {k: dict(+v) for k, v in total.items()}


@pytest.mark.parametrize("exactly_once", [False, True])
async def test_partials_add_up_to_the_replay(exactly_once: bool) -> None:
    trace = lines()
    driver = CombinedDriver(exactly_once=exactly_once, batch_size=5, commit_every=7)
    driver.produce(trace)
    await driver.run()
    values = driver.broker.read_committed("fleet")
    assert summed(values) == replayed(trace)
    # One record per tenant per checkpoint, not one per output.
    assert 0 < len(values) < len(trace) / 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    exactly_once=st.booleans(),
    crash_at=st.lists(st.integers(min_value=1, max_value=900), max_size=5),
    commit_every=st.integers(1, 40),
)
async def test_partials_are_exactly_once_whatever_crashes(
    exactly_once: bool, crash_at: list[int], commit_every: int
) -> None:
    trace = lines()
    driver = CombinedDriver(exactly_once=exactly_once, batch_size=6, commit_every=commit_every)
    driver.produce(trace)
    await driver.run(crash_at=crash_at)
    got = summed(driver.broker.read_committed("fleet"))
    expected = replayed(trace)
    assert got.keys() == expected.keys()
    for key, row in expected.items():
        # A crashed worker's session sets die with it: the session count may repeat
        # a session after a restart (an upper bound), everything else is exact.
        assert {k: v for k, v in got[key].items() if k != "sessions"} == {
            k: v for k, v in row.items() if k != "sessions"
        }
        assert row["sessions"] <= got[key]["sessions"]


def expiring_lines() -> list[bytes]:
    """Three tenants' sessions over three days of event time on one partition: a
    third go quiet for 32 h (they expire; their next event is refused), one closes,
    the rest keep going or stop (contract 1.2's idle expiry)."""
    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    scripts = {i: SessionScript(f"idle-{i:02d}", tenant=f"t{i % 3}") for i in range(12)}
    trace: list[bytes] = []
    for hour in range(0, 72, 4):
        for i, script in scripts.items():
            quiet = i % 3 == 0 and 8 <= hour < 40
            if quiet or (i % 4 == 1 and hour > 30) or (i == 2 and hour > 12):
                continue
            event = script.close() if i == 2 and hour == 12 else script.add(f"h{hour}")
            event["ts"] = (start + timedelta(hours=hour, minutes=i)).isoformat()
            trace.append(orjson.dumps(event))
    return trace


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    exactly_once=st.booleans(),
    crash_at=st.lists(st.integers(min_value=1, max_value=200), max_size=4),
    commit_every=st.integers(1, 20),
)
async def test_expired_sessions_are_counted_once_per_tenant_at_their_expiry(
    exactly_once: bool, crash_at: list[int], commit_every: int
) -> None:
    trace = expiring_lines()
    driver = CombinedDriver(
        partitions=1, exactly_once=exactly_once, batch_size=4, commit_every=commit_every
    )
    driver.produce(trace)
    await driver.run(crash_at=crash_at)
    got = summed(driver.broker.read_committed("fleet"))
    expected = replayed(trace)
    expired = {key: row["expired"] for key, row in expected.items() if "expired" in row}
    assert sum(expired.values()) >= 6 and len({tenant for tenant, _ in expired}) == 3
    assert {key: row["expired"] for key, row in got.items() if "expired" in row} == expired


# -- the aggregator --------------------------------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def committed_partials() -> list[tuple[bytes, bytes]]:
    driver = CombinedDriver(exactly_once=True, batch_size=5, commit_every=4)
    driver.produce(lines())
    await driver.run()
    broker = driver.broker
    return [
        (r.key, r.value)
        for p in range(broker.partitions)
        for r in broker.stable("fleet", p)
        if broker.visible(r) and r.key is not None and r.value is not None
    ]


def fleet_broker(partials: Sequence[tuple[bytes, bytes]], partitions: int = 3) -> MemoryBroker:
    from spanguard.streams.kafka_io.partitioning import partition_for

    broker = MemoryBroker(partitions=partitions)
    for key, value in partials:
        broker.log("fleet", partition_for(key, partitions)).append(Stored(key, value))
    return broker


def aggregator(broker: MemoryBroker, clock: Clock, sent: list[str]) -> FleetAggregator:
    settings = FleetSettings(grace_seconds=5, idle_seconds=30)
    return FleetAggregator(
        MemoryTransport(broker, "fleet", "fleet-state"),
        FleetEvaluator(settings, RULES),
        alerts_topic="alerts",
        state_topic="fleet-state",
        config=OwnerConfig("fleet", batch_size=3, poll_timeout=0),
        on_alerts=lambda alerts: sent.extend(a.alert_id for a in alerts),
        clock=clock,
        sleep=_no_sleep,
    )


async def _no_sleep(_: float) -> None:
    return None


async def drive(broker: MemoryBroker, crash_at: Sequence[int] = ()) -> list[str]:
    """Run aggregators (a new one after each crash) to the end of the fleet topic,
    then past the idle time so every alert resolves; returns what on_alerts saw."""
    crashes = sorted(crash_at)
    clock = Clock(1_000.0)
    sent: list[str] = []
    agg: FleetAggregator | None = None
    for _ in range(10_000):
        if crashes and broker.crash_at is None and not broker.crashed:
            broker.crash_at = crashes.pop(0)
        try:
            if agg is None:
                agg = aggregator(broker, clock, sent)
                await agg.assign(range(broker.partitions))
            merged = await agg.step()
            if merged == 0 and all(
                part.next_offset == len(broker.stable("fleet", part.partition))
                for part in agg.parts.values()
            ):
                clock.now += 120
                if await agg.tick() == 0 and not agg.evaluator.ticks_due(clock.now):
                    await agg.close()
                    return sent
        except Crash:
            pass
        if broker.crashed:
            broker.crashed = False
            broker.crash_at = None
            agg = None
    raise AssertionError("the aggregator did not finish")


def alerts_of(broker: MemoryBroker) -> Counter[tuple[str, str, str, str]]:
    return Counter(
        (a["alert_id"], a["rule"], a["tenant"], a["status"])
        for a in map(orjson.loads, broker.read_committed("alerts"))
    )


async def test_aggregator_alerts_once_and_resolves() -> None:
    broker = fleet_broker(await committed_partials())
    sent = await drive(broker)
    alerts = alerts_of(broker)
    assert alerts and all(n == 1 for n in alerts.values())
    rules = {(rule, status) for _, rule, _, status in alerts}
    assert {("critical", "firing"), ("critical", "resolved"), ("gaps", "firing")} <= rules
    firing = {(rule, tenant) for _, rule, tenant, status in alerts if status == "firing"}
    resolved = {(rule, tenant) for _, rule, tenant, status in alerts if status == "resolved"}
    assert firing == resolved  # the fleet went idle: everything resolved
    assert Counter(sent) == Counter(a for a, *_ in alerts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crash_at=st.lists(st.integers(min_value=1, max_value=160), min_size=1, max_size=4))
async def test_aggregator_alerts_exactly_once_whatever_crashes(crash_at: list[int]) -> None:
    partials = await committed_partials()
    reference = fleet_broker(partials)
    await drive(reference)
    broker = fleet_broker(partials)
    await drive(broker, crash_at)
    assert alerts_of(broker) == alerts_of(reference)


async def test_the_aggregator_restores_outside_the_rebalance_callback() -> None:
    broker = fleet_broker(await committed_partials())
    agg = aggregator(broker, Clock(1_000.0), [])
    await agg.assign(range(broker.partitions))  # the callback: bookkeeping only
    assert agg.parts == {} and not agg.assigned.is_set()
    assert await agg.step() == 0  # the next step opens them, then polls again
    assert set(agg.parts) == set(range(broker.partitions)) and agg.assigned.is_set()


async def test_a_timer_restarted_after_an_outage_is_stored_for_the_next_owner() -> None:
    """An aggregator that opens its partitions after ``idle_seconds`` without an owner
    gives each tenant one idle period, and stores that, so an owner after it (a
    rebalance) continues the same timer instead of restarting it again."""
    broker = fleet_broker(await committed_partials(), partitions=1)
    clock = Clock(1_000.0)
    first = aggregator(broker, clock, [])
    await first.assign([0])
    end = len(broker.stable("fleet", 0))
    while 0 not in first.parts or first.parts[0].next_offset < end:
        await first.step()
    tenants = first.owned_tenants()
    assert tenants and not first.evaluator.ticks_due(clock.now)
    clock.now += 100  # the outage: nobody owns partition 0
    second = aggregator(broker, clock, [])
    await second.assign([0])
    await second.step()
    assert second.evaluator.ticks_due(clock.now + 29) == []
    await second.tick()  # nothing due: this checkpoint stores the restarted timers
    clock.now += 20
    third = aggregator(broker, clock, [])
    await third.assign([0])
    await third.step()
    assert third.evaluator.ticks_due(clock.now + 9) == []
    assert sorted(third.evaluator.ticks_due(clock.now + 10)) == sorted(tenants)


class AlertTooLarge(Exception):
    """What the broker answers for a record over its limit (never cured by retrying)."""

    retriable = False


async def test_an_alert_the_broker_refuses_stops_its_partition_after_max_failures() -> None:
    broker = fleet_broker(await committed_partials(), partitions=1)
    agg = aggregator(broker, Clock(1_000.0), [])
    original = MemoryWriter.send

    async def send(self: MemoryWriter, record: OutRecord) -> Any:
        if record.topic == "alerts":
            raise AlertTooLarge("MessageSizeTooLargeError")
        return await original(self, record)

    MemoryWriter.send = send  # type: ignore[method-assign]
    try:
        await agg.assign([0])
        steps = 0
        while 0 not in agg.stopped:
            steps += 1
            assert steps < 1_000, "a permanent failure must not be retried forever"
            await agg.step()
    finally:
        MemoryWriter.send = original  # type: ignore[method-assign]
    assert "AlertTooLarge" in agg.stopped[0] and agg.parts == {}
    stopped_at = broker.committed.get(0, 0)  # nothing past the refused alert committed
    assert f"offset {stopped_at} " in agg.stopped[0]
    assert stopped_at < len(broker.stable("fleet", 0))


def test_an_aborted_checkpoint_gives_its_sessions_back() -> None:
    """The runtime drains partials, the transaction aborts, discard() follows and the
    same inputs come again: their sessions are counted again (once)."""
    trace = demo_fleet(4)[:20]
    engine = Engine()
    outputs = [engine.process_raw(line, Source("t", 0, n)) for n, line in enumerate(trace)]
    combiner = FleetCombiner(WINDOW, FleetMetrics(50), RecentRecords(8, 100))

    def sessions() -> int:
        for line, outs in zip(trace, outputs, strict=True):
            combiner.observe(0, line, outs)
        total = 0
        for _, value in combiner.partials(0):
            partial = Partial.from_bytes(value)
            assert partial is not None
            total += sum(c.sessions for c in partial.windows.values())
        return total

    first = sessions()
    assert first == len({orjson.loads(line)["session_id"] for line in trace})
    combiner.discard(0)  # the checkpoint that carried them aborted
    assert sessions() == first
    assert sessions() == 0  # committed this time: the same sessions are not new


def _line(tenant: str, session: str, seq: int) -> bytes:
    return orjson.dumps(
        {
            "type": "span.added",
            "event_id": f"{session}-{seq}",
            "tenant": tenant,
            "session_id": session,
            "seq": seq,
            "ts": "2026-03-01T10:00:00Z",
        }
    )


def test_queued_records_are_counted_at_flush_with_the_cycles_they_closed() -> None:
    """observe() only queues (the runtime flushes once the batch's outputs are sent);
    the engine counters a record moved are read at observe time, so the cycle closed
    by the second record is its own even though both are counted later."""
    counters = [(0, 0)]
    metrics = FleetMetrics(50)
    recent = RecentRecords(8, 100)
    combiner = FleetCombiner(WINDOW, metrics, recent, lambda _p: counters[0])
    combiner.observe(0, _line("t1", "a", 1), [])
    counters[0] = (1, 0)  # the next record closes an unhealthy cycle
    combiner.observe(0, _line("t2", "b", 1), [])
    counters[0] = (1, 0)
    assert recent.get("t1", "a") == [] and len(recent) == 0  # nothing counted yet
    combiner.flush()
    assert len(recent.get("t1", "a")) == 1 and len(recent.get("t2", "b")) == 1
    by_tenant = {}
    for key, value in combiner.partials(0):
        partial = Partial.from_bytes(value)
        assert partial is not None
        by_tenant[key.decode()] = sum(c.cycles for c in partial.windows.values())
    assert by_tenant == {"t1": 0, "t2": 1}


def test_partials_and_discard_see_queued_records() -> None:
    """A checkpoint drains what is still queued; a discarded partition's queued
    records are dropped, the other partitions' kept."""
    combiner = FleetCombiner(WINDOW, FleetMetrics(50), RecentRecords(8, 100))
    combiner.observe(0, _line("t", "a", 1), [])
    combiner.observe(1, _line("t", "b", 1), [])
    combiner.discard(1)
    [(key, value)] = combiner.partials(0)
    partial = Partial.from_bytes(value)
    assert key == b"t" and partial is not None
    assert sum(c.events for c in partial.windows.values()) == 1
    assert combiner.partials(1) == []


class _FlushSpy:
    """A fleet hook that checks, at each flush, that the outputs of the records it
    observed were handed to the producer first (all but the decisions and compaction
    records that wait for their causes' acknowledgements)."""

    def __init__(self, driver: RuntimeTestDriver) -> None:
        self.driver = driver
        self.sent_first = 0
        self.flushes = 0
        self.early: list[tuple[int, int]] = []
        """(outputs written, outputs observed) at each flush that came too early
        (recorded, not raised: the runtime would take an exception for an engine's)."""

    def observe(self, partition: int, value: bytes | None, outputs: Sequence[Any]) -> None:
        self.sent_first += sum(
            not isinstance(e, EvictionDecided | ContextCompacted) for e in outputs
        )

    def flush(self) -> None:
        self.flushes += 1
        written = len(self.driver.outputs(committed_only=False))
        if written < self.sent_first:
            self.early.append((written, self.sent_first))

    def partials(self, partition: int) -> list[tuple[bytes, bytes]]:
        return []

    def discard(self, partition: int) -> None:
        self.sent_first = len(self.driver.outputs(committed_only=False))


async def test_the_runtime_counts_a_batch_after_handing_its_outputs_over() -> None:
    driver = RuntimeTestDriver(batch_size=50)
    spy = _FlushSpy(driver)
    driver.fleet = spy
    driver.produce(demo_fleet(6))
    await driver.run()
    assert spy.flushes > 0 and spy.sent_first > 0
    assert spy.early == []
