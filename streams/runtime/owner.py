"""The partition-ownership loop: what every transactional owner of partitions does.

The data path (:class:`~spanguard.streams.runtime.runtime.Runtime`) and fleet
monitoring's aggregator (:class:`~spanguard.streams.fleet.aggregator.FleetAggregator`)
both own partitions of an input topic, keep state derived from them in a compacted
changelog and commit that state with the input position in one transaction. The
loop that makes this safe is here, once; each keeps only its own logic (what a
partition's state is, what a batch does to it, what a checkpoint writes).

1. **Assign** (inside the rebalance callback): bookkeeping only. The new partitions
   are paused; a restore there would let the member's session expire while the
   consumer waits, and the group would rebalance again, in a loop.
2. **Open** (by the next :meth:`PartitionOwner.step`, outside the callback): open the
   partition's transactional writer, which fences any earlier owner and aborts its
   open transaction; read the changelog (read committed) and the committed input
   position; build the state (:meth:`PartitionOwner._load`); seek there. Retried with
   the back-off until it succeeds (or the partition belongs to another owner).
3. **Step**: poll; a batch polled across an assignment change is dropped and every
   partition sought back to its own position (the generation guard); otherwise
   the batch goes to :meth:`PartitionOwner._apply`.
4. **Checkpoint** (:meth:`PartitionOwner._checkpoint`): the records and the input
   position, in ONE transaction of the partition's writer.
5. **Reset** on any failure of a partition: abort, release, wait the back-off,
   open again from the last checkpoint. A failure that retrying cannot cure stops
   the partition after ``max_failures`` tries (logged, in :attr:`stopped`); a
   fenced writer means the partition has a new owner, so it is not re-opened.
6. **Revoke**: checkpoint and keep the state; if the partition comes back unchanged
   it is not restored again. **Close**: checkpoint and release everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.runtime.errors import FencedError, retriable, retry_until_done
from spanguard.streams.runtime.ports import PartitionWriter, Transport
from spanguard.streams.runtime.records import InputRecord, latest_per_key

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Owned:
    """What every owner keeps of a partition it owns: its writer and its positions."""

    partition: int
    writer: PartitionWriter
    next_offset: int
    """The first input offset not yet applied to the state."""
    committed: int
    """The input position of the last committed checkpoint, whose changelog the
    state extends."""
    failures: int = field(default=0, kw_only=True)
    """Consecutive failures since the last checkpoint committed."""


S = TypeVar("S", bound=Owned)


@dataclass(frozen=True, slots=True)
class Opened:
    """A partition just opened, for its owner to build its state from."""

    partition: int
    writer: PartitionWriter
    """Its transactional writer (earlier owners are fenced by now)."""
    records: list[tuple[bytes, bytes]]
    """Its changelog as a compacted topic means it: the last value of every key."""
    committed: int
    """Its committed input position."""


RETRY_BACKOFF = Backoff(0.1, 5.0)
"""The pauses between retries of a failed partition, by default."""


@dataclass(frozen=True, slots=True)
class OwnerConfig:
    """The loop's own settings (the same for every owner)."""

    name: str
    """The owner's name at the start of its log lines (``spanguard``, ``fleet``)."""
    batch_size: int = 500
    poll_timeout: float = 0.05
    io_timeout: float = 30.0
    """Longest wait for any broker answer (a restore may take 20 times longer)."""
    backoff: Backoff = RETRY_BACKOFF
    max_failures: int = 8
    """Consecutive failures at the same input offset after which a partition is
    stopped instead of retried, when retrying cannot help."""


