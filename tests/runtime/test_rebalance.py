"""Rebalances on the in-memory broker: an assignment restores only its own partitions,
a revocation drops their sessions, a partition that moves carries its state with it."""

from __future__ import annotations

from collections import Counter

from spanguard.streams.runtime.runtime import Runtime
from spanguard.streams.runtime.testing import RuntimeTestDriver, output_identity
from tests.runtime.helpers import fleet_trace, replay_ids


async def drain(runtime: Runtime, steps: int = 300) -> None:
    for _ in range(steps):
        await runtime.step()


async def test_partitions_move_between_workers_with_their_state() -> None:
    lines = fleet_trace()
    half = len(lines) // 2
    driver = RuntimeTestDriver(exactly_once=True, batch_size=5, commit_every=4)
    driver.produce(lines[:half])
    a, _ = driver.new_runtime()
    b, _ = driver.new_runtime()
    await a.assign(range(4))
    await drain(a)
    assert a.assigned_partitions() == {0, 1, 2, 3}
    restored_before = a.stats.restores

    # a rebalance: everything revoked, then a keeps 0 and 1, b gets 2 and 3
    await a.revoke(range(4))
    await a.assign([0, 1])
    await b.assign([2, 3])
    await drain(a, 2)
    await drain(b, 2)
    assert a.assigned_partitions() == {0, 1} and b.assigned_partitions() == {2, 3}
    assert a.stats.restores == restored_before, "kept partitions are not restored again"
    assert b.stats.restores == 2, "b restores only its own partitions"
    kept = {key for engine in a.engines() for key in engine.sessions}
    moved = {key for engine in b.engines() for key in engine.sessions}
    assert kept and moved and not kept & moved, "a dropped the sessions of what it gave up"

    driver.produce(lines[half:])
    await drain(a)
    await drain(b)
    await a.close()
    await b.close()
    got = Counter(output_identity(v) for v in driver.outputs())
    assert got == replay_ids(lines)
