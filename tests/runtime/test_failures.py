"""Failures the runtime must neither hide nor skip past."""

from __future__ import annotations

from typing import Any

from spanguard.streams.runtime.memory import MemoryTransport
from spanguard.streams.runtime.records import OutRecord
from spanguard.streams.runtime.testing import RuntimeTestDriver
from spanguard.streams.sim.scenarios import broken, healthy


class RecordTooLarge(Exception):
    """What the broker answers for a record over its limit (never cured by retrying)."""

    retriable = False


class Flaky(Exception):
    """A passing broker hiccup."""

    retriable = True


def lines() -> list[bytes]:
    return broken("s-bad").lines() + healthy("s-good").lines()


async def run_with(driver: RuntimeTestDriver, fail: Any, steps: int = 400) -> Any:
    runtime, transport = driver.new_runtime()
    original = MemoryTransport.send

    async def send(self: MemoryTransport, record: OutRecord, *, after_acks: bool = False) -> Any:
        fail(record)
        return await original(self, record, after_acks=after_acks)

    transport.send = send.__get__(transport)  # type: ignore[method-assign]
    await runtime.assign(range(driver.broker.partitions))
    for _ in range(steps):
        await runtime.step()
    return runtime


async def test_an_output_the_broker_refuses_stops_its_partition_loudly() -> None:
    driver = RuntimeTestDriver(partitions=1, batch_size=1, commit_every=1)
    driver.produce(lines())

    def fail(record: OutRecord) -> None:
        if record.key == b"s-bad" and b'"eviction.decided"' in (record.value or b""):
            raise RecordTooLarge("MessageSizeTooLargeError")

    runtime = await run_with(driver, fail)
    ready, reason = runtime.health()
    assert not ready and "RecordTooLarge" in reason
    assert 0 in runtime.stopped and runtime.assigned_partitions() == set()
    # nothing at or after the refused decision's input was committed
    first_decision = next(i for i, line in enumerate(lines()) if b"eviction.requested" in line)
    assert driver.broker.committed.get(0, 0) <= first_decision
    assert runtime.stats.send_failures >= runtime.config.max_failures


async def test_a_passing_failure_is_retried_and_loses_nothing() -> None:
    driver = RuntimeTestDriver(partitions=1, batch_size=3, commit_every=2)
    driver.produce(lines())
    failures = iter(range(5))

    def fail(record: OutRecord) -> None:
        if b'"integrity.fault"' in (record.value or b"") and next(failures, None) is not None:
            raise Flaky("broker not available")

    runtime = await run_with(driver, fail)
    await runtime.close()
    assert runtime.health() == (True, "ok")
    assert driver.broker.committed[0] == len(lines())
    reference = RuntimeTestDriver(partitions=1)
    reference.produce(lines())
    await reference.run()
    assert set(driver.outputs(committed_only=False)) == set(reference.outputs())


async def test_not_ready_before_the_first_assignment_is_restored() -> None:
    driver = RuntimeTestDriver(partitions=2)
    runtime, _ = driver.new_runtime()
    assert runtime.health() == (False, "waiting for the first assignment")
    await runtime.assign([0, 1])
    assert not runtime.health()[0], "assigned but not restored yet"
    await runtime.step()
    assert runtime.health() == (True, "ok")
