"""The Prometheus registry: what it counts, bounded labels, and a parseable exposition."""

from __future__ import annotations

import random
from datetime import timedelta

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from spanguard.schemas import IntegrityFault
from spanguard.streams.fleet.metrics import (
    OTHER,
    FleetMetrics,
    TenantLabels,
    engine_figures,
    tenant_rank,
)
from spanguard.streams.sim.scenarios import broken, demo_fleet
from tests.engine.test_expiry import Partition
from tests.fleet.traces import run


def samples(metrics: FleetMetrics) -> list[Sample]:
    text = metrics.render().decode("utf-8")
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: list[Sample], name: str, **labels: str) -> float:
    return sum(
        s.value
        for s in found
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_metrics_count_events_outputs_and_engine_figures() -> None:
    result = run([*demo_fleet(8), b"{not json"])
    found = samples(result.metrics)
    assert value(found, "spanguard_events_total") == len(demo_fleet(8)) + 1
    assert value(found, "spanguard_events_total", tenant="unknown") == 1
    faults = [o for o in result.outputs if isinstance(o, IntegrityFault)]
    assert value(found, "spanguard_faults_total") == len(faults)
    assert value(
        found, "spanguard_faults_total", kind="REWRITE_WITHOUT_INVALIDATION", severity="critical"
    ) == sum(f.kind == "REWRITE_WITHOUT_INVALIDATION" for f in faults)
    decisions = [o for o in result.outputs if o.type == "eviction.decided"]
    assert value(found, "spanguard_decisions_total") == len(decisions)
    assert value(found, "spanguard_pins_total") == sum(
        o.type == "span.pinned" for o in result.outputs
    )
    assert value(found, "spanguard_dead_letters_total", reason="INVALID_JSON") == 1
    assert value(found, "spanguard_rejected_total") == 1
    stats = result.engine.stats
    assert value(found, "spanguard_rewrite_cycles_total", outcome="healthy") == stats.cycles_healthy
    assert value(found, "spanguard_rewrite_cycles_total") == stats.cycles_closed
    assert value(found, "spanguard_live_sessions") == len(result.engine.sessions)
    # One latency observation per record.
    assert value(found, "spanguard_processing_seconds_count") == len(demo_fleet(8)) + 1
    assert value(found, "spanguard_processing_seconds_bucket", le="+Inf") == len(demo_fleet(8)) + 1


def test_duplicates_are_counted() -> None:
    lines = broken("s1", "acme").lines()
    result = run(lines + lines[:3])
    assert value(samples(result.metrics), "spanguard_duplicates_total") == 3


def test_tenant_labels_are_capped_and_sessions_never_become_labels() -> None:
    result = run(demo_fleet(12, tenants=6), max_tenants=2)
    found = samples(result.metrics)
    tenants = {s.labels["tenant"] for s in found if "tenant" in s.labels}
    assert tenants == {"tenant-0", "tenant-1", OTHER}
    assert value(found, "spanguard_events_total", tenant=OTHER) == value(
        found, "spanguard_events_total"
    ) - value(found, "spanguard_events_total", tenant="tenant-0") - value(
        found, "spanguard_events_total", tenant="tenant-1"
    )
    assert all("session" not in key for s in found for key in s.labels)
    sessions = {orjson.loads(line)["session_id"] for line in demo_fleet(12, tenants=6)}
    text = result.metrics.render().decode("utf-8")
    assert not any(session in text for session in sessions)


def _settled(labels: TenantLabels, tenants: list[str]) -> set[str]:
    """The tenants that keep their own label once ``labels`` has seen ``tenants``."""
    for tenant in tenants:
        labels(tenant)
    return {t for t in tenants if labels(t) == t}


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=30, unique=True),
    st.integers(1, 6),
    st.randoms(use_true_random=False),
)
def test_tenant_labels_are_the_same_on_every_worker(
    tenants: list[str], limit: int, rng: random.Random
) -> None:
    # Two workers see the same tenants in different orders (their partitions' traffic):
    # they must give the same tenants a label, at most ``limit`` of them, the lowest ranks.
    shuffled = tenants[:]
    rng.shuffle(shuffled)
    first = _settled(TenantLabels(limit), tenants)
    second = _settled(TenantLabels(limit), shuffled)
    assert first == second
    # A tenant named like a shared label takes no slot: it is counted under "other".
    plain = [t for t in tenants if t not in (OTHER, "unknown")]
    assert first - {OTHER} == set(sorted(plain, key=tenant_rank)[:limit])
    assert TenantLabels(limit)("unknown") == OTHER


def test_labelled_tenants_always_have_their_label() -> None:
    labels = TenantLabels(2, always=["zeta"])
    ranked = sorted(["a", "b", "c", "d"], key=tenant_rank)
    assert labels("zeta") == "zeta"
    assert [labels(t) for t in ranked] == [ranked[0], OTHER, OTHER, OTHER]
    assert labels(None) == "unknown"
    # Listed tenants keep their label even when they are more than the cap.
    assert TenantLabels(1, always=["x", "y"])("y") == "y"


def test_a_lower_ranked_tenant_takes_the_highest_slot() -> None:
    high, low = sorted(["a", "b"], key=tenant_rank, reverse=True)
    labels = TenantLabels(1)
    assert labels(high) == high
    assert labels(low) == low
    assert labels(high) == OTHER  # its series stops; its later counts go to other


def test_gauges_are_replaced_not_accumulated() -> None:
    metrics = FleetMetrics(5)
    metrics.set_consumer_lag({0: 5, 1: 0})
    metrics.set_consumer_lag({1: 7})
    metrics.set_active_alerts([("critical-fault", "critical"), ("critical-fault", "critical")])
    found = samples(metrics)
    assert value(found, "spanguard_consumer_lag", partition="0") == 0
    assert value(found, "spanguard_consumer_lag", partition="1") == 7
    assert value(found, "spanguard_active_alerts", rule="critical-fault") == 2


def test_cold_sessions_and_thaws_are_exposed() -> None:
    p = Partition(cold_after=timedelta(minutes=10))
    for session, hours in (("a", 0), ("b", 0.1), ("c", 0.3), ("a", 0.4)):
        p.add(session, hours)  # a and b go cold at 0.3 h; a thaws at 0.4 h
    metrics = FleetMetrics(50, engine_figures(lambda: [p.engine]))
    found = samples(metrics)
    assert value(found, "spanguard_live_sessions") == 3
    assert value(found, "spanguard_cold_sessions") == 1
    assert value(found, "spanguard_session_thaws_total") == 1
