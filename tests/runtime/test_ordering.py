"""The contract's ordering rule, and no more waiting than it needs."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanguard.schemas import EventRejected
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.runtime.memory import MemoryTransport
from spanguard.streams.runtime.records import OutRecord
from spanguard.streams.runtime.testing import RuntimeTestDriver, output_identity
from spanguard.streams.sim.scenarios import broken, demo_fleet, healthy


async def journal_of_one_step(
    lines: list[bytes], after_acks: list[tuple[str, str]] | None = None
) -> list[tuple[str, str, str]]:
    """Process ``lines`` in one step; log ("sent" | "acked", type, session) in the
    order things happened, with acks deferred to the next loop turn as a broker's are;
    (type, session) of what was sent ``after_acks`` goes to that list too."""
    driver = RuntimeTestDriver(partitions=1, batch_size=len(lines))
    driver.produce(lines)
    runtime, transport = driver.new_runtime()
    log: list[tuple[str, str, str]] = []
    after_acks_log = after_acks
    original = MemoryTransport.send

    async def send(self: MemoryTransport, record: OutRecord, *, after_acks: bool = False) -> Any:
        await original(self, record, after_acks=after_acks)
        what = (orjson.loads(record.value or b"{}")["type"], (record.key or b"").decode())
        log.append(("sent", *what))
        if after_acks and after_acks_log is not None:
            after_acks_log.append(what)
        acked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def ack() -> None:
            log.append(("acked", *what))
            acked.set_result(None)

        asyncio.get_running_loop().call_soon(ack)
        return acked

    transport.send = send.__get__(transport)  # type: ignore[method-assign]
    await runtime.assign([0])
    await runtime.step()  # opens the partition
    while await runtime.step() == 0:
        pass
    return log


async def test_a_decision_is_sent_after_its_sessions_earlier_outputs_are_acked() -> None:
    log = await journal_of_one_step(broken("s-bad").lines() + healthy("s-good").lines())
    first_decision = log.index(("sent", "eviction.decided", "s-bad"))
    faults_acked = [i for i, e in enumerate(log) if e == ("acked", "integrity.fault", "s-bad")]
    assert faults_acked and max(faults_acked) < first_decision


async def test_a_decision_that_waited_for_its_causes_is_sent_as_such() -> None:
    # The Kafka transport sends it on a producer of its own: on the step's, it queued
    # behind the request the next batch's first outputs had in flight.
    after_acks: list[tuple[str, str]] = []
    lines = broken("s-bad").lines() + healthy("s-good").lines()
    log = await journal_of_one_step(lines, after_acks)
    assert ("eviction.decided", "s-bad") in after_acks
    assert {kind for kind, _ in after_acks} <= {"eviction.decided", "context.compacted"}
    # s-good's first decision waited for nothing: the step sent it at once
    good = ("eviction.decided", "s-good")
    assert after_acks.count(good) == log.count(("sent", *good)) - 1


async def test_a_decision_with_no_earlier_output_in_its_step_does_not_wait() -> None:
    log = await journal_of_one_step(broken("s-bad").lines() + healthy("s-good").lines())
    # s-good's first decision has no fault, pin or recompute before it: it goes out
    # with s-bad's faults instead of one broker round trip later.
    good = log.index(("sent", "eviction.decided", "s-good"))
    first_ack = next(i for i, e in enumerate(log) if e[0] == "acked")
    assert good < first_ack


async def test_a_dead_letter_of_the_session_does_not_make_its_decision_wait() -> None:
    lines = healthy("s-good").lines()
    first_request = next(i for i, line in enumerate(lines) if b"eviction.requested" in line)
    # readable tenant and session, no seq: a dead letter of s-good that moves nothing
    garbage = orjson.dumps(
        {"type": "span.added", "schema_version": 1, "tenant": "acme", "session_id": "s-good"}
    )
    log = await journal_of_one_step([*lines[:first_request], garbage, *lines[first_request:]])
    rejected = log.index(("sent", "event.rejected", ""))
    good = log.index(("sent", "eviction.decided", "s-good"))
    first_ack = next(i for i, e in enumerate(log) if e[0] == "acked")
    assert rejected < good < first_ack


Entry = tuple[str, ...]


async def journal_of_overlapping_steps(
    lines: list[bytes], batch_size: int, releases: list[int], rng: random.Random
) -> list[Entry]:
    """Process ``lines`` on one partition with acknowledgements held back: at each turn
    of the event loop, ``releases[i]`` of the held ones (chosen by ``rng``) come, all of
    them every fourth turn. Logs ("poll", offsets...), ("sent", id), ("acked", id) and
    ("commit", offset) in the order things happened."""
    driver = RuntimeTestDriver(partitions=1, batch_size=batch_size, commit_every=4)
    driver.produce(lines)
    runtime, transport = driver.new_runtime()
    log: list[Entry] = []
    held: list[tuple[str, asyncio.Future[Any]]] = []
    send, poll, open_partition = transport.send, transport.poll, transport.open_partition

    async def holding_send(record: OutRecord, *, after_acks: bool = False) -> Any:
        await send(record, after_acks=after_acks)
        identity = output_identity(record.value or b"")
        log.append(("sent", identity))
        acked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        held.append((identity, acked))
        return acked

    async def logged_poll(max_records: int, timeout: float) -> Any:
        batch = await poll(max_records, timeout)
        if batch:
            log.append(("poll", *(str(r.offset) for rs in batch.values() for r in rs)))
        return batch

    async def logged_open(partition: int) -> Any:
        writer = await open_partition(partition)
        commit = writer.commit

        async def logged_commit(next_offset: int) -> None:
            log.append(("commit", str(next_offset)))
            await commit(next_offset)

        writer.commit = logged_commit  # type: ignore[method-assign]
        return writer

    async def broker() -> None:
        for turn in itertools.count():
            await asyncio.sleep(0)  # one turn of the loop: the runtime runs in between
            rng.shuffle(held)
            count = len(held) if turn % 4 == 3 else releases[turn % len(releases)]
            for identity, acked in held[:count]:
                log.append(("acked", identity))
                acked.set_result(None)
            del held[:count]

    transport.send = holding_send  # type: ignore[method-assign]
    transport.poll = logged_poll  # type: ignore[method-assign]
    transport.open_partition = logged_open  # type: ignore[method-assign]
    acks = asyncio.ensure_future(broker())
    try:
        await runtime.assign([0])
        while await runtime.step() or await transport.lag(runtime.positions()):
            pass
        await runtime.close()
    finally:
        acks.cancel()
    assert runtime.stats.send_failures == 0
    assert runtime.stats.overlapped > 0
    return log


def cause_and_order(lines: list[bytes]) -> dict[str, tuple[int, str, str | None, int]]:
    """Per output identity: its input offset, type, session and rank in replay's order."""
    engine = Engine()
    found: dict[str, tuple[int, str, str | None, int]] = {}
    for n, line in enumerate(lines):
        for output in engine.process_raw(line, Source("replay", -1, n)):
            raw = encode_output(output)
            session = None if isinstance(output, EventRejected) else output.session_id
            found.setdefault(output_identity(raw), (n, output.type, session, len(found)))
    return found


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch_size=st.integers(1, 12),
    releases=st.lists(st.integers(0, 6), min_size=1, max_size=8),
    seed=st.integers(0, 2**16),
)
async def test_overlapping_batches_keep_each_sessions_order_and_checkpoint_only_acked(
    batch_size: int, releases: list[int], seed: int
) -> None:
    """While a batch's acknowledgements are held back the next batches are polled and
    processed, and still: (1) a decision (or compaction record) is sent only after every
    earlier fault, pin and recompute request of its session is acknowledged; (2) no
    output of a session is sent before every output of its earlier batches is
    acknowledged; (3) a checkpoint commits an input offset only when every output of
    the inputs before it is acknowledged; (4) batches did overlap."""
    lines = demo_fleet(6)
    log = await journal_of_overlapping_steps(lines, batch_size, releases, random.Random(seed))
    outputs = cause_and_order(lines)
    batch_of: dict[int, int] = {}
    sent_at: dict[str, int] = {}
    acked_at: dict[str, int] = {}
    overlaps = 0
    for at, (what, *rest) in enumerate(log):
        if what == "poll":
            batch = len({*batch_of.values()})
            batch_of.update((int(offset), batch) for offset in rest)
            overlaps += len(sent_at) > len(acked_at)
        elif what == "sent":
            sent_at.setdefault(rest[0], at)  # the first send (a reset may send again)
        elif what == "acked":
            acked_at.setdefault(rest[0], at)
    assert overlaps > 0, "no batch was polled while outputs awaited acknowledgement"
    assert set(sent_at) == set(outputs) == set(acked_at)
    waiting = ("eviction.decided", "context.compacted")
    for identity, (offset, kind, session, rank) in outputs.items():
        if session is None:
            continue
        for other, (o_offset, o_kind, o_session, o_rank) in outputs.items():
            if o_session != session or o_rank >= rank:
                continue
            if kind in waiting and o_kind not in waiting:  # faults, pins, recompute requests
                assert acked_at[other] < sent_at[identity], (identity, other)
            if batch_of[o_offset] < batch_of[offset]:
                assert acked_at[other] < sent_at[identity], (identity, other)
    for at, (what, *rest) in enumerate(log):
        if what == "commit":
            covered = [i for i, (offset, *_) in outputs.items() if offset < int(rest[0])]
            assert all(acked_at[i] < at for i in covered), rest
