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

Owning the partitions (fence, restore outside the rebalance callback, reset with
back-off, ``max_failures``, close) is the loop the data path runs too,
:class:`~spanguard.streams.runtime.owner.PartitionOwner`: a new owner loads the
partition's tenants from the state changelog and resumes at the committed
position. A timer (:meth:`tick`) closes the windows of tenants that went
silent (wall clock), which resolves their alerts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from spanguard.schemas import FleetAlert
from spanguard.schemas.codec import encode_output
from spanguard.streams.fleet.combiner import Partial
from spanguard.streams.fleet.evaluator import FleetEvaluator, Outcome
from spanguard.streams.runtime.owner import Opened, Owned, OwnerConfig, PartitionOwner
from spanguard.streams.runtime.ports import Ack, Transport
from spanguard.streams.runtime.records import InputRecord, OutRecord

log = logging.getLogger(__name__)

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
class _Owned(Owned):
    """One owned partition of ``<prefix>.fleet``: its tenants and what changed."""

    tenants: set[str] = field(default_factory=set)
    stored: dict[str, set[float]] = field(default_factory=dict)
    """Window starts of each tenant present in the state changelog."""
    dirty: dict[str, set[float]] = field(default_factory=dict)
    """Tenants changed since the last checkpoint, with their changed windows."""
    alerts: list[FleetAlert] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.dirty or self.alerts or self.next_offset != self.committed)


class FleetAggregator(PartitionOwner[_Owned]):
    """Owns partitions of ``<prefix>.fleet`` and the alerting of their tenants."""

    def __init__(
        self,
        transport: Transport,
        evaluator: FleetEvaluator,
        *,
        alerts_topic: str,
        state_topic: str,
        config: OwnerConfig | None = None,
        tick_seconds: float = 2.0,
        on_alerts: Callable[[list[FleetAlert]], None] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``state_topic`` must be the changelog topic ``transport`` reads; ``config``
        defaults to a 0.2 s poll; :meth:`cycle` ticks every ``tick_seconds``."""
        super().__init__(transport, config or OwnerConfig("fleet", poll_timeout=0.2), sleep=sleep)
        self.evaluator = evaluator
        self.alerts_topic = alerts_topic
        self.state_topic = state_topic
        self.tick_seconds = tick_seconds
        self.on_alerts = on_alerts
        self.unreadable = 0
        """Records of ``<prefix>.fleet`` that were not partials (skipped)."""
        self._clock = clock
        self._last_tick = time.monotonic()

    def owned_tenants(self) -> set[str]:
        """Tenants whose partition this aggregator owns."""
        return {t for part in self.parts.values() for t in part.tenants}

    # -- the ownership loop's hooks ------------------------------------------------

    def _load(self, opened: Opened) -> tuple[_Owned, str]:
        tenants, windows = parse_state(opened.records)
        loaded = self.evaluator.load(tenants, windows, self._clock())
        committed = opened.committed
        part = _Owned(opened.partition, opened.writer, committed, committed, tenants=set(loaded))
        # Stored again at the first checkpoint: a timer restarted by the load must
        # not restart at every later load.
        part.dirty = {tenant: set() for tenant in loaded}
        for tenant, start, _ in windows:
            part.stored.setdefault(tenant, set()).add(start)
        return part, f"{len(loaded)} tenant(s)"

    def _forget(self, state: _Owned) -> None:
        self.evaluator.drop(state.tenants)

    async def _apply(self, batch: dict[int, list[InputRecord]], started: float) -> int:
        """Merge what came, checkpoint every changed partition."""
        merged = 0
        now = self._clock()
        for p, records in sorted(batch.items()):
            part = self.parts.get(p)
            if part is not None:
                merged += self._merge(part, records, now)
        await self._checkpoint_changed()
        return merged

    # -- processing ----------------------------------------------------------

    async def cycle(self) -> None:
        """A step, and a tick when ``tick_seconds`` have passed since the last."""
        await self.step()
        if time.monotonic() - self._last_tick >= self.tick_seconds:
            self._last_tick = time.monotonic()
            await self.tick()

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
                await self._reset(part.partition, exc)

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
        part.failures = 0
        alerts, part.alerts = part.alerts, []
        part.dirty.clear()
        if alerts and self.on_alerts is not None:
            try:
                self.on_alerts(alerts)
            except Exception:  # delivery problems must not undo a commit
                log.exception("fleet: on_alerts failed")

    async def _state(self, part: _Owned, key: bytes, value: bytes | None) -> Ack:
        return await part.writer.send(OutRecord(self.state_topic, key, value, part.partition))
