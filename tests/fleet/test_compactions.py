"""Compactions (contract 1.2 ``context.compacted``) in fleet monitoring: metrics, the
combiner's partials and the evaluator's windows, the ``compaction_outcome`` rule, the
session inspector and the fleet view's compacted sessions."""

from __future__ import annotations

import orjson
from prometheus_client.parser import text_string_to_metric_families

from spanguard.schemas import ContextCompacted, IntegrityFault, OutputEvent
from spanguard.streams.fleet.aggregates import COMPACTED_SESSIONS, WindowCounts
from spanguard.streams.fleet.combiner import Partial
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.fleet_view import local_view, merge_views
from spanguard.streams.fleet.metrics import FleetMetrics
from spanguard.streams.fleet.rules import CompactionOutcomeRule, parse_rules
from spanguard.streams.fleet.session_view import merge_session_views, session_view
from spanguard.streams.sim.scenarios import demo_fleet
from tests.fleet.compactions import T0, clean, combine, fleet_trace
from tests.fleet.traces import merge, run, shifted

RULES = parse_rules(
    """
rules:
  - {name: failing-compactions, kind: compaction_outcome, at_least: critical, above: 2}
  - {name: degraded-compactions, kind: compaction_outcome, at_least: warning, above: 5,
     severity: warning}
"""
)


def evaluate(partials: list[Partial]) -> tuple[FleetEvaluator, list[tuple[str, str, str]]]:
    """Merge the partials as the aggregator does; the evaluator and (rule, tenant,
    status) of every alert."""
    ev = FleetEvaluator(FleetSettings(), RULES)
    return ev, [(alert.rule, alert.tenant, alert.status) for alert in merge(ev, partials)]


def value(metrics: FleetMetrics, name: str, **labels: str) -> float:
    text = metrics.render().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_metrics_count_compactions_tokens_keys_and_thrashing_sessions() -> None:
    trace = fleet_trace()
    metrics, _, _ = combine(trace)
    outputs = [o for c in trace for o in c.outputs() if isinstance(o, ContextCompacted)]
    for tenant in ("acme", "broke"):
        mine = [o for o in outputs if o.tenant == tenant]
        for outcome in ("clean", "warning", "critical"):
            want = sum(o.outcome == outcome for o in mine)
            got = value(metrics, "spanguard_compactions_total", tenant=tenant, outcome=outcome)
            assert got == want, (tenant, outcome)
        saved = sum(max(0, o.tokens_before - o.tokens_after) for o in mine)
        assert value(metrics, "spanguard_compaction_tokens_saved_total", tenant=tenant) == saved
        lost = sum(max(0, o.keys_before - o.keys_after) for o in mine)
        assert value(metrics, "spanguard_compaction_keys_lost_total", tenant=tenant) == lost
        before = sum(o.tokens_before for o in mine)
        after = sum(o.tokens_after for o in mine)
        assert (
            value(metrics, "spanguard_compaction_tokens_total", tenant=tenant, phase="before")
            == before
        )
        assert (
            value(metrics, "spanguard_compaction_tokens_total", tenant=tenant, phase="after")
            == after
        )
    assert value(metrics, "spanguard_compactions_total", tenant="acme", outcome="warning") == 1
    assert value(metrics, "spanguard_compaction_keys_lost_total", tenant="acme") == 11
    assert value(
        metrics, "spanguard_compaction_tokens_total", tenant="acme", phase="after", role="assistant"
    ) == sum(o.tokens_after - 100 for o in outputs if o.tenant == "acme")
    # b3 thrashed three times: one thrashing session, three faults.
    assert value(metrics, "spanguard_thrashing_sessions_total", tenant="broke") == 1
    assert value(metrics, "spanguard_thrashing_sessions_total", tenant="acme") == 0
    assert (
        value(metrics, "spanguard_faults_total", tenant="broke", kind="COMPACTION_THRASHING") == 3
    )


