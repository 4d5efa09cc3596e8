"""``build_topology`` wires the combiner, the aggregator, the timer and the routes into
the worker, and a Faust host that touches no Kafka (no broker needed: nothing is
started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spanguard.streams.app.fleet import FleetClients
from spanguard.streams.app.host import OwnerService
from spanguard.streams.app.topology import Topology, build_topology
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.rules import RuleError
from spanguard.streams.settings import Settings


def topology(tmp_path: Path, **overrides: Any) -> Topology:
    overrides.setdefault("fleet", FleetSettings(enabled=False))
    return build_topology(Settings(data_dir=tmp_path, **overrides))


def routes(topo: Topology) -> set[str]:
    router = topo.app.web.web_app.router
    return {r.resource.canonical for r in router.routes() if r.resource}


def test_the_fleet_adds_the_combiner_aggregator_timer_and_routes(tmp_path: Path) -> None:
    topo = topology(tmp_path, topic_prefix="pfx", fleet=FleetSettings(window_seconds=30))
    fleet = topo.fleet
    assert fleet is not None, "build_topology installs the fleet when it is enabled"
    app = topo.app
    assert topo.runtime.fleet is fleet.combiner
    assert topo.runtime.config.fleet_topic == "pfx.fleet"
    assert fleet.combiner.window_seconds == 30
    assert fleet.aggregator.alerts_topic == "pfx.alerts"
    owners = {s.owner for s in app._children if isinstance(s, OwnerService)}
    assert owners == {topo.runtime, fleet.aggregator}  # both started with the app
    assert any(isinstance(s, FleetClients) for s in app._children)
    assert not app.agents and not app.tables  # no Faust agent or table
    assert {"/", "/metrics", "/fleet", "/fleet/local", "/healthz", "/readyz"} <= routes(topo)
    assert "/sessions/{tenant}/{session_id}" in routes(topo)
    assert fleet.session("acme", "nobody") is None
    assert fleet.local_view()["tenants"] == []


def test_the_host_starts_no_kafka_service(tmp_path: Path) -> None:
    # No consumer (the control group is never joined), no leader assignor (no leader
    # topic), no conductor, no tables, no Faust producer: only the web server.
    app = topology(tmp_path).app
    started = {id(service) for service in app.boot_strategy.server()}  # by identity:
    # Faust's managers are mappings, and two empty ones compare equal
    kafka = [app.consumer, app._leader_assignor, app.producer, app.tables, app.topics]
    assert not started & {id(service) for service in kafka}
    assert id(app.web) in started


def test_health_without_the_fleet_and_no_routes_without_the_web_server(tmp_path: Path) -> None:
    assert routes(topology(tmp_path)) >= {"/healthz", "/readyz"}
    assert "/metrics" not in routes(topology(tmp_path))
    quiet = topology(tmp_path, web_enabled=False, fleet=FleetSettings())
    assert quiet.fleet is not None and "/readyz" not in routes(quiet)
    assert not any(s is quiet.app.web for s in quiet.app.boot_strategy.server())


def test_an_invalid_rules_file_stops_the_build(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: a, kind: nope}\n")
    with pytest.raises(RuleError, match="rule 'a'"):
        topology(tmp_path, fleet=FleetSettings(rules_file=rules))
