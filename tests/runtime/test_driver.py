"""The real runtime on the in-memory broker: outputs equal replay's, whatever crashes."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanguard.streams.runtime.testing import RuntimeTestDriver, output_identity
from tests.runtime.helpers import fleet_trace, replay_ids


def ids(driver: RuntimeTestDriver, committed_only: bool = True) -> Counter[str]:
    return Counter(output_identity(v) for v in driver.outputs(committed_only))


@pytest.mark.parametrize("exactly_once", [False, True])
@pytest.mark.parametrize("partitions", [1, 4])
async def test_without_failures_outputs_equal_replay(exactly_once: bool, partitions: int) -> None:
    lines = fleet_trace()
    driver = RuntimeTestDriver(partitions=partitions, exactly_once=exactly_once)
    driver.produce(lines)
    await driver.run()
    assert ids(driver) == replay_ids(lines)
    assert driver.crashes == 0


async def test_a_write_count_exists_to_crash_at() -> None:
    """Sanity for the property below: a run makes many writes to crash before."""
    driver = RuntimeTestDriver(exactly_once=True)
    driver.produce(fleet_trace())
    await driver.run()
    assert driver.broker.writes > 300  # the crash points drawn below fall inside a run


async def test_late_acknowledgements_make_batches_overlap() -> None:
    """Sanity for the properties below: with the broker's acknowledgements a few loop
    turns late, batches are processed while earlier ones' outputs still wait."""
    lines = fleet_trace()
    driver = RuntimeTestDriver(ack_turns=3, lose_unacked=True)
    driver.produce(lines)
    await driver.run()
    assert driver.overlapped > 0
    assert ids(driver) == replay_ids(lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    exactly_once=st.booleans(),
    crash_at=st.lists(st.integers(min_value=1, max_value=400), max_size=6),
    batch_size=st.integers(1, 40),
    commit_every=st.integers(1, 60),
    ack_turns=st.integers(0, 6),
    lose_unacked=st.booleans(),
)
async def test_crash_before_any_write_never_changes_or_loses_outputs(
    exactly_once: bool,
    crash_at: list[int],
    batch_size: int,
    commit_every: int,
    ack_turns: int,
    lose_unacked: bool,
) -> None:
    """Also with late acknowledgements (overlapping batches) and a crash that loses
    the outputs not acknowledged yet: a checkpoint never covers one of them."""
    lines = fleet_trace()
    driver = RuntimeTestDriver(
        exactly_once=exactly_once,
        batch_size=batch_size,
        commit_every=commit_every,
        ack_turns=ack_turns,
        lose_unacked=lose_unacked,
    )
    driver.produce(lines)
    await driver.run(crash_at=crash_at)
    expected = replay_ids(lines)
    if exactly_once:
        # read committed: every output exactly once
        assert ids(driver) == expected
    else:
        # at-least-once: nothing missing, nothing that replay does not make
        assert set(ids(driver, committed_only=False)) == set(expected)


@pytest.mark.parametrize(
    ("exactly_once", "ack_turns"), [(False, 0), (True, 0), (False, 3), (True, 3)]
)
async def test_a_crash_before_each_single_write_in_turn(exactly_once: bool, ack_turns: int) -> None:
    """Exhaustive on a small fleet: for every write of the run, crash just before it
    (with late acknowledgements: batches overlap, and the crash loses what was not
    acknowledged)."""
    lines = fleet_trace(sessions=3, seed=2)
    expected = replay_ids(lines)
    options = {"batch_size": 4, "commit_every": 3, "ack_turns": ack_turns, "lose_unacked": True}
    clean = RuntimeTestDriver(exactly_once=exactly_once, **options)
    clean.produce(lines)
    await clean.run()
    assert clean.broker.writes > 50
    assert (clean.overlapped > 0) != exactly_once, "at-least-once batches overlap"
    for write in range(1, clean.broker.writes + 1):
        driver = RuntimeTestDriver(exactly_once=exactly_once, **options)
        driver.produce(lines)
        await driver.run(crash_at=[write])
        assert driver.crashes == 1, write
        if exactly_once:
            assert ids(driver) == expected, write
        else:
            assert set(ids(driver, committed_only=False)) == set(expected), write