def test_compaction_counters_are_born_at_zero_and_roles_are_bounded() -> None:
    metrics = FleetMetrics(5)
    metrics.observe_record("newco", [])
    text = metrics.render().decode()
    for outcome in ("clean", "warning", "critical"):
        assert f'spanguard_compactions_total{{outcome="{outcome}",tenant="newco"}} 0.0' in text
    assert 'spanguard_compaction_tokens_saved_total{tenant="newco"} 0.0' in text
    assert 'spanguard_thrashing_sessions_total{tenant="newco"} 0.0' in text
    odd = clean("newco", "s", 1, T0)
    outputs = odd.outputs()
    compacted = outputs[-1]
    assert isinstance(compacted, ContextCompacted)
    compacted.tokens_by_role_before = {"planner-7": 40, "user": 2}
    metrics.observe_record("newco", outputs)
    roles = {
        s.labels["role"]
        for f in text_string_to_metric_families(metrics.render().decode())
        for s in f.samples
        if s.name == "spanguard_compaction_tokens_total"
    }
    assert roles == {"system", "user", "assistant", "tool", "unknown", "other"}
    assert value(metrics, "spanguard_compaction_tokens_total", role="other", phase="before") == 40


def test_windows_count_compactions_and_the_rule_fires_on_the_failing_tenant_only() -> None:
    _, _, partials = combine(fleet_trace())
    ev, alerts = evaluate(partials)
    # broke: 3 split pairs + 3 thrashing rewrites are critical (> 2, and > 5 warnings or
    # worse); acme, one warning among clean compactions: nothing.
    assert sorted(alerts) == [
        ("degraded-compactions", "broke", "firing"),
        ("failing-compactions", "broke", "firing"),
    ]
    [acme] = ev.tenants["acme"].windows.values()
    [broke] = ev.tenants["broke"].windows.values()
    assert acme.compactions == {"clean": 4, "warning": 1}
    assert broke.compactions == {"critical": 6, "clean": 1}
    assert acme.tokens_saved == 5 * 700 and acme.keys_lost == 11
    assert broke.tokens_saved == 3 * 900 + 700 + 3 * 100
    assert broke.thrashing_sessions == 1 and acme.thrashing_sessions == 0
    assert broke.compacted["b3"] == [1, 0, 3, 3, 1000, 0]
    summary = broke.summary()
    assert summary["compactions"] == 7
    assert summary["compactions_by_outcome"] == {"clean": 1, "warning": 0, "critical": 6}
    # The sample of the alert names the failing sessions, worst first.
    rule = RULES[0]
    assert isinstance(rule, CompactionOutcomeRule)
    verdict = rule.evaluate(broke, 5)
    assert verdict.firing and verdict.count == 6
    assert set(verdict.sessions) == {"b0", "b1", "b2", "b3"}
    assert not rule.evaluate(acme, 5).firing
    # A warning rule counts warnings and worse: acme's one warning is not above 5.
    assert not RULES[1].evaluate(acme, 5).firing and RULES[1].evaluate(broke, 5).firing


def test_window_counts_round_trip_and_merge() -> None:
    _, _, partials = combine(fleet_trace())
    merged = WindowCounts()
    for partial in partials:
        for counts in partial.windows.values():
            merged.merge(WindowCounts.from_json(orjson.loads(orjson.dumps(counts.to_json()))), 5)
    assert merged.compactions == {"clean": 5, "warning": 1, "critical": 6}
    assert merged.compaction_total == 12 and merged.compactions_at_least("warning") == 7
    assert merged.tokens_before - merged.tokens_after == merged.tokens_saved  # none grew
    assert merged.samples["compaction:critical"] == ["b0", "b1", "b2", "b3"]
    assert WindowCounts.from_json(merged.to_json()).compacted == merged.compacted
    # Records stored before compactions existed still load.
    assert WindowCounts.from_json({"faults": {"X|warning": 1}}).compactions == {}


