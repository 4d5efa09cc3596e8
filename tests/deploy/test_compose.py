"""docker-compose.yml cannot run here (no Docker engine): check its structure instead."""

import os
from pathlib import Path

import pytest
import yaml

from streams.engine.config import DEV_SECRET
from streams.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_dependencies() -> None:
    services = compose()["services"]
    assert set(services) == {"kafka", "worker", "producer"}
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    assert services["worker"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["producer"]["command"][0] == "produce"
    assert (ROOT / services["producer"]["command"][1]).is_file()


def test_kafka_is_single_node_kraft_with_rf1_internal_topics() -> None:
    env = compose()["services"]["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"


@pytest.mark.parametrize("service", ["worker", "producer"])
def test_service_environment_loads_as_settings(
    service: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What compose passes is read the way the worker reads it: every name known, none renamed."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.upper().startswith("SPANGUARD_")]:
        monkeypatch.delenv(name)
    env = compose()["services"][service]["environment"]
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    settings = load_settings()
    assert settings.broker == "kafka://kafka:9092"
    if service == "worker":
        assert settings.engine.secret.get_secret_value() != DEV_SECRET


def test_dockerfile_runs_the_cli() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["spanguard"]' in text
    for copied in ("schemas", "streams", "examples"):
        assert f"COPY {copied}" in text
