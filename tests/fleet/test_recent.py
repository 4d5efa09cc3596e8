"""The inspector's rings of recent records: what they give back and what they cost."""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson

from spanguard.streams.fleet.recent import RecentRecords


def _summary(seq: int) -> dict[str, Any]:
    return {
        "type": "eviction.requested",
        "seq": seq,
        "request_id": f"r-{seq}",
        "candidates": ["s1", "s2"],
        "policy": {"threshold": 0.25},
        "outputs": [{"type": "eviction.decided", "id": f"d-{seq}", "committed": ["s1"]}],
    }


def test_a_ring_gives_back_its_last_summaries_as_recorded() -> None:
    recent = RecentRecords(ring_size=3, max_sessions=2)
    summaries = [_summary(seq) for seq in range(5)]
    for summary in summaries:
        recent.record("t", "a", summary)
    recent.record("t", "b", _summary(9))
    assert recent.get("t", "a") == summaries[-3:]
    recent.record("t", "c", _summary(10))  # the least recently active session leaves
    assert recent.get("t", "a") == [] and recent.get("t", "b") == [_summary(9)]
    assert len(recent) == 2


def test_a_summary_costs_about_its_json() -> None:
    # Kept as a dict it would cost ~4 times its JSON; kept as orjson's own result,
    # the ~4 KB buffer orjson wrote it into.
    recent = RecentRecords(ring_size=1_000, max_sessions=1)
    recent.record("t", "a", _summary(0))  # the session's ring exists before counting
    size = len(orjson.dumps(_summary(500)))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for seq in range(500, 1_000):
            recent.record("t", "a", _summary(seq))
        grown = (tracemalloc.get_traced_memory()[0] - before) / 500
    finally:
        tracemalloc.stop()
    assert grown < size + 64, (grown, size)
