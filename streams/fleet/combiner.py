"""The worker side of fleet monitoring: a combiner the runtime calls per record.

Each worker pre-aggregates what its partitions processed, per (tenant, window
of event time), into :class:`~spanguard.streams.fleet.aggregates.WindowCounts`. At each
checkpoint of a partition the runtime drains that partition's counts
(:meth:`FleetCombiner.partials`) and writes them, ONE record per tenant, to
``<prefix>.fleet`` (keyed by tenant) in the same Kafka transaction as the
partition's changelog and input offset. The partials are therefore
exactly-once under both guarantees: a checkpoint that aborts takes its
partials with it and the inputs are processed (and observed) again. The fleet
aggregator reads ``<prefix>.fleet`` read-committed and simply adds them up.

Besides the partials, each record feeds the worker's metrics (counters by
tenant, gate latency; processing time by event type through the runtime's
``on_batch``) and the session inspector's ring of recent records. The raw
input is parsed once, here.

Counting waits until the batch's outputs are on their way: :meth:`FleetCombiner.observe`
reads only what the next record would change (the engine's cycle and expiry
counters) and queues the record; :meth:`FleetCombiner.flush`, which the runtime calls
once it has handed the batch's outputs to the producer, does the rest, so monitoring
delays no output (issue 26). ``partials`` and ``batch`` flush first: what they drain
never misses a queued record.

Sessions the engine expires (contract 1.2's idle expiry: no output of their own)
are counted with the record whose clock expired them, per tenant in the window of
their expiry time, so they are exactly-once like the rest.

A partition's distinct-session sets survive its checkpoints (a session counts
once per window; an aborted checkpoint rolls back to them). A session whose
partition moves to another worker in the middle of a window is counted by
both (the active-session figure is an upper bound then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from spanguard.schemas import OutputEvent
from spanguard.streams.engine.engine import Engine
from spanguard.streams.fleet.aggregates import WindowCounts, window_of
from spanguard.streams.fleet.metrics import FleetMetrics
from spanguard.streams.fleet.recent import RecentRecords, input_summary, outputs_summary
from spanguard.streams.fleet.times import parse_ts

log = logging.getLogger(__name__)

PARTIAL_VERSION = 1
INPUT_TYPES = frozenset(
    ("span.added", "scores.computed", "context.rewritten", "eviction.requested", "session.closed")
)
INVALID_TYPE = "invalid"
"""The ``type`` label of records that are not a contract input event."""

Cycles = Callable[[int], tuple[int, int]]
"""Reads the (closed, healthy) rewrite-cycle counters of one partition's engine."""
Expiries = Callable[[int, int], tuple[int, list[tuple[str, float]]]]
"""Given a partition and how many of its engine's expiries are counted already: the
engine's expiry count now and the newest expiries beyond those, as (tenant, expiry
time in seconds since the epoch)."""


