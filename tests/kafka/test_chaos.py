"""A short chaos run in CI (bench/chaos.py does the long ones): workers killed with
SIGKILL while a fleet streams in and sessions expire, outputs compared with replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import ChaosPlan, run_chaos


@pytest.mark.parametrize(("workers", "guarantee"), [(2, "at_least_once"), (1, "exactly_once")])
def test_kills_lose_and_invent_nothing(
    kafka_bootstrap: str, tmp_path: Path, workers: int, guarantee: str
) -> None:
    plan = ChaosPlan(
        workers=workers,
        guarantee=guarantee,
        sessions=40,
        events_per_session=40,
        chunks=4,
        chunk_gap=1.5,
        kill_every=3.0,
        restart_after=1.0,
        settle=20.0,
        timeout=240.0,
    )
    prefix = f"chaos-{workers}-{guarantee}-{tmp_path.name[-8:]}"
    result = run_chaos(kafka_bootstrap, plan, tmp_path, prefix)
    assert result.kills >= 1, result
    # Sessions expire while workers are killed (idle expiry is on): the comparison
    # covers SESSION_EXPIRED refusals too.
    assert result.expired > 0 and result.refused_expired > 0, result
    assert (result.missing, result.extra, result.stalled) == (0, 0, 0), result
    if guarantee == "exactly_once":
        assert result.duplicate == 0, result
