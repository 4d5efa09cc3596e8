"""The fleet side of fleet monitoring: sum the workers' partials, judge, alert once.

The aggregator consumes ``<prefix>.fleet`` (read committed: only partials whose
checkpoint committed) in its own consumer group, over the same
:class:`~spanguard.streams.runtime.ports.Transport` contract as the data path: a
partition of ``<prefix>.fleet`` holds whole tenants (the key is the tenant),
and the aggregator that owns it

1. merges each partial into the tenant's tumbling windows
   (:meth:`~spanguard.streams.fleet.evaluator.FleetEvaluator.merge`) and evaluates the
   rules, closing windows as the tenant's watermark passes them;
2. at each checkpoint writes, in ONE transaction of that partition's writer,
   the ``fleet.alert`` records to ``<prefix>.alerts`` (keyed by tenant), the
   changed tenant state to its state changelog (compacted; a tenant record
   and one record per window, tombstones for expired windows) and its input
   position; so an alert is produced exactly once and the state that says it
   was sent commits with it;
3. after the commit hands the alerts to ``on_alerts`` (metrics, Alertmanager).

A new owner fences the previous one (aborting its open transaction), loads the
partition's tenants from the state changelog and resumes at the committed
position. A timer (:meth:`tick`) closes the windows of tenants that went
silent (wall clock), which resolves their alerts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from spanguard.schemas import FleetAlert
from spanguard.schemas.codec import encode_output
from spanguard.streams.fleet.combiner import Partial
from spanguard.streams.fleet.evaluator import FleetEvaluator, Outcome
from spanguard.streams.runtime.errors import FencedError, retry_until_done
from spanguard.streams.runtime.ports import Ack, PartitionWriter, Transport
from spanguard.streams.runtime.records import InputRecord, OutRecord, latest_per_key

log = logging.getLogger(__name__)
T = TypeVar("T")

TENANT_KEY = b"T\x1f"
WINDOW_KEY = b"W\x1f"


def tenant_key(tenant: str) -> bytes:
    """The state changelog key of a tenant's record (watermark, alerts)."""
    return TENANT_KEY + tenant.encode("utf-8")


def window_key(tenant: str, start: float) -> bytes:
    """The state changelog key of one tenant window's counts."""
    return WINDOW_KEY + tenant.encode("utf-8") + b"\x1f" + repr(float(start)).encode()


def parse_state(
    records: Iterable[tuple[bytes, bytes]],
) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, float, dict[str, Any]]]]:
    """Tenant records and window records of a (compacted) state changelog."""
    tenants: list[tuple[str, dict[str, Any]]] = []
    windows: list[tuple[str, float, dict[str, Any]]] = []
    for key, value in records:
        try:
            data = orjson.loads(value)
            if key.startswith(TENANT_KEY):
                tenants.append((key[len(TENANT_KEY) :].decode("utf-8"), data))
            elif key.startswith(WINDOW_KEY):
                tenant, _, start = key[len(WINDOW_KEY) :].rpartition(b"\x1f")
                windows.append((tenant.decode("utf-8"), float(start), data))
        except (orjson.JSONDecodeError, UnicodeDecodeError, ValueError):
            log.warning("fleet: unreadable state record %r skipped", key[:80])
    return tenants, windows


@dataclass
class _Owned:
    """One owned partition of ``<prefix>.fleet``."""

    partition: int
    writer: PartitionWriter
    next_offset: int
    committed: int
    tenants: set[str] = field(default_factory=set)
    stored: dict[str, set[float]] = field(default_factory=dict)
    """Window starts of each tenant present in the state changelog."""
    dirty: dict[str, set[float]] = field(default_factory=dict)
    """Tenants changed since the last checkpoint, with their changed windows."""
    alerts: list[FleetAlert] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.dirty or self.alerts or self.next_offset != self.committed)


