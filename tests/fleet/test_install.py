"""``install_fleet`` wires agents, tables, timer, hooks and routes into the app
(no broker needed: nothing is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.app.fleet import ObserverHook, install_fleet
from streams.app.topology import build_topology
from streams.fleet.config import FleetSettings
from streams.fleet.rules import RuleError
from streams.settings import Settings


def topology(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    overrides.setdefault("fleet", FleetSettings(enabled=False))
    settings = Settings(store="memory://", data_dir=tmp_path, **overrides)  # type: ignore[arg-type]
    return build_topology(settings)


def test_install_adds_agents_tables_topic_and_routes(tmp_path: Path) -> None:
    topo = topology(tmp_path, topic_prefix="pfx", fleet=FleetSettings(window_seconds=30))
    fleet = topo.fleet
    assert fleet is not None, "build_topology installs the fleet when it is enabled"
    app = topo.app
    assert {"fleet-collect", "fleet-aggregate"} <= {agent.name for agent in app.agents.values()}
    assert {"fleet-windows", "fleet-alerts"} <= set(app.tables)
    assert fleet.topic.get_topic_name() == "pfx.fleet"
    assert fleet.windows.table.window.size == 30
    routes = {r.resource.canonical for r in app.web.web_app.router.routes() if r.resource}
    assert {"/", "/metrics", "/fleet", "/fleet/local", "/healthz", "/readyz"} <= routes
    assert "/sessions/{tenant}/{session_id}" in routes
    hook = topo.runtime.fleet
    assert isinstance(hook, ObserverHook) and hook.observer is fleet.observer
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
