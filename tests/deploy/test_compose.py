"""docker-compose.yml cannot run here (no Docker engine): check its structure instead."""

from pathlib import Path

import yaml

from streams.settings import Settings

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


def test_worker_environment_is_valid_settings() -> None:
    for name in ("worker", "producer"):
        env = compose()["services"][name]["environment"]
        assert env["SPANGUARD_BROKER"] == "kafka://kafka:9092"
        known = {f"SPANGUARD_{field.upper()}" for field in Settings.model_fields}
        assert set(env) <= known, set(env) - known


def test_dockerfile_runs_the_cli() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["spanguard"]' in text
    for copied in ("schemas", "streams", "examples"):
        assert f"COPY {copied}" in text