@dataclass(slots=True)
class Partial:
    """One tenant's counts from one checkpoint of one partition, per window start."""

    tenant: str
    window_seconds: float
    windows: dict[float, WindowCounts]

    def to_bytes(self) -> bytes:
        """The ``<prefix>.fleet`` record value (JSON)."""
        return orjson.dumps(
            {
                "v": PARTIAL_VERSION,
                "tenant": self.tenant,
                "window_seconds": self.window_seconds,
                "windows": [[start, c.to_json()] for start, c in sorted(self.windows.items())],
            }
        )

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> Partial | None:
        """Parse :meth:`to_bytes`; None for anything else (never raises)."""
        if not raw:
            return None
        try:
            data = orjson.loads(raw)
            if data.get("v") != PARTIAL_VERSION:
                return None
            return cls(
                tenant=str(data["tenant"]),
                window_seconds=float(data["window_seconds"]),
                windows={
                    float(start): WindowCounts.from_json(counts)
                    for start, counts in data["windows"]
                },
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None


@dataclass(frozen=True, slots=True)
class _Observed:
    """One processed record waiting for :meth:`FleetCombiner.flush`."""

    partition: int
    value: bytes | None
    outputs: Sequence[OutputEvent]
    at: float
    """Wall time the outputs were produced (the gate latency metric)."""
    cycles: int
    healthy: int
    expired: list[tuple[str, float]]


@dataclass(slots=True)
class _PartitionCounts:
    """What one partition observed since its last checkpoint."""

    windows: dict[tuple[str, float], WindowCounts] = field(default_factory=dict)
    new_sessions: dict[tuple[str, float], set[str]] = field(default_factory=dict)


class FleetCombiner:
    """Implements the runtime's ``FleetHook`` (``observe``, ``partials``, ``discard``)."""

    def __init__(
        self,
        window_seconds: float,
        metrics: FleetMetrics,
        recent: RecentRecords,
        cycles: Cycles | None = None,
        *,
        sample_size: int = 5,
        top_sessions: int = 20,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window_seconds = window_seconds
        self.metrics = metrics
        self.recent = recent
        self.sample_size = sample_size
        self.top_sessions = top_sessions
        self.cycles = cycles
        """Reads a partition's engine cycle counters (set by the wiring, may be None)."""
        self._clock = clock
        self._types: list[str] = []
        """Event type of each record observed since the last :meth:`batch`."""
        self._pending: dict[int, _PartitionCounts] = {}
        self._seen: dict[int, dict[tuple[str, float], set[str]]] = {}
        """Sessions already counted per partition and (tenant, window), as of the
        partition's last checkpoint."""
        self._in_flight: dict[int, dict[tuple[str, float], set[str]]] = {}
        """Sessions first counted by the partials last drained: their transaction may
        still abort (then :meth:`discard` takes them back out of ``_seen``)."""
        self._cycle_base: dict[int, tuple[int, int]] = {}
        self.expiries: Expiries | None = None
        """Reads a partition's engine expiries (set by the wiring, may be None)."""
        self._expired_base: dict[int, int] = {}
        self.export: Callable[[dict[str, Any] | None, Sequence[OutputEvent]], None] | None = None
        """Called with each record's input event and outputs (the OTLP export)."""
        self._queue: list[_Observed] = []

    # -- FleetHook -----------------------------------------------------------

    def observe(self, partition: int, value: bytes | None, outputs: Sequence[OutputEvent]) -> None:
        """One input record of ``partition`` was processed with these outputs: queued
        for :meth:`flush` with the engine counters it moved (never raises)."""
        try:
            cycles, healthy = self._cycle_delta(partition)
            expired = self._expired(partition)
        except Exception:  # monitoring must never stop the guard
            log.exception("fleet combiner failed on a record of partition %d", partition)
            cycles, healthy, expired = 0, 0, []
        self._queue.append(
            _Observed(partition, value, outputs, self._clock(), cycles, healthy, expired)
        )

    def flush(self) -> None:
        """Count every queued record: metrics, the inspector's ring, the partitions'
        pending partials (never raises)."""
        queue, self._queue = self._queue, []
        for item in queue:
            try:
                self._observe(item)
            except Exception:  # monitoring must never stop the guard
                log.exception("fleet combiner failed on a record of partition %d", item.partition)

    def partials(self, partition: int) -> list[tuple[bytes, bytes]]:
        """Drain the partition's counts: one ``(tenant, Partial)`` record per tenant."""
        self.flush()
        pending = self._pending.pop(partition, None)
        if pending is None:
            return []
        # Being called again means the previous checkpoint committed (an abort calls
        # discard() in between): its sessions are settled.
        self._in_flight[partition] = pending.new_sessions
        seen = self._seen.setdefault(partition, {})
        for key, sessions in pending.new_sessions.items():
            seen.setdefault(key, set()).update(sessions)
        self._forget_old(seen)
        by_tenant: dict[str, dict[float, WindowCounts]] = {}
        for (tenant, start), counts in pending.windows.items():
            by_tenant.setdefault(tenant, {})[start] = counts
        return [
            (tenant.encode("utf-8"), Partial(tenant, self.window_seconds, windows).to_bytes())
            for tenant, windows in sorted(by_tenant.items())
        ]

    def batch(self, records: int, seconds: float) -> None:
        """The runtime's ``on_batch``: a batch of ``records`` took ``seconds`` from poll
        to every output acknowledged; each of its records gets that latency, by type."""
        self.flush()
        types, self._types = self._types[-records:], []
        types = [INVALID_TYPE] * (records - len(types)) + types
        for type_name in types:
            self.metrics.latency.labels(type_name).observe(seconds)

    def discard(self, partition: int) -> None:
        """Forget what the partition observed since its last :meth:`partials`; its
        engine starts again from the changelog (rewrite-cycle counters from 0). The
        sessions of the last drained partials are taken back too: ``discard`` follows a
        checkpoint that aborted, whose inputs (and sessions) will come again. (After a
        revocation that committed, this may count a session twice if the partition
        ever comes back: the session figure is an upper bound.)"""
        self._queue = [item for item in self._queue if item.partition != partition]
        self._pending.pop(partition, None)
        self._cycle_base[partition] = (0, 0)
        self._expired_base[partition] = 0
        seen = self._seen.get(partition, {})
        for key, sessions in self._in_flight.pop(partition, {}).items():
            if key in seen:
                seen[key] -= sessions

    # -- internals -----------------------------------------------------------

    def _observe(self, item: _Observed) -> None:
        partition, outputs = item.partition, item.outputs
        cycles, healthy = item.cycles, item.healthy
        data = _parse(item.value)
        tenant = _text(data, "tenant")
        session = _text(data, "session_id")
        pending = self._pending.get(partition)
        if pending is None:
            pending = self._pending[partition] = _PartitionCounts()
        self._types.append(input_type(data))
        self.metrics.observe_record(tenant, outputs, item.at)
        if self.export is not None and outputs:
            self.export(data, outputs)
        for owner, at in item.expired:
            counts = self._counts(pending, owner, window_of(at, self.window_seconds).start)
            counts.expired += 1
            counts.last_ts = max(counts.last_ts, at)
        for event in outputs:
            if event.type == "event.rejected":
                continue
            start = window_of(event.ts.timestamp(), self.window_seconds).start
            self._counts(pending, event.tenant, start).count_output(event, self.sample_size)
        if data is None or tenant is None or session is None:
            return
        ts = parse_ts(data.get("ts"))
        if ts is None and outputs:
            ts = outputs[0].ts.timestamp()
        if ts is not None:
            start = window_of(ts, self.window_seconds).start
            counts = self._counts(pending, tenant, start)
            counts.events += 1
            counts.last_ts = max(counts.last_ts, ts)
            key = (tenant, start)
            counted = self._seen.get(partition, {}).get(key, ())
            fresh = pending.new_sessions.setdefault(key, set())
            if session not in counted and session not in fresh:
                fresh.add(session)
                counts.sessions += 1
            if cycles:
                counts.cycles += cycles
                counts.healthy += healthy
                if healthy < cycles:
                    counts.add_sample("unhealthy", session, self.sample_size)
        entry = input_summary(data)
        entry["outputs"] = outputs_summary(outputs)
        self.recent.record(tenant, session, entry)

    def _counts(self, pending: _PartitionCounts, tenant: str, start: float) -> WindowCounts:
        counts = pending.windows.get((tenant, start))
        if counts is None:
            counts = pending.windows[(tenant, start)] = WindowCounts()
            counts.top.capacity = self.top_sessions
        return counts

    def _cycle_delta(self, partition: int) -> tuple[int, int]:
        # The partition's engine counts closed cycles; the growth since the previous
        # record of the partition belongs to this record (records run one at a time).
        if self.cycles is None:
            return 0, 0
        closed, healthy_total = self.cycles(partition)
        base_closed, base_healthy = self._cycle_base.get(partition, (0, 0))
        self._cycle_base[partition] = (closed, healthy_total)
        cycles = max(0, closed - base_closed)
        return cycles, min(max(0, healthy_total - base_healthy), cycles)

    def _expired(self, partition: int) -> list[tuple[str, float]]:
        # As the cycles: the expiries since the previous record of the partition are
        # this record's (its event moved the clock).
        if self.expiries is None:
            return []
        total, newest = self.expiries(partition, self._expired_base.get(partition, 0))
        self._expired_base[partition] = total
        return newest

    def _forget_old(self, seen: dict[tuple[str, float], set[str]]) -> None:
        # A session set is needed while its window still receives records: keep
        # the newest two windows of each tenant (the current one and stragglers).
        newest: dict[str, float] = {}
        for tenant, start in seen:
            newest[tenant] = max(start, newest.get(tenant, start))
        for key in [k for k in seen if k[1] < newest[k[0]] - self.window_seconds]:
            del seen[key]


def partition_cycles(engine_of: Callable[[int], Engine | None]) -> Cycles:
    """Reads the cycle counters of the engine that ``engine_of(partition)`` returns."""

    def read(partition: int) -> tuple[int, int]:
        engine = engine_of(partition)
        if engine is None:
            return 0, 0
        return engine.stats.cycles_closed, engine.stats.cycles_healthy

    return read


def partition_expiries(engine_of: Callable[[int], Engine | None]) -> Expiries:
    """Reads the expiries of the engine that ``engine_of(partition)`` returns."""

    def read(partition: int, counted: int) -> tuple[int, list[tuple[str, float]]]:
        engine = engine_of(partition)
        if engine is None:
            return 0, []
        total = engine.stats.sessions_expired
        return total, newest_expiries(engine, total - counted)

    return read


def newest_expiries(engine: Engine, count: int) -> list[tuple[str, float]]:
    """The last ``count`` sessions ``engine`` expired: (tenant, expiry time). Their
    markers are the newest "expired" ones (a marker is added at the end of the book
    when its session ends; a close by the same record may follow them). A marker
    already forgotten (a partition silent for longer than ``tombstone_retention``)
    is left out."""
    found: list[tuple[str, float]] = []
    if count <= 0:
        return found
    for (tenant, _), marker in reversed(engine.markers.items()):
        if marker.kind == "expired" and marker.at is not None:
            found.append((tenant, marker.at.timestamp()))
            if len(found) == count:
                break
    return found


def input_type(data: dict[str, Any] | None) -> str:
    """The record's event type as a bounded label: a contract type, else ``invalid``."""
    type_name = data.get("type") if data is not None else None
    return type_name if type_name in INPUT_TYPES else INVALID_TYPE


def _parse(value: bytes | None) -> dict[str, Any] | None:
    if not value:
        return None
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _text(data: dict[str, Any] | None, name: str) -> str | None:
    if data is None:
        return None
    value = data.get(name)
    return value if isinstance(value, str) and value else None
