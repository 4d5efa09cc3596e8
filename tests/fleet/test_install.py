"""``install_fleet`` wires the combiner, the aggregator service, the timer and the
routes into the worker (no broker needed: nothing is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanguard.streams.app.fleet import FleetService, install_fleet
from spanguard.streams.app.topology import build_topology
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.rules import RuleError
from spanguard.streams.settings import Settings


def topology(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    overrides.setdefault("fleet", FleetSettings(enabled=False))
    settings = Settings(data_dir=tmp_path, **overrides)  # type: ignore[arg-type]
    return build_topology(settings)


def test_install_adds_the_combiner_aggregator_timer_and_routes(tmp_path: Path) -> None:
    topo = topology(tmp_path, topic_prefix="pfx", fleet=FleetSettings(window_seconds=30))
    fleet = topo.fleet
    assert fleet is not None, "build_topology installs the fleet when it is enabled"
    app = topo.app
    assert topo.runtime.fleet is fleet.combiner
    assert topo.runtime.config.fleet_topic == "pfx.fleet"
    assert fleet.combiner.window_seconds == 30
    assert fleet.aggregator.alerts_topic == "pfx.alerts"
    assert any(isinstance(s, FleetService) for s in app._children)  # started with the app
    assert not app.agents and not app.tables  # no Faust agent or table any more
    routes = {r.resource.canonical for r in app.web.web_app.router.routes() if r.resource}
    assert {"/", "/metrics", "/fleet", "/fleet/local", "/healthz", "/readyz"} <= routes
    assert "/sessions/{tenant}/{session_id}" in routes
    assert fleet.session("acme", "nobody") is None
    assert fleet.local_view()["tenants"] == []


def test_no_routes_without_the_web_server(tmp_path: Path) -> None:
    topo = topology(tmp_path, web_enabled=False)
    install_fleet(topo)
    routes = {r.resource.canonical for r in topo.app.web.web_app.router.routes() if r.resource}
    assert "/metrics" not in routes


def test_an_invalid_rules_file_stops_the_install(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: a, kind: nope}\n")
    with pytest.raises(RuleError, match="rule 'a'"):
        install_fleet(topology(tmp_path), FleetSettings(rules_file=rules))
