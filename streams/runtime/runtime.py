"""The data path: poll a batch, run the engine, produce outputs, checkpoint.

Guarantees (proved by tests/runtime/ with the in-memory transport, crash at
every write, and by tests/kafka/ and bench/chaos.py on a real broker):

* A partition's changelog records, its fleet partials and its input offset are
  committed in ONE Kafka transaction per checkpoint (both guarantees), so the
  changelog always describes exactly the inputs before the committed offset.
  A new owner first fences the old one (aborting its open transaction), then
  restores from the changelog read committed, then seeks to the committed
  offset: whatever the old owner did after its last checkpoint is redone by
  the same deterministic engine, never half-applied.
* at-least-once: outputs are produced at once (a decision only after the
  faults, pins and recompute request it lists are acknowledged) and are all
  acknowledged before the checkpoint that covers their input commits. A crash
  can repeat outputs (same ids), never lose one. Steps are pipelined: while a
  batch's acknowledgements are awaited (in a background delivery per partition
  and batch), the next batches are polled and processed; a session's outputs of
  a later batch are sent only once all of its earlier batches' are acknowledged,
  and a partition is checkpointed only when none of its batches is pending.
  What a delivery sends after waiting for acknowledgements (a decision after its
  causes) goes through a producer of its own (``Transport.send(after_acks=True)``):
  aiokafka keeps one produce request in flight per broker and producer, so on a
  shared producer a decision queued behind the next batches' first outputs, most
  often for a whole broker round trip.
* exactly-once: outputs are written in the partition's transaction and are
  visible to read-committed consumers exactly once, when it commits. Each batch's
  sends are awaited before the next poll, as before pipelining: the decision's
  latency is the commit interval, which overlapping batches would not shorten.

Owning the partitions is the loop the fleet aggregator runs too,
:class:`~spanguard.streams.runtime.owner.PartitionOwner` (fence, restore outside the
rebalance callback, the generation guard, reset, close); this module is what the data
path does with them. Failures of a step (send, commit, the engine itself) reset the
partition: abort, re-open, restore, seek back to the committed offset, retry with
back-off. A failure that retrying cannot cure (e.g. a record the broker refuses as
too large) stops the partition after ``max_failures`` tries, loudly: it is logged,
counted and reported by :meth:`Runtime.health`; nothing after it is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanguard.schemas import (
    TOPIC_OF,
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    OutputEvent,
)
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine
from spanguard.streams.engine.state import SessionState
from spanguard.streams.runtime.config import RuntimeConfig
from spanguard.streams.runtime.owner import Opened, OwnerConfig, PartitionOwner
from spanguard.streams.runtime.partition import PartitionState
from spanguard.streams.runtime.ports import Ack, FleetHook, Transport
from spanguard.streams.runtime.records import InputRecord, OutRecord

log = logging.getLogger(__name__)
Session = tuple[str | None, str | None]
Sent = tuple[OutputEvent, int, Ack]
"""An output handed to the producer, when (monotonic ns) and its acknowledgement."""
_Free = tuple[Session, list[OutputEvent], asyncio.Future[bool]]
"""A session free to send now: its later outputs and the future of this batch's own."""
_Held = tuple[
    Session, asyncio.Future[bool], list[OutputEvent], list[OutputEvent], asyncio.Future[bool]
]
"""A session held behind its earlier batch (that batch's future): its first and later
outputs and the future of this batch's own."""


def _resolve(state: PartitionState, session: Session, done: asyncio.Future[bool], ok: bool) -> None:
    """A session's batch is over: its next outputs may go (ok) or never will."""
    if not done.done():
        done.set_result(ok)
    if state.tails.get(session) is done:
        del state.tails[session]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What one checkpoint of a partition writes and the input position it commits."""

    changes: list[tuple[bytes, bytes | None]]
    partials: list[tuple[bytes, bytes]]
    next_offset: int


@dataclass
class RuntimeStats:
    """Counters for metrics and health (monotonic, per process)."""

    processed: int = 0
    outputs: int = 0
    checkpoints: int = 0
    state_records: int = 0
    restored_sessions: int = 0
    restores: int = 0
    send_failures: int = 0
    crashes: int = 0
    overlapped: int = 0
    """Batches whose outputs were sent while an earlier batch's were unacknowledged."""
    last_progress: float = field(default_factory=time.monotonic)