class PartitionOwner(ABC, Generic[S]):
    """Owns partitions of one input topic over a :class:`Transport` (module docstring)."""

    def __init__(
        self,
        transport: Transport,
        config: OwnerConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.transport = transport
        self.owner_config = config
        self.parts: dict[int, S] = {}
        self.stopped: dict[int, str] = {}
        """Partitions stopped after repeated failures, with the reason."""
        self.generation = 0
        """Bumped by every assignment change (a poll that spans one is dropped)."""
        self.assigned = asyncio.Event()
        """Set once the first assignment is opened (restored and sought)."""
        self._kept: dict[int, S] = {}
        self._pending: set[int] = set()
        self._lock = asyncio.Lock()
        self._restore_lock = asyncio.Lock()
        self._sleep = sleep

    # -- what each owner brings -------------------------------------------------

    @abstractmethod
    def _load(self, opened: Opened) -> tuple[S, str]:
        """The partition's state, and what was restored, for the log (``3 session(s)``)."""

    @abstractmethod
    async def _apply(self, batch: dict[int, list[InputRecord]], started: float) -> int:
        """Apply a polled batch (under the lock, generation checked; ``started``: when it
        was polled, ``time.perf_counter``); returns the records applied."""

    @abstractmethod
    async def _checkpoint(self, state: S) -> None:
        """Write what changed and commit it with the input position, and wait for it."""

    def _forget(self, state: S) -> None:
        """The partition is released: drop what is derived from it outside ``state``."""

    async def _halt(self, state: S, error: BaseException) -> None:
        """The partition is being reset after ``error``: stop its background work."""

    def _step_failed(self) -> None:
        """A step raised (counted by owners that keep metrics)."""

    # -- assignment ----------------------------------------------------------------

    async def assign(self, partitions: Iterable[int]) -> None:
        """Take the given partitions (the rebalance's new assignment): bookkeeping
        only, they are opened by the next :meth:`step`."""
        wanted = set(partitions)
        async with self._lock:
            self.generation += 1
            for p in sorted(set(self._kept) - wanted):
                await self._release(self._kept.pop(p))
            self._pending = wanted - set(self.parts)
            for p in self._pending:
                self.transport.pause(p)
            if not self._pending:
                self.assigned.set()

    async def revoke(self, partitions: Iterable[int]) -> None:
        """Give up the given partitions: checkpoint them so the next owner starts where
        this one stopped; keep their state in case they come back."""
        async with self._lock:
            self.generation += 1
            self._pending.difference_update(partitions)
            for p in sorted(partitions):
                state = self.parts.pop(p, None)
                self.stopped.pop(p, None)
                if state is None:
                    continue
                try:
                    await self._checkpoint(state)
                except Exception as exc:  # the next owner redoes it from the changelog
                    log.warning("%s: checkpoint of revoked partition %d: %r", self._name, p, exc)
                    await self._release(state)
                    continue
                self._kept[p] = state

    async def _open_pending(self) -> None:
        """Open the partitions assigned since the last step, all at once."""
        pending, self._pending = sorted(self._pending), set()
        await asyncio.gather(*(self._take(p) for p in pending))
        for p in pending:
            if p in self.parts:
                self.transport.resume(p)
        self.assigned.set()

    async def _take(self, partition: int) -> None:
        kept = self._kept.pop(partition, None)
        if kept is not None and await self._still_ours(kept):
            self.transport.seek(partition, kept.next_offset)
            self.parts[partition] = kept
            return
        if kept is not None:
            await self._release(kept)
        await self._open_until_ready(partition)

    async def _still_ours(self, state: S) -> bool:
        """Whether nobody committed past the state since it was revoked."""
        try:
            committed = await self._io(self.transport.committed(state.partition))
        except Exception:
            return False
        return (committed or 0) == state.committed == state.next_offset

    async def _open_until_ready(self, partition: int) -> None:
        self.parts[partition] = await retry_until_done(
            lambda: self._open(partition),
            f"{self._name}: opening partition {partition}",
            self.owner_config.backoff,
            self._sleep,
        )

    async def _open(self, partition: int) -> S:
        started = time.perf_counter()
        writer = await self._io(self.transport.open_partition(partition))  # fences
        try:
            async with self._restore_lock:  # one changelog reader, one partition at a time
                records = await self._io(self.transport.read_changelog(partition), restore=True)
            committed = await self._io(self.transport.committed(partition)) or 0
        except BaseException:
            await writer.close()
            raise
        state, restored = self._load(Opened(partition, writer, latest_per_key(records), committed))
        self.transport.seek(partition, committed)
        log.info(
            "%s: partition %d restored: %s from %d changelog record(s) in %.2fs, "
            "resuming at offset %d",
            self._name,
            partition,
            restored,
            len(records),
            time.perf_counter() - started,
            committed,
        )
        return state

    async def _release(self, state: S) -> None:
        self._forget(state)
        try:
            await asyncio.wait_for(state.writer.close(), self.owner_config.io_timeout)
        except Exception as exc:
            log.warning("%s: closing partition %d: %r", self._name, state.partition, exc)

    # -- the loop --------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        """Step until ``stopping`` is set, then checkpoint and release everything."""
        failures = 0
        while not stopping.is_set():
            try:
                await self.cycle()
                failures = 0
            except Exception:
                failures += 1
                self._step_failed()
                log.exception("%s: processing step failed; retrying", self._name)
                await self._sleep(self.owner_config.backoff.delay(failures))
        await self.close()

    async def cycle(self) -> None:
        """One turn of :meth:`run` (a step; owners with timers add theirs)."""
        await self.step()

    async def step(self) -> int:
        """Poll once and apply what came; returns the records applied."""
        generation = self.generation
        config = self.owner_config
        batch = await self.transport.poll(config.batch_size, config.poll_timeout)
        started = time.perf_counter()
        async with self._lock:
            if generation != self.generation or self._pending:
                # Polled before a rebalance: positions may have moved under it.
                if self._pending:
                    await self._open_pending()
                for p, state in self.parts.items():
                    self.transport.seek(p, state.next_offset)
                return 0
            return await self._apply(batch, started)

    async def _reset(self, partition: int, error: BaseException) -> None:
        """Throw away what the partition did since its last checkpoint and start again
        from there (or stop it, if retrying cannot help)."""
        state = self.parts.pop(partition, None)
        if state is None:
            return
        await self._halt(state, error)
        failures = state.failures + 1
        log.warning(
            "%s: partition %d failed at offset %d (%r), attempt %d",
            self._name,
            partition,
            state.committed,
            error,
            failures,
        )
        with contextlib.suppress(Exception):  # the next open fences and aborts it anyway
            await asyncio.wait_for(state.writer.abort(), self.owner_config.io_timeout)
        await self._release(state)
        if isinstance(error, FencedError):
            log.warning("%s: partition %d now belongs to another owner", self._name, partition)
            return
        if not retriable(error) and failures >= self.owner_config.max_failures:
            reason = f"stopped at offset {state.committed} after {failures} failures: {error!r}"
            log.error("%s: partition %d %s", self._name, partition, reason)
            self.stopped[partition] = reason
            self.transport.pause(partition)
            return
        await self._sleep(self.owner_config.backoff.delay(failures))
        await self._open_until_ready(partition)
        self.parts[partition].failures = failures

    async def _io(self, awaitable: Awaitable[T], restore: bool = False) -> T:
        """Bound every wait on the broker (a restore may take longer)."""
        timeout = self.owner_config.io_timeout * (20 if restore else 1)
        return await asyncio.wait_for(_as_coroutine(awaitable), timeout)

    async def close(self) -> None:
        """Checkpoint every owned partition and release it (clean shutdown)."""
        async with self._lock:
            states = [*self.parts.values(), *self._kept.values()]
            self.parts.clear()
            self._kept.clear()
            for state in states:
                try:
                    await self._checkpoint(state)
                except Exception as exc:
                    log.warning("%s: final checkpoint of %d: %r", self._name, state.partition, exc)
                await self._release(state)

    @property
    def _name(self) -> str:
        return self.owner_config.name


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
