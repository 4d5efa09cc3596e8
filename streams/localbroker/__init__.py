"""Run a local single-node Apache Kafka broker (KRaft) for development and tests."""

from streams.localbroker.broker import (
    DEFAULT_HOME,
    PROJECT_ROOT,
    BrokerError,
    BrokerStatus,
    LocalBroker,
    free_port,
    free_ports,
)

__all__ = [
    "DEFAULT_HOME",
    "PROJECT_ROOT",
    "BrokerError",
    "BrokerStatus",
    "LocalBroker",
    "free_port",
    "free_ports",
]
