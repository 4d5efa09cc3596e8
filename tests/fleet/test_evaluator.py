"""Aggregation and alert logic on real engine outputs: window edges, one alert per
fingerprint, the repeat interval, resolution announced once, deterministic ids."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from spanguard.schemas import ContextCompacted, FaultKind, IntegrityFault
from spanguard.schemas.codec import decode_output, encode_output
from spanguard.streams.fleet.aggregates import Window, window_of
from spanguard.streams.fleet.alerts import fingerprint
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.rules import parse_rules
from spanguard.streams.sim.scenarios import broken, demo_fleet, healthy
from tests.fleet.traces import Record, faulty, feed, merge, run, shifted

RULES = parse_rules(
    """
rules:
  - {name: critical, kind: fault_severity, at_least: critical}
  - {name: gaps, kind: fault_count, fault: SCORE_PROVENANCE_GAP, above: 3}
  - {name: out-of-order, kind: fault_count, fault: OUT_OF_ORDER, above: 0}
  - {name: unhealthy, kind: healthy_share, below: 0.5, min_cycles: 2}
"""
)
T0 = 1_796_000_040.0  # a multiple of 60: a window edge
SIZE = 60.0


def evaluator(**overrides: float) -> FleetEvaluator:
    return FleetEvaluator(FleetSettings.model_validate(overrides), RULES)


def test_window_edges_follow_the_events_ts() -> None:
    assert window_of(T0, SIZE) == Window(T0, T0 + SIZE)
    assert window_of(T0 - 0.001, SIZE) == Window(T0 - SIZE, T0)
    assert window_of(T0 + 59.999, SIZE) == Window(T0, T0 + SIZE)

    # The broken session's 30-odd events, one second apart, straddle an edge.
    lines = shifted(broken("s-edge", "acme").lines(), T0 - 12)
    result = run(lines)
    ev = evaluator()
    result.feed(ev)
    faults = [o for o in result.outputs if isinstance(o, IntegrityFault)]
    expected = Counter(window_of(f.ts.timestamp(), SIZE).start for f in faults)
    assert len(expected) == 2, "the trace spans two windows"
    state = ev.tenants["acme"]
    assert {start: c.fault_total for start, c in state.windows.items()} == dict(expected)
    # Every input record is counted in the window of its own ts.
    events = Counter(
        window_of(datetime.fromisoformat(e["ts"]).timestamp(), SIZE).start
        for e in (__import__("orjson").loads(line) for line in lines)
    )
    assert {start: c.events for start, c in state.windows.items()} == dict(events)
    assert all(c.sessions == 1 for c in state.windows.values())


def test_demo_fleet_aggregates_per_tenant_and_fires_once_per_rule_and_tenant() -> None:
    result = run(shifted(demo_fleet(24), T0))
    ev = evaluator()
    firing = result.feed(ev)
    assert Counter((a.rule, a.tenant) for a in firing) == {
        (rule, f"tenant-{i}"): 1 for rule in ("critical", "gaps") for i in range(3)
    }
    assert all(a.status == "firing" for a in firing)
    window = Window(T0, T0 + SIZE)
    for tenant in ("tenant-0", "tenant-1", "tenant-2"):
        counts = ev.counts(tenant, window)
        assert counts is not None
        outputs = [o for o in result.outputs if getattr(o, "tenant", None) == tenant]
        faults = [o for o in outputs if isinstance(o, IntegrityFault)]
        assert counts.fault_total == len(faults)
        assert counts.faults_of(FaultKind.SCORE_PROVENANCE_GAP.value) == 4
        assert counts.pins == sum(o.type == "span.pinned" for o in outputs)
        assert sum(counts.decisions.values()) == sum(o.type == "eviction.decided" for o in outputs)
        assert counts.sessions == 8 and counts.events == 160
        assert counts.cycles == 18 and counts.healthy == 8
        worst = [session for session, _, _ in counts.top.top(2)]
        assert all(session.startswith("sess-broken-") for session in worst)
        compacted = [o for o in outputs if isinstance(o, ContextCompacted)]
        assert counts.compaction_total == len(compacted) > 0
        assert counts.compactions.get("critical", 0) == sum(
            c.outcome == "critical" for c in compacted
        )
    # 26 before contract 1.2; its SUMMARY_LOST_KEYS adds one per broken session's
    # key-dropping summary (2 in tenant-0).
    assert ev.counts("tenant-0", window).fault_total == 28  # type: ignore[union-attr]


def test_alert_fields_follow_the_contract() -> None:
    ev = evaluator()
    [alert] = feed(ev, [faulty("acme", T0 + 5, "sess-9")])
    assert alert.session_id == "*" and alert.caused_by is None
    assert alert.fingerprint == fingerprint("critical", "acme")
    assert alert.window.start.timestamp() == T0 and alert.window.end.timestamp() == T0 + SIZE
    assert alert.count == 1 and alert.sessions == ["sess-9"]
    assert alert.severity.value == "critical" and alert.status == "firing"
    assert decode_output(encode_output(alert)) == alert
    assert fingerprint("critical", "acme") != fingerprint("critical", "acme2")
    assert fingerprint("critical", "acme") == fingerprint("critical", "acme")


def test_repeat_interval_limits_re_sending_a_firing_alert() -> None:
    stream = [faulty("acme", T0 + 60 * w + 1, n=w) for w in range(5)]  # 5 windows in a row
    sent = feed(evaluator(repeat_interval_seconds=120), stream)
    assert [a.window.start.timestamp() - T0 for a in sent] == [0, 120, 240]
    assert len({a.alert_id for a in sent}) == 3
    assert {a.fingerprint for a in sent} == {fingerprint("critical", "acme")}

    every = feed(evaluator(repeat_interval_seconds=0), stream)
    assert len(every) == 5  # once per window, never twice in one window
    never = feed(evaluator(repeat_interval_seconds=3600), stream)
    assert len(never) == 1


def test_resolution_is_announced_once_and_a_new_episode_fires_again() -> None:
    ev = evaluator(grace_seconds=5)
    assert len(feed(ev, [faulty("acme", T0 + 1)])) == 1
    quiet = Record("acme", T0 + 70)
    assert feed(ev, [quiet]) == []  # the next window is not closed yet
    closing = Record("acme", T0 + 125)
    [resolved] = feed(ev, [closing])  # T0+120 (end of the quiet window) + grace passed
    assert resolved.status == "resolved" and resolved.rule == "critical"
    assert resolved.window.start.timestamp() == T0 + 60  # the quiet window
    assert resolved.fingerprint == fingerprint("critical", "acme")
    later = [Record("acme", T0 + 60 * w) for w in range(3, 6)]
    assert feed(ev, later) == [], "resolved is announced once"
    [again] = feed(ev, [faulty("acme", T0 + 400, n=1)])
    assert again.status == "firing" and again.alert_id not in {resolved.alert_id}


def test_idle_tenants_resolve_on_the_timer_tick() -> None:
    ev = evaluator(idle_seconds=30)
    feed(ev, [faulty("acme", T0 + 1)], now=1000.0)
    assert ev.ticks_due(1010.0) == []  # not idle yet
    assert ev.tick("acme", 1010.0).alerts == []
    assert ev.ticks_due(1031.0) == ["acme"]
    outcome = ev.tick("acme", 1031.0)
    assert [(a.rule, a.status) for a in outcome.alerts] == [("critical", "resolved")]
    assert outcome.tenant_changed
    assert ev.ticks_due(2000.0) == [], "nothing left open"
    assert ev.tick("acme", 2000.0).alerts == []


def test_healthy_share_is_judged_when_the_window_closes() -> None:
    ev = evaluator(grace_seconds=0)
    bad = Record("acme", T0 + 1, "s1", cycles=4, healthy=1)
    assert feed(ev, [bad]) == [], "a share is not judged while its window is open"
    [alert] = feed(ev, [Record("acme", T0 + 61)])
    assert (alert.rule, alert.status, alert.count, alert.sessions) == (
        "unhealthy",
        "firing",
        3,
        ["s1"],
    )
    assert alert.window.start.timestamp() == T0
    # The window after it is quiet (no cycle at all): resolved when it closes.
    [resolved] = feed(ev, [Record("acme", T0 + 121)])
    assert (resolved.rule, resolved.status) == ("unhealthy", "resolved")


def test_a_late_partial_fires_a_rule_once_and_resolves_it_at_once() -> None:
    ev = evaluator(grace_seconds=0)
    feed(ev, [Record("acme", T0 + 130)])  # closes T0..T0+120
    [fired, resolved] = feed(ev, [faulty("acme", T0 + 5)])
    assert (fired.rule, fired.status, fired.window.start.timestamp()) == (
        "critical",
        "firing",
        T0,
    )
    assert (resolved.rule, resolved.status, resolved.window.start.timestamp()) == (
        "critical",
        "resolved",
        T0 + SIZE,
    )
    counts = ev.counts("acme", Window(T0, T0 + SIZE))
    assert counts is not None and counts.fault_total == 1
    # More late faults in the same window: its verdict is given already.
    assert feed(ev, [faulty("acme", T0 + 6, n=1)]) == []
    assert ev.counts("acme", Window(T0, T0 + SIZE)).fault_total == 2  # type: ignore[union-attr]


def test_a_late_partial_of_a_window_whose_next_is_open_resolves_when_that_closes() -> None:
    ev = evaluator(grace_seconds=0)
    feed(ev, [Record("acme", T0 + 70)])  # closes T0..T0+60 only
    [fired] = feed(ev, [faulty("acme", T0 + 5)])
    assert (fired.rule, fired.status) == ("critical", "firing")
    [resolved] = feed(ev, [Record("acme", T0 + 125)])
    assert (resolved.rule, resolved.status) == ("critical", "resolved")


def test_an_idle_close_anywhere_in_the_trace_yields_the_same_alerts() -> None:
    """A tenant's windows closed by its idle timer before the rest of its partials
    arrived (a worker that restarted while the timer ran): the late partials bring
    the same alerts, by id, each once, as the trace merged in order."""
    partials = run(shifted(demo_fleet(24), T0)).partials

    def alerts(split: int | None) -> list[tuple[str, str, str, str]]:
        ev = evaluator(idle_seconds=10)
        got = merge(ev, partials[:split], now=0.0)
        if split is not None:
            for tenant in ev.ticks_due(100.0):
                got.extend(ev.tick(tenant, 100.0).alerts)
            got.extend(merge(ev, partials[split:], now=100.0))
        for tenant in ev.ticks_due(200.0):
            got.extend(ev.tick(tenant, 200.0).alerts)
        return sorted((a.alert_id, a.rule, a.tenant, a.status) for a in got)

    in_order = alerts(None)
    assert {rule for _, rule, _, _ in in_order} == {"critical", "gaps", "unhealthy"}
    for split in range(1, len(partials), 3):
        assert alerts(split) == in_order, f"closed after partial {split} of {len(partials)}"


def test_alert_ids_are_deterministic() -> None:
    result = run(shifted(demo_fleet(12), T0))

    def replay() -> list[tuple[str, str, str, str]]:
        ev = evaluator(idle_seconds=10)
        alerts = result.feed(ev, now=0.0)
        for tenant in ev.ticks_due(100.0):
            alerts.extend(ev.tick(tenant, 100.0).alerts)
        return [(a.alert_id, a.rule, a.tenant, a.status) for a in alerts]

    first = replay()
    assert {status for *_, status in first} == {"firing", "resolved"}
    assert replay() == first
    assert len({alert_id for alert_id, *_ in first}) == len(first)


def test_restored_state_neither_resends_nor_forgets() -> None:
    ev = evaluator(grace_seconds=5)
    feed(ev, [faulty("acme", T0 + 1), faulty("acme", T0 + 2, n=1)])
    tenants = [(t, ev.tenant_record(t)) for t in ev.tenants]
    windows = [
        (t, start, ev.window_record(t, Window(start, start + SIZE)))
        for t, state in ev.tenants.items()
        for start in state.windows
    ]
    restored = evaluator(grace_seconds=5)
    assert restored.load(tenants, windows, now=0.0) == {"acme"}
    assert restored.counts("acme", Window(T0, T0 + SIZE)).fault_total == 2  # type: ignore[union-attr]
    assert feed(restored, [faulty("acme", T0 + 3, n=2)]) == [], "already sent before the restart"
    [resolved] = feed(restored, [Record("acme", T0 + 126)])
    assert resolved.status == "resolved"


def test_healthy_sessions_alone_raise_no_fault_alert() -> None:
    lines = shifted(healthy("h1", "calm").lines(), T0)
    ev = evaluator()
    alerts = run(lines).feed(ev)
    assert [a for a in alerts if a.rule != "unhealthy"] == []


def test_a_restored_tenant_goes_idle_on_its_own_clock() -> None:
    """The idle timer travels with the tenant: a new owner (a rebalance) does not
    restart it, so a restless group cannot keep an alert from resolving."""
    ev = evaluator(grace_seconds=5, idle_seconds=30)
    feed(ev, [faulty("acme", T0 + 1)], now=1000.0)
    records = [(t, ev.tenant_record(t)) for t in ev.tenants]
    restored = evaluator(grace_seconds=5, idle_seconds=30)
    restored.load(records, [], now=1020.0)
    assert restored.ticks_due(1029.0) == []
    assert restored.ticks_due(1031.0) == ["acme"]
    # Loaded again by a restless group: the timer still runs from 1000.
    again = evaluator(grace_seconds=5, idle_seconds=30)
    again.load([("acme", restored.tenant_record("acme"))], [], now=1025.0)
    assert again.ticks_due(1029.0) == [] and again.ticks_due(1031.0) == ["acme"]
    [resolved] = restored.tick("acme", 1031.0).alerts
    assert resolved.status == "resolved"
    # A record written before the timer was kept restarts it at load.
    old = dict(records[0][1])
    del old["last_seen_wall"]
    legacy = evaluator(grace_seconds=5, idle_seconds=30)
    legacy.load([("acme", old)], [], now=1020.0)
    assert legacy.ticks_due(1031.0) == [] and legacy.ticks_due(1050.0) == ["acme"]


def test_a_timer_that_ran_out_during_an_outage_restarts_once() -> None:
    """A restart longer than ``idle_seconds``: the tenant gets one idle period from
    the load (the data path re-sends its partials meanwhile), and that restarted
    timer travels with the tenant like any other."""
    ev = evaluator(grace_seconds=5, idle_seconds=30)
    feed(ev, [faulty("acme", T0 + 1)], now=1000.0)
    restored = evaluator(grace_seconds=5, idle_seconds=30)
    restored.load([("acme", ev.tenant_record("acme"))], [], now=1100.0)
    assert restored.ticks_due(1129.0) == [] and restored.ticks_due(1130.0) == ["acme"]
    moved = evaluator(grace_seconds=5, idle_seconds=30)
    moved.load([("acme", restored.tenant_record("acme"))], [], now=1120.0)
    assert moved.ticks_due(1129.0) == [] and moved.ticks_due(1130.0) == ["acme"]
