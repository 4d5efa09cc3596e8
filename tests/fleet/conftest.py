"""Fixtures of the fleet tests: the real-broker fixtures of tests/kafka (broker, names)."""

from tests.kafka.conftest import kafka_bootstrap, local_kafka_broker, unique_name  # noqa: F401
