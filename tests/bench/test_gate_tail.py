"""bench.gate_tail's parsing and report logic (no broker): the offset-commit keys it
counts transactions by, the transaction rate in a window, and the targets met or not."""

from __future__ import annotations

import struct
from typing import Any

from bench.gate_relay import script
from bench.gate_tail import markdown, offset_commit_key, report, transaction_rate, verdicts


def _key(version: int, group: str, topic: str, partition: int) -> bytes:
    g, t = group.encode(), topic.encode()
    return struct.pack(f">hh{len(g)}sh{len(t)}si", version, len(g), g, len(t), t, partition)


def test_offset_commit_keys_are_read_and_others_skipped() -> None:
    assert offset_commit_key(_key(1, "b3-app", "b3.events", 2)) == ("b3-app", "b3.events", 2)
    assert offset_commit_key(_key(0, "g", "t", 0)) == ("g", "t", 0)
    group_metadata = struct.pack(">hh6s", 2, 6, b"b3-app")
    assert offset_commit_key(group_metadata) is None
    assert offset_commit_key(None) is None
    assert offset_commit_key(b"") is None


def test_transaction_rate_counts_the_topic_in_the_window() -> None:
    commits = [
        ("b1.events", 0, 1_000),
        ("b1.events", 0, 1_100),
        ("b1.events", 1, 1_050),
        ("b1.events", 1, 1_170),
        ("b1.events", 0, 5_000),  # after the window
        ("b1.fleet", 0, 1_500),  # another topic
    ]
    rate = transaction_rate(commits, "b1.events", [1_000, 2_000])
    assert rate == {"transactions": 4, "window_s": 1.0, "per_s": 4.0, "period_p50_ms": 110.0}
    assert transaction_rate([], "b1.events", [0, 500])["period_p50_ms"] is None


def _row(medium: str, label: str, p99: float, floor_p99: float, **kw: Any) -> dict[str, Any]:
    row = {
        "guarantee": "at_least_once",
        "worker": "current",
        "broker_log": medium,
        "rate": {"1000": 1000.0, "2000": 2000.0, "half": 3500.0}[label],
        "rate_label": label,
        "p50_ms": 5.0,
        "p99_ms": p99,
        "p999_ms": p99 * 2,
        "broker_floor": {"p50_ms": 1.0, "p99_ms": floor_p99, "p999_ms": floor_p99 * 2},
        "transactions": {"per_s": 4.0, "transactions": 40, "window_s": 10.0, "period_p50_ms": 1000},
        "commit_interval_s": None,
        "load_avg_1m": 1.0,
    }
    return row | kw


def test_verdicts_judge_the_median_of_this_checkouts_rows() -> None:
    rows = [
        _row("tmpfs", "1000", 40.0, 10.0),
        _row("tmpfs", "1000", 90.0, 10.0),
        _row("tmpfs", "1000", 45.0, 10.0),
        _row("tmpfs", "1000", 10.0, 10.0, worker="/tmp/base"),  # the baseline's: not judged
        _row("tmpfs", "1000", 30.0, 10.0, worker="relay"),  # the order's floor: beside it
        _row("tmpfs", "half", 30.0, 10.0),
        _row("disk", "1000", 120.0, 30.0),
        _row("disk", "half", 50.0, 30.0),
    ]
    capacities = [
        {"broker_log": "tmpfs", "worker": "/tmp/base", "events_per_s": 7000},
        {"broker_log": "tmpfs", "worker": "current", "events_per_s": 6900},
        {"broker_log": "disk", "worker": "current", "events_per_s": 6000},
    ]
    found = {v.name: v for v in verdicts(rows, capacities)}
    tmpfs = found["at-least-once, 1,000 events/s, broker log on tmpfs: p99"]
    assert tmpfs.met is True
    assert tmpfs.figure == "45.0 ms, broker floor p99 10.0 ms, the order alone (relay) p99 30.0 ms"
    assert found["at-least-once, 1,000 events/s, broker log on disk: p99"].met is False
    assert found["moonshot, half capacity (3,500 events/s), broker log on tmpfs: p99"].met is False
    assert found["moonshot, half capacity (3,500 events/s), broker log on disk: p99"].met is True
    assert found["throughput, broker log on tmpfs: this checkout / baseline"].met is False
    assert found["throughput, broker log on disk: this checkout / baseline"].met is None
    first = next(iter(found))
    assert "tmpfs" in first  # the issue's own target comes first


def test_report_lists_rows_targets_and_exactly_once() -> None:
    eo = _row("tmpfs", "1000", 150.0, 10.0, guarantee="exactly_once", commit_interval_s=0.1)
    lines = report([_row("tmpfs", "1000", 40.0, 10.0), eo], [])
    assert any("met" in line and "<= 50 ms" in line for line in lines)
    exactly_once = [line for line in lines if line.startswith("exactly-once")]
    assert len(exactly_once) == 1 and "commit interval 0.1 s" in exactly_once[0]
    assert "every 1000 ms (p50) = the interval + 900 ms of commit and step" in exactly_once[0]
    assert "4.0 transactions/s" in exactly_once[0]


def test_markdown_table_has_a_row_per_measure_and_the_verdicts() -> None:
    eo = _row("tmpfs", "1000", 150.0, 10.0, guarantee="exactly_once", commit_interval_s=0.02)
    capacities = [
        {"broker_log": "tmpfs", "worker": "current", "events_per_s": 7000, "load_avg_1m": 1.0}
    ]
    lines = markdown([_row("tmpfs", "half", 30.0, 10.0), eo], capacities)
    assert "| tmpfs | current | 7,000 | 1.0 |" in lines
    assert any("| 3,500 (half capacity) |" in line for line in lines)
    assert any("| exactly-once, interval 0.02 s |" in line for line in lines)
    assert any(line.endswith("not measured") for line in lines)
    assert lines[-1].startswith("- exactly-once, 1,000 events/s, broker log on tmpfs")


def test_a_row_that_fell_behind_is_called_a_backlog() -> None:
    rows = [
        _row("tmpfs", "1000", 40.0, 10.0, behind_s=0.2),
        _row("tmpfs", "half", 900.0, 10.0, behind_s=7.5),
        _row("disk", "1000", 1200.0, 10.0, behind_s=0.3, p50_ms=800.0),
    ]
    found = {v.name: v.line() for v in verdicts(rows, [])}
    assert "BACKLOG" not in found["at-least-once, 1,000 events/s, broker log on tmpfs: p99"]
    moonshot = found["moonshot, half capacity (3,500 events/s), broker log on tmpfs: p99"]
    assert "BACKLOG: the worker ended 7.5 s behind" in moonshot
    assert "BACKLOG: p50 800 ms" in found["at-least-once, 1,000 events/s, broker log on disk: p99"]


def test_the_relay_sends_a_decision_after_its_sessions_causes_only() -> None:
    made = script("p", 6)
    outputs = [out for _, outs in made.values() for out in outs]
    decisions = [record for record, decision in outputs if decision]
    assert {topic for topic, _, _ in decisions} == {"p.decisions", "p.compactions"}
    assert {topic for (topic, _, _), decision in outputs if not decision} >= {"p.faults", "p.pins"}
    # Each line's outputs are the engine's, in its order, keyed by their session.
    for session, outs in made.values():
        assert all(key == session for (_, key, _), _ in outs)
