"""The contract's ordering rule, and no more waiting than it needs."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from spanguard.streams.runtime.memory import MemoryTransport
from spanguard.streams.runtime.records import OutRecord
from spanguard.streams.runtime.testing import RuntimeTestDriver
from spanguard.streams.sim.scenarios import broken, healthy


async def journal_of_one_step(lines: list[bytes]) -> list[tuple[str, str, str]]:
    """Process ``lines`` in one step; log ("sent" | "acked", type, session) in the
    order things happened, with acks deferred to the next loop turn as a broker's are."""
    driver = RuntimeTestDriver(partitions=1, batch_size=len(lines))
    driver.produce(lines)
    runtime, transport = driver.new_runtime()
    log: list[tuple[str, str, str]] = []
    original = MemoryTransport.send

    async def send(self: MemoryTransport, record: OutRecord) -> Any:
        await original(self, record)
        what = (orjson.loads(record.value or b"{}")["type"], (record.key or b"").decode())
        log.append(("sent", *what))
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