class FleetAggregator:
    """Owns partitions of ``<prefix>.fleet`` and the alerting of their tenants."""

    def __init__(
        self,
        transport: Transport,
        evaluator: FleetEvaluator,
        *,
        alerts_topic: str,
        state_topic: str,
        on_alerts: Callable[[list[FleetAlert]], None] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        io_timeout: float = 30.0,
        retry_backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        """``state_topic`` must be the changelog topic ``transport`` reads."""
        self.transport = transport
        self.evaluator = evaluator
        self.alerts_topic = alerts_topic
        self.state_topic = state_topic
        self.on_alerts = on_alerts
        self.parts: dict[int, _Owned] = {}
        self.unreadable = 0
        """Records of ``<prefix>.fleet`` that were not partials (skipped)."""
        self._clock = clock
        self._sleep = sleep
        self._io_timeout = io_timeout
        self._backoff = retry_backoff
        self._lock = asyncio.Lock()
        self.generation = 0
        """Bumped by every assignment change (a poll that spans one is redone)."""

    # -- assignment ----------------------------------------------------------

    async def assign(self, partitions: Iterable[int]) -> None:
        """Take these partitions (fence, load their tenants, seek to the committed position)."""
        async with self._lock:
            self.generation += 1
            for p in sorted(set(partitions) - set(self.parts)):
                await self._open_until_ready(p)

    async def revoke(self, partitions: Iterable[int]) -> None:
        """Checkpoint and give up these partitions; forget their tenants."""
        async with self._lock:
            self.generation += 1
            for p in sorted(partitions):
                part = self.parts.get(p)
                if part is None:
                    continue
                with contextlib.suppress(Exception):  # the next owner redoes it
                    await self._checkpoint(part)
                await self._release(part)

    def owned_tenants(self) -> set[str]:
        """Tenants whose partition this aggregator owns."""
        return {t for part in self.parts.values() for t in part.tenants}

    async def _open_until_ready(self, partition: int) -> None:
        self.parts[partition] = await retry_until_done(
            lambda: self._open(partition),
            f"fleet: opening partition {partition}",
            self._backoff,
            self._sleep,
        )

    async def _open(self, partition: int) -> _Owned:
        writer = await self._io(self.transport.open_partition(partition))
        try:
            records = await self._io(self.transport.read_changelog(partition), restore=True)
            committed = await self._io(self.transport.committed(partition)) or 0
        except BaseException:
            await writer.close()
            raise
        tenants, windows = parse_state(latest_per_key(records))
        loaded = self.evaluator.load(tenants, windows, self._clock())
        part = _Owned(partition, writer, committed, committed, tenants=set(loaded))
        for tenant, start, _ in windows:
            part.stored.setdefault(tenant, set()).add(start)
        self.transport.seek(partition, committed)
        log.info(
            "fleet: partition %d: %d tenant(s) restored, resuming at offset %d",
            partition,
            len(loaded),
            committed,
        )
        return part

    async def _release(self, part: _Owned) -> None:
        self.parts.pop(part.partition, None)
        self.evaluator.drop(part.tenants)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(part.writer.close(), self._io_timeout)

    # -- processing ----------------------------------------------------------

    async def step(self, max_records: int = 500, timeout: float = 0.2) -> int:
        """Poll once, merge what came, checkpoint every changed partition."""
        generation = self.generation
        batch = await self.transport.poll(max_records, timeout)
        async with self._lock:
            if generation != self.generation:
                # Fetched across a rebalance: positions may have moved under it.
                for p, owned in self.parts.items():
                    self.transport.seek(p, owned.next_offset)
                return 0
            merged = 0
            now = self._clock()
            for p, records in sorted(batch.items()):
                part = self.parts.get(p)
                if part is not None:
                    merged += self._merge(part, records, now)
            await self._checkpoint_changed()
            return merged

    async def tick(self) -> int:
        """Close the windows of tenants silent for ``idle_seconds`` (wall clock);
        returns how many alerts that produced."""
        async with self._lock:
            now = self._clock()
            produced = 0
            for part in self.parts.values():
                for tenant in sorted(set(self.evaluator.ticks_due(now)) & part.tenants):
                    outcome = self.evaluator.tick(tenant, now)
                    produced += len(outcome.alerts)
                    self._collect(part, outcome)
            await self._checkpoint_changed()
            return produced

    async def run(self, stopping: asyncio.Event, tick_seconds: float = 2.0) -> None:
        """Merge and tick until ``stopping`` is set, then checkpoint and release."""
        last_tick = time.monotonic()
        while not stopping.is_set():
            try:
                await self.step()
                if time.monotonic() - last_tick >= tick_seconds:
                    last_tick = time.monotonic()
                    await self.tick()
            except Exception:
                log.exception("fleet: aggregation step failed; retrying")
                await self._sleep(self._backoff[0])
        await self.close()

    def _merge(self, part: _Owned, records: list[InputRecord], now: float) -> int:
        merged = 0
        for record in records:
            if record.offset < part.next_offset:
                continue  # delivered again after a seek back: already merged
            part.next_offset = record.offset + 1
            partial = Partial.from_bytes(record.value)
            if partial is None:
                self.unreadable += 1
                log.warning("fleet: record %d:%d is not a partial", part.partition, record.offset)
                continue
            part.tenants.add(partial.tenant)
            for start, counts in sorted(partial.windows.items()):
                self._collect(part, self.evaluator.merge(partial.tenant, start, counts, now))
            merged += 1
        return merged

    def _collect(self, part: _Owned, outcome: Outcome) -> None:
        part.alerts.extend(outcome.alerts)
        if outcome.windows or outcome.alerts or outcome.tenant_changed:
            part.dirty.setdefault(outcome.tenant, set()).update(w.start for w in outcome.windows)

    # -- checkpoints -----------------------------------------------------------

    async def _checkpoint_changed(self) -> None:
        for part in [p for p in self.parts.values() if p.changed]:
            try:
                await self._checkpoint(part)
            except Exception as exc:
                await self._reset(part, exc)

    async def _checkpoint(self, part: _Owned) -> None:
        """Alerts, changed state and the input position, in one transaction; then
        the alerts go to ``on_alerts``."""
        if not part.changed:
            return
        acks: list[Ack] = []
        for alert in part.alerts:
            record = OutRecord(
                self.alerts_topic, alert.tenant.encode("utf-8"), encode_output(alert)
            )
            acks.append(await part.writer.send(record))
        for tenant, windows in sorted(part.dirty.items()):
            state = self.evaluator.tenants.get(tenant)
            if state is None:
                continue
            current = set(state.windows)
            stored = part.stored.setdefault(tenant, set())
            for start in sorted(windows & current):
                value = orjson.dumps(state.windows[start].to_json())
                acks.append(await self._state(part, window_key(tenant, start), value))
            for start in sorted(stored - current):  # expired: tombstone
                acks.append(await self._state(part, window_key(tenant, start), None))
            part.stored[tenant] = (stored | windows) & current
            record_value = orjson.dumps(self.evaluator.tenant_record(tenant))
            acks.append(await self._state(part, tenant_key(tenant), record_value))
        await self._io(asyncio.gather(*acks))
        await self._io(part.writer.commit(part.next_offset))
        part.committed = part.next_offset
        alerts, part.alerts = part.alerts, []
        part.dirty.clear()
        if alerts and self.on_alerts is not None:
            try:
                self.on_alerts(alerts)
            except Exception:  # delivery problems must not undo a commit
                log.exception("fleet: on_alerts failed")

    async def _state(self, part: _Owned, key: bytes, value: bytes | None) -> Ack:
        return await part.writer.send(OutRecord(self.state_topic, key, value, part.partition))

    async def _reset(self, part: _Owned, error: BaseException) -> None:
        """Throw away what the partition did since its last checkpoint and start again
        from there (its tenants reloaded from the state changelog)."""
        log.warning("fleet: partition %d failed (%r); restarting it", part.partition, error)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(part.writer.abort(), self._io_timeout)
        await self._release(part)
        if isinstance(error, FencedError):
            log.warning("fleet: partition %d now belongs to another worker", part.partition)
            return
        await self._sleep(self._backoff[0])
        await self._open_until_ready(part.partition)

    async def _io(self, awaitable: Awaitable[T], restore: bool = False) -> T:
        timeout = self._io_timeout * (20 if restore else 1)
        return await asyncio.wait_for(_as_coroutine(awaitable), timeout)

    async def close(self) -> None:
        """Checkpoint and release every owned partition."""
        async with self._lock:
            for part in list(self.parts.values()):
                with contextlib.suppress(Exception):
                    await self._checkpoint(part)
                await self._release(part)


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
