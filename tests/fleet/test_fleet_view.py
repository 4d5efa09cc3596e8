"""``/fleet``: each worker's part and the merged fleet (series, alerts, worst sessions)."""

from __future__ import annotations

from spanguard.schemas import FaultKind
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.fleet_view import (
    MIN_SERIES_WINDOWS,
    SERIES_WINDOWS,
    local_view,
    merge_views,
)
from spanguard.streams.fleet.rules import default_rules
from spanguard.streams.sim.scenarios import demo_fleet
from tests.fleet.traces import Record, faulty, feed, merge, run, shifted

T0 = 1_796_000_040.0


def evaluator_for(tenants: set[str]) -> FleetEvaluator:
    """An evaluator fed with the demo fleet's partials of ``tenants`` only (one worker)."""
    ev = FleetEvaluator(FleetSettings(), default_rules())
    merge(ev, [p for p in run(shifted(demo_fleet(12), T0)).partials if p.tenant in tenants])
    return ev


def stale(tenant: str, ts: float, session: str = "s", n: int = 0) -> Record:
    """A record of ``session`` that raised a ``STALE_SCORE`` warning."""
    return faulty(tenant, ts, session, FaultKind.STALE_SCORE, n)


def test_workers_parts_merge_into_the_fleet() -> None:
    part_a = local_view(evaluator_for({"tenant-0"}))
    part_b = local_view(evaluator_for({"tenant-1", "tenant-2"}))
    fleet = merge_views([part_a, part_b])
    assert [t["tenant"] for t in fleet["tenants"]] == ["tenant-0", "tenant-1", "tenant-2"]
    assert fleet["tenant_count"] == 3
    assert fleet["workers"] == 2 and fleet["unreachable_workers"] == 0
    assert {(a["tenant"], a["rule"]) for a in fleet["alerts"]} == {
        (f"tenant-{i}", "critical-fault") for i in range(3)
    }
    assert all(w["session_id"].startswith("sess-broken-") for w in fleet["worst_sessions"][:3])
    series = fleet["series"]
    assert len(series["starts"]) == MIN_SERIES_WINDOWS  # all in one window: the shortest axis
    assert series["starts"][-1] == "2026-11-30T00:54:00Z"
    per_kind = series["faults_per_minute_by_kind"]
    total_faults = sum(w["faults"] for t in fleet["tenants"] for w in t["windows"])
    assert sum(sum(v) for v in per_kind.values()) == total_faults == fleet["totals"]["faults"]
    assert all(v[:-1] == [0.0] * (MIN_SERIES_WINDOWS - 1) for v in per_kind.values())
    assert "REWRITE_WITHOUT_INVALIDATION" in per_kind
    assert fleet["totals"]["events"] == 240 and fleet["totals"]["cycles"] == 27


def test_tenants_are_listed_worst_first_and_capped() -> None:
    ev = FleetEvaluator(FleetSettings(), default_rules())
    feed(
        ev,
        [stale(f"t{i}", T0 + n, n=n) for i, faults in enumerate([1, 5, 3]) for n in range(faults)],
    )
    fleet = merge_views([local_view(ev, windows=2)], max_tenants=2)
    assert [t["tenant"] for t in fleet["tenants"]] == ["t1", "t2"]
    assert fleet["tenant_count"] == 3 and fleet["totals"]["tenants"] == 3
    assert len(fleet["tenants"][0]["windows"]) == 1  # only one window exists


def test_windows_per_tenant_are_bounded() -> None:
    ev = FleetEvaluator(FleetSettings(), default_rules())
    feed(ev, [Record("t", T0 + 60 * w) for w in range(5)])
    assert len(local_view(ev)["tenants"][0]["windows"]) == 1
    assert len(local_view(ev, windows=3)["tenants"][0]["windows"]) == 3
    assert local_view(ev, windows=0)["tenants"][0]["windows"] == []
    assert local_view(ev)["totals"]["events"] == 5


def test_empty_fleet() -> None:
    fleet = merge_views([local_view(FleetEvaluator(FleetSettings(), default_rules()))], 1)
    assert fleet["tenants"] == [] and fleet["series"]["starts"] == []
    assert fleet["unreachable_workers"] == 1


def test_every_tenant_keeps_its_worst_sessions_and_critical_kinds_come_first() -> None:
    ev = FleetEvaluator(FleetSettings(), default_rules())
    # A noisy tenant with many bad sessions and a quiet one with a single warning.
    noisy = [
        faulty(
            "noisy", T0 + n, f"s{n}", FaultKind.UNGATED_EVICTION if n % 2 else FaultKind.STALE_SCORE
        )
        for n in range(40)
    ]
    feed(ev, [*noisy, stale("quiet", T0, "q1")])
    fleet = merge_views([local_view(ev)])
    by_tenant = {w["tenant"] for w in fleet["worst_sessions"]}
    assert by_tenant == {"noisy", "quiet"}
    assert sum(w["tenant"] == "noisy" for w in fleet["worst_sessions"]) == fleet["worst_per_tenant"]
    series = fleet["series"]
    assert list(series["faults_per_minute_by_kind"]) == ["UNGATED_EVICTION", "STALE_SCORE"]
    assert series["severity_by_kind"] == {"UNGATED_EVICTION": "critical", "STALE_SCORE": "warning"}


def test_the_chart_axis_spans_the_data() -> None:
    ev = FleetEvaluator(FleetSettings(), default_rules())
    # Windows 0, 14 and 40 (window 0 falls out of the 30-window axis).
    feed(ev, [stale("t", T0 + 60 * w, n=w) for w in (0, 14, 40)])
    starts = merge_views([local_view(ev)])["series"]["starts"]
    assert len(starts) == SERIES_WINDOWS
    ev = FleetEvaluator(FleetSettings(), default_rules())
    feed(ev, [stale("t", T0 + 60 * w, n=w) for w in (0, 14)])
    series = merge_views([local_view(ev)])["series"]
    assert len(series["starts"]) == 15
    assert series["faults_per_minute_by_kind"]["STALE_SCORE"][0] == 1.0
