"""One broker for the reliability tests that need Kafka, with a SASL_SSL listener.

It runs in a temporary home on free ports, with a CA and certificate made for it
(openssl) and one SCRAM user, sharing the jars in ``<project>/.kafka/lib``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from spanguard.streams.localbroker.broker import (
    DEFAULT_HOME,
    LocalBroker,
    SaslSslListener,
    free_ports,
)
from spanguard.streams.localbroker.certs import make_test_certificates
from tests.reliability.secure_broker import SecureBroker


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """A broker with PLAINTEXT and SASL_SSL listeners; stopped when the session ends."""
    home = tmp_path_factory.mktemp("sasl-broker")
    user, password = "spanguard-app", "s3cret-Scram-" + uuid.uuid4().hex[:12]
    certs = make_test_certificates(home / "tls", hostnames=("localhost",), ips=("127.0.0.1",))
    port, controller_port, sasl_port = free_ports(3)
    broker = LocalBroker(
        home=home,
        port=port,
        controller_port=controller_port,
        lib_dir=DEFAULT_HOME / "lib",
        stop_with_parent=True,  # a killed pytest leaves no JVM behind
        sasl_ssl=SaslSslListener(
            port=sasl_port, keystore=certs.broker_keystore, users={user: password}
        ),
    )
    assert password not in repr(broker)
    broker.fetch()
    broker.start(timeout=120)
    password_file = home / "kafka-password"
    password_file.write_text(password + "\n")
    try:
        assert broker.sasl_ssl_bootstrap is not None
        yield SecureBroker(
            broker.sasl_ssl_bootstrap,
            broker.bootstrap,
            certs.ca_file,
            user,
            password,
            password_file,
        )
    finally:
        broker.stop()
    # the broker's own log and configuration never held the password either
    assert password not in broker.log_file.read_text(errors="replace")
    assert password not in broker.config_file.read_text()