class Runtime(PartitionOwner[PartitionState]):
    """Drives one engine per owned input partition over a :class:`Transport`; the
    ownership loop (open, fence, restore, reset, close) is :class:`PartitionOwner`'s."""

    def __init__(
        self,
        config: RuntimeConfig,
        transport: Transport,
        engine_settings: EngineSettings,
        fleet: FleetHook | None = None,
        *,
        engine_factory: Callable[[EngineSettings], Engine] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(
            transport,
            OwnerConfig(
                "spanguard",
                batch_size=config.batch_size,
                poll_timeout=config.poll_timeout,
                io_timeout=config.io_timeout,
                backoff=config.retry_backoff,
                max_failures=config.max_failures,
            ),
            sleep=sleep,
        )
        self.config = config
        self.engine_settings = engine_settings
        self.fleet = fleet
        self._new_engine = engine_factory or (lambda s: Engine(s, track_changes=True))
        self.stats = RuntimeStats()
        self.on_ack: Callable[[OutputEvent, Any, int], None] | None = None
        """Called with each output, its broker acknowledgement and when it was sent
        (the ordering journal of the integration tests)."""
        self.on_failure: Callable[[str], None] | None = None
        """Called with ``"send"`` for each batch whose outputs could not all be written
        and ``"step"`` for each processing step that failed (metrics)."""
        self.on_batch: Callable[[int, float], None] | None = None
        """Called after each batch with its record count and the seconds from poll
        to every output acknowledged (processing-time metrics)."""
        self._clock = clock

    def set_fleet_hook(self, hook: FleetHook | None) -> None:
        """Install fleet monitoring's combiner (before the first assignment)."""
        self.fleet = hook

    # -- views -------------------------------------------------------------

    def session(self, tenant: str, session_id: str) -> SessionState | None:
        """A live session owned by this worker, or None."""
        for state in self.parts.values():
            found = state.engine.session(tenant, session_id)
            if found is not None:
                return found
        return None

    def assigned_partitions(self) -> set[int]:
        """The input partitions this worker owns now."""
        return set(self.parts)

    def engines(self) -> list[Engine]:
        """The engines of the owned partitions (for metrics and views)."""
        return [state.engine for state in self.parts.values()]

    def positions(self) -> dict[int, int]:
        """Next input offset to apply, per owned partition."""
        return {p: state.next_offset for p, state in self.parts.items()}

    def health(self, stall_after: float = 30.0) -> tuple[bool, str]:
        """(ready, reason): not ready while a partition is stopped or no checkpoint
        succeeded for ``stall_after`` seconds with input waiting."""
        if not self.assigned.is_set():
            return False, "waiting for the first assignment"
        if self.stopped:
            return False, f"partitions stopped: {self.stopped}"
        waiting = any(s.since_checkpoint or s.inflight or s.deliveries for s in self.parts.values())
        idle = self._clock() - self.stats.last_progress
        if waiting and idle > stall_after:
            return False, f"no checkpoint for {idle:.0f}s with records waiting"
        return True, "ok"

    # -- the ownership loop's hooks ------------------------------------------------

    def _load(self, opened: Opened) -> tuple[PartitionState, str]:
        engine = self._new_engine(self.engine_settings)
        restored = engine.restore(opened.records)
        # Restored state lives as long as the assignment: keep it out of GC scans.
        gc.freeze()
        self.stats.restores += 1
        self.stats.restored_sessions += restored
        state = PartitionState(
            partition=opened.partition,
            engine=engine,
            writer=opened.writer,
            next_offset=opened.committed,
            committed=opened.committed,
            input_topic=self.config.input_topic,
            partitions=self.transport.input_partitions(),
            check_partitioning=self.config.check_partitioning,
            last_checkpoint=self._clock(),
        )
        return state, f"{restored} session(s)"

    def _forget(self, state: PartitionState) -> None:
        if self.fleet is not None:
            self.fleet.discard(state.partition)

    async def _halt(self, state: PartitionState, error: BaseException) -> None:
        """Stop the partition's background commit and deliveries: they send nothing more."""
        if state.failed is None:
            state.failed = error
        if state.inflight is not None and not state.inflight.done():
            state.inflight.cancel()
            with contextlib.suppress(BaseException):
                await state.inflight
        for delivery in state.deliveries:
            delivery.cancel()
        for delivery in state.deliveries:
            with contextlib.suppress(BaseException):
                await delivery
        state.deliveries.clear()

    def _step_failed(self) -> None:
        self.stats.crashes += 1
        if self.on_failure is not None:
            self.on_failure("step")

    # -- processing ----------------------------------------------------------

    async def _apply(self, batch: dict[int, list[InputRecord]], started: float) -> int:
        """Process a polled batch, checkpoint what is due; returns records applied.

        Under at-least-once the step does not wait for the outputs it sent: their
        acknowledgements (and the decisions that wait for them) are awaited in the
        background while the next steps poll and process (see :meth:`_deliver`)."""
        polled_for = dict(self.parts)
        await self._reap()
        # A partition reset by the reap was sought back to its checkpoint: what was
        # polled for it before comes again, and must not be applied past the gap.
        batch = {p: rs for p, rs in batch.items() if self.parts.get(p) is polled_for.get(p)}
        applied = await self._process(batch, started)
        await self._reap()  # a send that failed at once resets its partition now
        now = self._clock()
        due = [s for s in self.parts.values() if self._checkpoint_now(s, now)]
        if due:
            await self._checkpoint_all(due)
        elif not any(s.since_checkpoint or s.inflight or s.deliveries for s in self.parts.values()):
            self.stats.last_progress = now
        return applied

    def _checkpoint_now(self, state: PartitionState, now: float) -> bool:
        """Whether to checkpoint the partition in this step: when it is due and every
        batch it processed is acknowledged; when it is overdue (twice the interval or
        the count) even if that means waiting for the acknowledgements first."""
        interval, every = self.config.commit_interval, self.config.commit_every
        if not state.due(now, interval, every):
            return False
        if not state.deliveries:
            return True
        return state.since_checkpoint >= 2 * every or now - state.last_checkpoint >= 2 * interval

    async def _process(self, batch: dict[int, list[InputRecord]], started: float) -> int:
        applied = 0
        deliveries: list[asyncio.Future[None]] = []
        in_transaction: list[Coroutine[Any, Any, None]] = []
        try:
            for p, records in sorted(batch.items()):
                state = self.parts.get(p)
                if state is None:
                    continue
                while len(state.deliveries) >= self.config.max_pending_batches:
                    await state.deliveries[0]  # bounded: wait for the oldest batch's acks
                    state.deliveries.popleft()
                outputs: list[OutputEvent] = []
                try:
                    for record in records:
                        if record.offset < state.next_offset:
                            continue  # delivered again (a seek back): already applied
                        outputs.extend(state.process(record, self.fleet))
                        applied += 1
                except Exception as exc:  # an engine bug: never skip the record, retry it
                    log.exception("spanguard: engine failed on partition %d", p)
                    await self._reset(p, exc)
                    continue
                if outputs:
                    completion = await self._deliver(state, outputs)
                    if completion is None:
                        continue
                    if self.config.exactly_once:
                        in_transaction.append(completion)
                        continue
                    if state.deliveries:
                        self.stats.overlapped += 1
                    delivery = asyncio.ensure_future(completion)
                    state.deliveries.append(delivery)
                    deliveries.append(delivery)
            if self.fleet is not None and applied:
                # Monitoring's share of the batch comes after its outputs are handed to the
                # producer, and after one turn of the loop (acknowledgement callbacks and
                # the producer's sender wake-up run first; the write itself may follow).
                await asyncio.sleep(0)
                self.fleet.flush()
        except BaseException:
            # The partitions' completions have not started: closed, not left for the
            # collector to warn about (the step fails or is cancelled as before).
            for completion in in_transaction:
                completion.close()
            raise
        if in_transaction:  # every partition's acknowledgements awaited together
            await asyncio.gather(*in_transaction)
        self.stats.processed += applied
        if applied and self.on_batch is not None:
            self._report_batch(applied, started, deliveries)
        return applied

    def _report_batch(
        self, applied: int, started: float, deliveries: list[asyncio.Future[None]]
    ) -> None:
        """Call ``on_batch`` once every output of the batch is acknowledged."""
        on_batch = self.on_batch
        if on_batch is None:
            return
        remaining = len(deliveries)
        if remaining == 0:
            on_batch(applied, time.perf_counter() - started)
            return

        def one_done(_: asyncio.Future[None]) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                on_batch(applied, time.perf_counter() - started)

        for delivery in deliveries:
            delivery.add_done_callback(one_done)

    def _record(self, event: OutputEvent) -> OutRecord:
        key = None if isinstance(event, EventRejected) else event.session_id.encode("utf-8")
        topic = self.config.output_topics[TOPIC_OF[event.type]]
        return OutRecord(topic, key, encode_output(event))

    def _groups(
        self, outputs: Sequence[OutputEvent]
    ) -> tuple[list[OutputEvent], dict[Session, tuple[list[OutputEvent], list[OutputEvent]]]]:
        """Split one partition's outputs of a batch into the dead letters and, per
        session, what can be sent at once and the decisions (and compaction records,
        contract 1.2) that must wait for the acknowledgement of the first group.

        A decision waits only when an earlier fault, pin or recompute request of its
        own session is in this batch (its own causes, or an earlier input's): most
        decisions then cost one broker round trip, not two. Earlier batches' outputs
        of the session are awaited as a whole before any of this batch's is sent
        (:meth:`_deliver`). A dead letter is no decision's cause (the contract's
        ordering rule names faults, pins and recompute requests), so it never makes
        one wait, nor waits itself. Under exactly-once the transaction makes the
        batch's outputs visible together, so nothing waits.
        """
        loose: list[OutputEvent] = []
        groups: dict[Session, tuple[list[OutputEvent], list[OutputEvent]]] = {}
        caused: set[Session] = set()
        for event in outputs:
            if isinstance(event, EventRejected):
                loose.append(event)
                continue
            session = (event.tenant, event.session_id)
            first, second = groups.setdefault(session, ([], []))
            if not isinstance(event, EvictionDecided | ContextCompacted):
                caused.add(session)
                first.append(event)
            elif self.config.exactly_once or session not in caused:
                first.append(event)
            else:
                second.append(event)
        return loose, groups

    async def _deliver(
        self, state: PartitionState, outputs: Sequence[OutputEvent]
    ) -> Coroutine[Any, Any, None] | None:
        """Send one partition's outputs of a batch, keeping each session's order:

        * a session whose earlier batches' outputs are all acknowledged sends its
          first group now; its waiting decisions go once that group is acknowledged;
        * a session with outputs of an earlier batch still unacknowledged sends
          nothing of this batch until they are (then the same two groups);
        * dead letters go now.

        Returns what waits (:meth:`_complete`). Under at-least-once :meth:`_process`
        runs it as a background task, kept in ``state.deliveries`` until the
        partition's checkpoint waits for it, and the step goes on to poll the next
        batch. Under exactly-once the outputs are in the partition's transaction and
        the step awaits every partition's together, before the next poll.
        """
        if state.failed is not None:
            return None  # the partition is reset by the next _reap
        loose, groups = self._groups(outputs)
        loop = asyncio.get_running_loop()
        first: list[Sent] = []
        free: list[_Free] = []
        busy: list[_Held] = []
        await self._send(state, loose, first)
        for session, (now, later) in groups.items():
            prior = state.tails.get(session)
            done: asyncio.Future[bool] = loop.create_future()
            state.tails[session] = done
            if prior is None or (prior.done() and not prior.cancelled() and prior.result()):
                await self._send(state, now, first)
                free.append((session, later, done))
            else:
                busy.append((session, prior, now, later, done))
        return self._complete(state, first, free, busy)

    async def _complete(
        self,
        state: PartitionState,
        first: list[Sent],
        free: list[_Free],
        busy: list[_Held],
    ) -> None:
        """The part of :meth:`_deliver` that waits; never raises an ``Exception`` (a
        failure is recorded in ``state.failed``), and resolves every session's
        future whatever happens, so later batches never wait forever."""

        async def free_sessions() -> None:
            ok = await self._acked(state, first)
            second: list[Sent] = []
            for _, later, _ in free:
                ok = ok and await self._send(state, later, second, after_acks=True)
            ok = ok and await self._acked(state, second)
            for session, _, done in free:
                _resolve(state, session, done, ok)

        async def after_earlier(
            session: Session,
            prior: asyncio.Future[bool],
            now: list[OutputEvent],
            later: list[OutputEvent],
            done: asyncio.Future[bool],
        ) -> None:
            await asyncio.wait([prior])  # never cancels the earlier batch's future
            ok = not prior.cancelled() and prior.result()
            for group in (now, later):
                sent: list[Sent] = []
                ok = (
                    ok
                    and await self._send(state, group, sent, after_acks=True)
                    and await self._acked(state, sent)
                )
            _resolve(state, session, done, ok)

        try:
            if busy:
                await asyncio.gather(free_sessions(), *(after_earlier(*b) for b in busy))
            else:
                await free_sessions()
        except Exception as exc:
            self._fail(state, exc)
        finally:
            for session, _, done in free:
                _resolve(state, session, done, False)
            for session, _, _, _, done in busy:
                _resolve(state, session, done, False)

    async def _send(
        self,
        state: PartitionState,
        events: Sequence[OutputEvent],
        into: list[Sent],
        after_acks: bool = False,
    ) -> bool:
        """Hand events to the producer (appended to ``into`` with their acks); False
        once the partition failed. ``after_acks``: sent by a delivery that waited for
        acknowledgements (see :meth:`Transport.send`)."""
        for event in events:
            if state.failed is not None:
                return False
            record = self._record(event)
            sent_ns = time.monotonic_ns()
            try:
                if self.config.exactly_once:
                    ack = await state.writer.send(record)
                else:
                    ack = await self.transport.send(record, after_acks=after_acks)
            except Exception as exc:
                self._fail(state, exc)
                return False
            into.append((event, sent_ns, ack))
            self.stats.outputs += 1
        return state.failed is None

    async def _acked(self, state: PartitionState, sent: list[Sent]) -> bool:
        """Wait for the acknowledgements of ``sent``; False if any failed."""
        if sent:
            results: list[Any]
            try:  # one deadline for the group (a task per ack would cost more than the send)
                results = await self._io(
                    asyncio.gather(*(ack for *_, ack in sent), return_exceptions=True)
                )
            except TimeoutError as exc:
                results = [exc] * len(sent)
            for (event, sent_ns, _), result in zip(sent, results, strict=True):
                if isinstance(result, BaseException):
                    self._fail(state, result)
                elif self.on_ack is not None:
                    self.on_ack(event, result, sent_ns)
        return state.failed is None

    def _fail(self, state: PartitionState, error: BaseException) -> None:
        """Record a partition's first delivery failure (reset by the next step)."""
        if state.failed is None:
            state.failed = error
            self.stats.send_failures += 1
            if self.on_failure is not None:
                self.on_failure("send")

    async def _drain(self, state: PartitionState) -> None:
        """Wait until every batch the partition processed is acknowledged; raise the
        error of one that could not be written."""
        while state.deliveries:
            await state.deliveries[0]
            state.deliveries.popleft()
        if state.failed is not None:
            raise state.failed

    def abandon(self) -> None:
        """Cancel every background delivery and commit without writing anything more
        (what the death of the process does; for tests that simulate it)."""
        for state in [*self.parts.values(), *self._kept.values()]:
            for task in state.deliveries:
                task.cancel()
            if state.inflight is not None:
                state.inflight.cancel()

    # -- checkpoints ---------------------------------------------------------

    async def _checkpoint_all(self, states: Sequence[PartitionState]) -> None:
        """Checkpoint the due partitions. Under exactly-once the outputs are in the
        transaction, so processing waits for the commit; under at-least-once the
        commit runs in the background while the next batches are processed (their
        changes go to the next checkpoint), so the gate never waits for it."""
        if not self.config.exactly_once:
            for state in states:
                try:  # an overdue checkpoint waits for the acknowledgements it covers
                    await self._drain(state)
                except Exception as exc:
                    await self._reset(state.partition, exc)
            await self._reap()  # a commit that failed meanwhile resets its partition
            for state in states:
                if self.parts.get(state.partition) is state and state.inflight is None:
                    snapshot = self._snapshot(state)
                    state.inflight = asyncio.ensure_future(self._commit(state, snapshot))
            return
        results = await asyncio.gather(
            *(self._checkpoint(s) for s in states), return_exceptions=True
        )
        for state, result in zip(states, results, strict=True):
            if isinstance(result, BaseException):
                await self._reset(state.partition, result)

    async def _reap(self) -> None:
        """Forget the acknowledged batches; reset the partitions whose background
        commit or delivery failed."""
        for state in list(self.parts.values()):
            while state.deliveries and state.deliveries[0].done():
                delivery = state.deliveries.popleft()
                error = None if delivery.cancelled() else delivery.exception()
                if error is not None:
                    raise error  # only a dying process's (deliveries catch every Exception)
            task = state.inflight
            if task is not None and task.done():
                state.inflight = None
                error = task.exception()
                if error is not None:
                    await self._reset(state.partition, error)
                    continue
            if state.failed is not None:
                await self._reset(state.partition, state.failed)

    async def _checkpoint(self, state: PartitionState) -> None:
        """Checkpoint now and wait for it (after every batch is acknowledged and any
        commit already under way)."""
        await self._drain(state)
        await self._settle(state)
        if state.since_checkpoint:
            await self._commit(state, self._snapshot(state))

    async def _settle(self, state: PartitionState) -> None:
        """Wait for the partition's background commit; raise its error."""
        task, state.inflight = state.inflight, None
        if task is not None:
            await task

    def _snapshot(self, state: PartitionState) -> Checkpoint:
        """1. the outputs of every applied input are acknowledged (the caller drained
        the partition's deliveries: no batch of it is pending);
        2. take the state changes and fleet partials since the last checkpoint and
        the input position they lead to."""
        p = state.partition
        partials = self.fleet.partials(p) if self.fleet is not None else []
        checkpoint = Checkpoint(state.engine.drain_changes(), partials, state.next_offset)
        state.since_checkpoint = 0
        state.last_checkpoint = self._clock()
        return checkpoint

    async def _commit(self, state: PartitionState, checkpoint: Checkpoint) -> None:
        """3. write them in the partition's transaction; 4. commit it with the input
        position; 5. clear the partition's failure count."""
        p = state.partition
        acks: list[Ack] = []
        for key, value in checkpoint.changes:
            acks.append(
                await state.writer.send(OutRecord(self.config.changelog_topic, key, value, p))
            )
        if self.config.fleet_topic is not None:
            for key, value in checkpoint.partials:
                acks.append(await state.writer.send(OutRecord(self.config.fleet_topic, key, value)))
        await self._io(asyncio.gather(*acks))
        await self._io(state.writer.commit(checkpoint.next_offset))
        state.committed = checkpoint.next_offset
        state.failures = 0
        self.stats.checkpoints += 1
        self.stats.state_records += len(checkpoint.changes)
        self.stats.last_progress = self._clock()