def test_compacted_sessions_are_bounded_and_keep_the_worst() -> None:
    counts = WindowCounts()
    for n in range(COMPACTED_SESSIONS + 30):
        counts.count_compaction(f"clean-{n:03d}", "clean", 100, 50, 0, 5)
    counts.count_compaction("bad", "critical", 100, 90, 2, 5)
    assert len(counts.compacted) == COMPACTED_SESSIONS
    assert "bad" in counts.compacted
    assert counts.compaction_total == COMPACTED_SESSIONS + 31  # totals are exact
    counts.count_compaction("late-clean", "clean", 100, 50, 0, 5)
    assert "late-clean" not in counts.compacted


def test_the_inspector_lists_each_compaction_with_its_faults() -> None:
    trace = fleet_trace()
    _, recent, _ = combine(trace)
    view = session_view("broke", "b3", None, recent.get("broke", "b3"))
    assert view is not None
    compactions = view["compactions"]
    assert [c["rewrite_id"] for c in compactions] == [f"b3-rw{s}" for s in (10, 11, 12, 13)]
    assert [c["outcome"] for c in compactions] == ["clean", "critical", "critical", "critical"]
    first, last = compactions[0], compactions[-1]
    assert (first["tokens_before"], first["tokens_after"]) == (1200, 500)
    assert first["merged"] == ["u1", "a1", "t1"] and first["created"] == ["sum1"]
    assert first["modified"] == ["sys"] and first["removed"] == []
    assert first["counts"] == {"modified": 1, "created": 1, "merged": 3, "removed": 0}
    assert first["strategy"] == "summarize" and first["trigger"] == "threshold"
    assert first["fault_details"] == [] and first["seq"] == 10
    assert [f["kind"] for f in last["fault_details"]] == ["COMPACTION_THRASHING"]
    assert last["fault_details"][0]["severity"] == "critical"
    assert last["tokens_by_role_before"]["system"] == 100
    # A split pair: what was removed, and both its faults.
    split = session_view("broke", "b0", None, recent.get("broke", "b0"))
    assert split is not None
    [pair] = split["compactions"]
    assert pair["removed"] == ["a3"] and pair["strategy"] == "sliding_window"
    assert {f["kind"] for f in pair["fault_details"]} == {"TOOL_PAIR_SPLIT", "UNGATED_EVICTION"}
    keys = session_view("acme", "a0", None, recent.get("acme", "a0"))
    assert keys is not None
    assert [c["keys_lost"] for c in keys["compactions"]] == [0, 11]
    # Joined from two workers' rings, each compaction once.
    ring = recent.get("broke", "b3")
    halves = [session_view("broke", "b3", None, part) for part in (ring[:3], ring[1:])]
    joined = merge_session_views([v for v in halves if v is not None])
    assert joined is not None
    assert [c["rewrite_id"] for c in joined["compactions"]] == [
        c["rewrite_id"] for c in compactions
    ]


def test_the_fleet_view_lists_compacted_sessions_and_filters_by_outcome() -> None:
    _, _, partials = combine(fleet_trace())
    ev, _ = evaluate(partials)
    part = local_view(ev)
    fleet = merge_views([part])
    rows = fleet["compacted_sessions"]
    assert [(r["tenant"], r["session_id"], r["outcome"]) for r in rows] == [
        ("broke", "b3", "critical"),  # thrashing first
        ("broke", "b0", "critical"),
        ("broke", "b1", "critical"),
        ("broke", "b2", "critical"),
        ("acme", "a0", "warning"),
        ("acme", "a1", "clean"),
        ("acme", "a2", "clean"),
        ("acme", "a3", "clean"),
    ]
    assert rows[0]["thrashing"] == 3 and rows[0]["compactions"] == 4
    assert rows[4]["keys_lost"] == 11
    critical = merge_views([part], outcome="critical")["compacted_sessions"]
    assert {r["session_id"] for r in critical} == {"b0", "b1", "b2", "b3"}
    warning = merge_views([part], outcome="warning")["compacted_sessions"]
    assert [r["session_id"] for r in warning] == ["a0"]
    totals = fleet["totals"]
    assert totals["compactions"] == 12
    assert totals["compactions_by_outcome"] == {"clean": 5, "warning": 1, "critical": 6}
    assert totals["thrashing_sessions"] == 1 and totals["keys_lost"] == 11 + 3 * 2
    windows = {t["tenant"]: t["windows"][-1] for t in fleet["tenants"]}
    assert windows["broke"]["compactions_by_outcome"]["critical"] == 6
    assert windows["acme"]["tokens_saved"] == 3500
    # A tenant-scoped view lists that tenant's sessions only.
    scoped = merge_views([local_view(ev, allowed=lambda t: t == "acme")])
    assert {r["tenant"] for r in scoped["compacted_sessions"]} == {"acme"}


