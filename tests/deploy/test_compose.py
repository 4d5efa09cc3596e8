"""docker-compose.yml and the Dockerfile cannot run here (no Docker engine): check that
they agree with each other and with what the project reads (its settings, its command
line, its packages), so that ``docker compose up`` starts a working pipeline."""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.main import get_command

from spanguard.streams.cli.extras import WORKER_MODULES
from spanguard.streams.cli.main import app
from spanguard.streams.engine.config import DEV_SECRET
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ("worker", "producer")
"""The services that run spanguard (the image) against the broker."""


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    """The compose file's services."""
    services: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return services


def _dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def _image_env() -> dict[str, str]:
    pairs = [p for op, args in _dockerfile() if op == "ENV" for p in shlex.split(args)]
    return dict(pair.split("=", 1) for pair in pairs)


def _settings(
    service: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[Settings, dict[str, str]]:
    """The settings a container of ``service`` reads, the way the worker reads them
    (no settings file): the image's ENV, then the service's environment (compose's
    wins); and that environment."""
    env = {**_image_env(), **{k: str(v) for k, v in service["environment"].items()}}
    monkeypatch.chdir(tmp_path)  # no ./spanguard.toml
    for name in [n for n in os.environ if n.upper().startswith("SPANGUARD_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings(), env


def _known(name: str) -> bool:
    """A settings name: ``SPANGUARD_<FIELD>`` or ``SPANGUARD_<FIELD>__<NESTED FIELD>``."""
    field, _, nested = name.removeprefix("SPANGUARD_").lower().partition("__")
    if field not in Settings.model_fields:
        return False
    model = Settings.model_fields[field].annotation
    return not nested or nested in getattr(model, "model_fields", {})


@pytest.mark.parametrize("name", CLIENTS)
def test_each_client_environment_is_valid_settings(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    settings, env = _settings(services[name], monkeypatch, tmp_path)
    unknown = {n for n in env if not _known(n)}
    assert not unknown  # a misspelt name would be ignored silently
    if name == "worker":  # keys are hashed with a secret of the deployment's own
        assert settings.engine.secret.get_secret_value() != DEV_SECRET


def test_the_producer_writes_where_the_worker_reads(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    worker, _ = _settings(services["worker"], monkeypatch, tmp_path)
    producer, _ = _settings(services["producer"], monkeypatch, tmp_path)
    assert bootstrap_servers(producer.broker) == bootstrap_servers(worker.broker)
    assert producer.topic("events") == worker.topic("events")


@pytest.mark.parametrize("name", CLIENTS)
def test_clients_reach_the_broker_at_an_address_it_advertises(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    settings, _ = _settings(services[name], monkeypatch, tmp_path)
    kafka = services["kafka"]
    advertised = {
        listener.split("://", 1)[1]
        for listener in kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(",")
    }
    assert set(bootstrap_servers(settings.broker).split(",")) <= advertised
    # ... and start once the broker answers: it has a health check, they wait for it.
    assert "healthcheck" in kafka
    assert services[name]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_replication_fits_the_single_broker(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = services["kafka"]["environment"]
    brokers = 1 if "broker" in env["KAFKA_PROCESS_ROLES"].split(",") else 0
    assert brokers == 1
    for name, value in env.items():
        if name.endswith("_REPLICATION_FACTOR"):
            assert int(value) <= brokers, name  # else the internal topic is never created
        if name.endswith("_MIN_ISR"):
            assert int(value) <= brokers, name  # else transactions cannot commit
    worker, _ = _settings(services["worker"], monkeypatch, tmp_path)
    assert worker.replication <= brokers  # else the worker cannot create its topics


def test_the_worker_serves_its_web_port_on_the_published_port(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    worker, _ = _settings(services["worker"], monkeypatch, tmp_path)
    published = {int(mapping.rsplit(":", 1)[1]) for mapping in services["worker"]["ports"]}
    assert worker.web_enabled and worker.web_port in published
    # loopback inside the container would make the published port answer nothing
    assert worker.web_host == "0.0.0.0"


def test_the_worker_keeps_its_state_on_the_volume(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    worker, _ = _settings(services["worker"], monkeypatch, tmp_path)
    mounted = {Path(volume.split(":", 1)[1]) for volume in services["worker"]["volumes"]}
    assert worker.data_dir in mounted


def test_the_image_runs_the_cli_and_holds_what_the_services_use(
    services: dict[str, Any],
) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    instructions = _dockerfile()
    [entrypoint] = [args for op, args in instructions if op == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoint) == list(project["project"]["scripts"])
    copied = {args.split()[0] for op, args in instructions if op == "COPY"}
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied  # ``pip install .`` finds them in the image
    commands = get_command(app).commands  # type: ignore[attr-defined]
    for name in CLIENTS:
        command, *arguments = services[name]["command"]
        assert command in commands, name
        for argument in arguments:  # files the command reads are in the image
            assert argument.split("/", 1)[0] in copied and (ROOT / argument).is_file()


def _brought_by(requirements: list[str]) -> set[str]:
    """The distributions that installing ``requirements`` brings, dependencies included
    (read from this venv's metadata, which holds every extra)."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        requirement = Requirement(todo.pop())
        marker = requirement.marker
        if marker is not None and ("extra" in str(marker) or not marker.evaluate()):
            continue  # a dependency's own extra, or not for this platform
        name = canonicalize_name(requirement.name)
        if name not in seen:
            seen.add(name)
            todo += metadata.requires(name) or []
    return seen


def _provides(module: str) -> set[str]:
    return {canonicalize_name(d) for d in metadata.packages_distributions()[module]}


def _install_extras(target: str) -> list[str]:
    """``.[dev,worker]`` -> ``["dev", "worker"]`` (``.``: none)."""
    path, _, extras = target.partition("[")
    assert path == "."
    return [e for e in extras.rstrip("]").split(",") if e]


def test_the_image_installs_what_the_worker_imports(services: dict[str, Any]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = _brought_by(project["dependencies"])
    # ``pip install spanguard`` alone has none of it (the SDK's light install) ...
    assert all(not _provides(module) & base for module in WORKER_MODULES)
    # ... and the image, which runs the worker, installs the extra that brings all of it.
    [install] = [args for op, args in _dockerfile() if op == "RUN" and "pip install" in args]
    extras = _install_extras(shlex.split(install)[-1])
    assert "worker" in extras and services["worker"]["command"][0] == "worker"
    optional = project["optional-dependencies"]
    image = _brought_by([*project["dependencies"], *(r for e in extras for r in optional[e])])
    for module in WORKER_MODULES:
        assert _provides(module) & image, module


def test_make_setup_installs_the_worker_and_the_broker() -> None:
    # make demo and make test (and .ci/run, which runs them) start workers and a broker
    [target] = re.findall(r"pip install -q -e '([^']+)'", (ROOT / "Makefile").read_text())
    assert {"dev", "broker", "worker"} <= set(_install_extras(target))