def test_outputs_of_a_rewrite_are_faults_then_their_compaction() -> None:
    """The fixtures follow the contract: the compaction lists every fault of its
    event, and its outcome is their worst severity."""
    for made in fleet_trace():
        outputs: list[OutputEvent] = made.outputs()
        *faults, compacted = outputs
        assert isinstance(compacted, ContextCompacted)
        assert all(isinstance(f, IntegrityFault) for f in faults)
        assert compacted.faults == [f.fault_id for f in faults if isinstance(f, IntegrityFault)]


def test_the_engines_compactions_of_a_replayed_trace() -> None:
    """The demo fleet through the real runtime and engine (contract 1.2: one
    ``context.compacted`` per accepted rewrite, after its faults): metrics, windows,
    the inspector and the fleet view agree with the outputs."""
    result = run(shifted(demo_fleet(12), T0))
    compacted = [o for o in result.outputs if isinstance(o, ContextCompacted)]
    faults = {o.fault_id: o for o in result.outputs if isinstance(o, IntegrityFault)}
    assert compacted and {c.outcome for c in compacted} >= {"clean", "critical"}
    by_outcome = {
        o: sum(c.outcome == o for c in compacted) for o in ("clean", "warning", "critical")
    }
    for outcome, n in by_outcome.items():
        assert value(result.metrics, "spanguard_compactions_total", outcome=outcome) == n
    saved = sum(max(0, c.tokens_before - c.tokens_after) for c in compacted)
    assert value(result.metrics, "spanguard_compaction_tokens_saved_total") == saved
    lost = sum(max(0, c.keys_before - c.keys_after) for c in compacted)
    assert value(result.metrics, "spanguard_compaction_keys_lost_total") == lost
    for c in compacted:  # the outcome is the worst severity of the faults it lists
        severities = {faults[f].severity.value for f in c.faults}
        worst = next((s for s in ("critical", "warning") if s in severities), "clean")
        assert c.outcome == worst
    ev = FleetEvaluator(FleetSettings(), RULES)
    for partial in result.partials:
        for start, counts in partial.windows.items():
            ev.merge(partial.tenant, start, counts, 0.0)
    fleet = merge_views([local_view(ev)])
    assert fleet["totals"]["compactions_by_outcome"] == by_outcome
    listed = {(r["tenant"], r["session_id"]) for r in fleet["compacted_sessions"]}
    assert listed == {(c.tenant, c.session_id) for c in compacted}
    critical = merge_views([local_view(ev)], outcome="critical")["compacted_sessions"]
    assert {r["session_id"] for r in critical} == {
        c.session_id for c in compacted if c.outcome == "critical"
    }
    broken = next(c for c in compacted if c.outcome == "critical")
    view = session_view(
        broken.tenant,
        broken.session_id,
        result.engine.session(broken.tenant, broken.session_id),
        result.recent.get(broken.tenant, broken.session_id),
    )
    assert view is not None
    mine = [c for c in compacted if c.session_id == broken.session_id]
    assert [c["rewrite_id"] for c in view["compactions"]] == [c.rewrite_id for c in mine]
    for shown, made in zip(view["compactions"], mine, strict=True):
        assert (shown["tokens_before"], shown["tokens_after"]) == (
            made.tokens_before,
            made.tokens_after,
        )
        assert shown["merged"] == made.merged and shown["removed"] == made.removed
        assert [f["id"] for f in shown["fault_details"]] == made.faults
        assert [f["kind"] for f in shown["fault_details"]] == [
            faults[f].kind.value for f in made.faults
        ]
