"""SASL_SSL (SCRAM-SHA-512) to the local broker: produce and consume through it; secrets never leak.

The test makes its own CA and broker certificate (openssl) and SCRAM user, starts
a broker with a SASL_SSL listener beside its PLAINTEXT one, and drives the same
client code the commands use (``spanguard produce`` / ``consume`` and topic creation).
"""

from __future__ import annotations

import logging
import traceback
import uuid
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from spanguard.streams.cli.main import app
from spanguard.streams.kafka_io.connection import diagnose_connection
from spanguard.streams.kafka_io.outputs import OutputReader, OutputRecord
from spanguard.streams.kafka_io.producer import produce_lines
from spanguard.streams.kafka_io.security import (
    BrokerCredentials,
    CredentialsError,
    aiokafka_security,
    describe_security,
)
from spanguard.streams.kafka_io.topics import ensure_topics
from spanguard.streams.localbroker.certs import make_test_certificates
from spanguard.streams.settings import Settings, load_settings
from tests.reliability.secure_broker import SecureBroker

pytestmark = pytest.mark.kafka

WRONG_PASSWORD = "wr0ng-Guess-" + uuid.uuid4().hex[:12]
LOCAL_USER, LOCAL_SECRET = "app", "local-" + uuid.uuid4().hex[:12]  # for tests without a broker


def credentials(broker: SecureBroker, **overrides: object) -> BrokerCredentials:
    fields: dict[str, object] = {
        "username": broker.user,
        "password_file": broker.password_file,
        "cafile": broker.ca_file,
    }
    fields.update(overrides)
    return BrokerCredentials.model_validate(fields)


async def read_topic(
    bootstrap: str, topic: str, count: int, security: dict[str, object]
) -> list[OutputRecord]:
    records: list[OutputRecord] = []
    async with OutputReader(bootstrap, [topic], security) as reader:
        for _ in range(300):
            records.extend(await reader.poll(timeout_ms=200))
            if len(records) >= count:
                break
    return records


async def test_produce_and_consume_through_sasl_ssl(secure_broker: SecureBroker) -> None:
    creds = credentials(secure_broker)
    settings = Settings(
        broker=f"kafka://{secure_broker.bootstrap}",
        topic_prefix=f"sec-{uuid.uuid4().hex[:8]}",
        broker_credentials={
            "username": secure_broker.user,
            "password_file": str(secure_broker.password_file),
            "cafile": str(secure_broker.ca_file),
        },
    )
    assert await ensure_topics(settings)  # the admin client authenticates too
    security = aiokafka_security(creds)
    assert security["security_protocol"] == "SASL_SSL"
    assert security["sasl_mechanism"] == "SCRAM-SHA-512"
    lines = [orjson.dumps({"session_id": f"s{i}", "n": i}) for i in range(20)]
    topic = settings.topic("events")
    assert await produce_lines(secure_broker.bootstrap, topic, lines, security=security) == 20
    records = await read_topic(secure_broker.bootstrap, topic, 20, security)
    assert sorted(r.value for r in records) == sorted(lines)
    assert await diagnose_connection(secure_broker.bootstrap, security) == (
        f"connected to {secure_broker.bootstrap}"
    )


async def test_the_sasl_port_refuses_plaintext_and_untrusted_tls(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    plain = await diagnose_connection(secure_broker.bootstrap, None, timeout=5)
    assert "closed the connection" in plain or "did not answer in time" in plain, plain
    other_ca = make_test_certificates(tmp_path / "other", hostnames=("localhost",))
    untrusted = aiokafka_security(credentials(secure_broker, cafile=other_ca.ca_file))
    why = await diagnose_connection(secure_broker.bootstrap, untrusted, timeout=10)
    assert "certificate is not trusted" in why, why


async def test_wrong_password_is_one_clear_error_without_the_password(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bad = credentials(secure_broker, password_file=None, password=WRONG_PASSWORD)
    security = aiokafka_security(bad)
    with pytest.raises(Exception) as failure:
        await produce_lines(secure_broker.bootstrap, "never-created", [b"{}"], security=security)
    why = await diagnose_connection(secure_broker.bootstrap, security)
    assert why == (
        f"{secure_broker.bootstrap} refused the credentials of '{secure_broker.user}' "
        "(SCRAM-SHA-512): wrong user or password"
    )
    seen = "\n".join(
        [
            caplog.text,
            why,
            "".join(traceback.format_exception(failure.value)),
            repr(bad),
            str(bad),
            describe_security(bad),
        ]
    )
    assert "SaslAuthenticationFailed" in caplog.text  # the client did log the failure ...
    assert WRONG_PASSWORD not in seen  # ... and nothing anywhere shows the password
    assert secure_broker.password not in seen


def _cli_settings(
    monkeypatch: pytest.MonkeyPatch, secure_broker: SecureBroker, **secret: str
) -> None:
    """The CLI's settings for the SASL_SSL listener, on a fresh topic prefix, with
    ``secret`` (a password or a password file) for its user."""
    monkeypatch.setenv("SPANGUARD_BROKER", f"kafka://{secure_broker.bootstrap}")
    monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", f"cli-{uuid.uuid4().hex[:8]}")
    credentials = {"username": secure_broker.user, **secret, "cafile": str(secure_broker.ca_file)}
    monkeypatch.setenv("SPANGUARD_BROKER_CREDENTIALS", orjson.dumps(credentials).decode())


def test_cli_produce_with_a_wrong_password_prints_one_line(
    secure_broker: SecureBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cli_settings(monkeypatch, secure_broker, password=WRONG_PASSWORD)
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b'{"session_id":"s1"}\n')
    result = CliRunner().invoke(app, ["produce", str(trace)])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot use Kafka at {secure_broker.bootstrap}: {secure_broker.bootstrap} "
        f"refused the credentials of '{secure_broker.user}' (SCRAM-SHA-512): wrong user or password"
    ]
    assert WRONG_PASSWORD not in result.output


def test_cli_produce_with_a_password_file_publishes(
    secure_broker: SecureBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cli_settings(monkeypatch, secure_broker, password_file=str(secure_broker.password_file))
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b'{"session_id":"s1"}\n{"session_id":"s2"}\n')
    result = CliRunner().invoke(app, ["produce", str(trace)])
    assert result.exit_code == 0, result.output
    assert "published 2 record(s)" in result.stderr


def test_invalid_credentials_never_echo_the_password() -> None:
    with pytest.raises(ValidationError) as failure:
        BrokerCredentials.model_validate(
            {"username": LOCAL_USER, "password": WRONG_PASSWORD, "password_file": "/x"}
        )
    assert "not both" in str(failure.value)
    assert WRONG_PASSWORD not in str(failure.value)
    with pytest.raises(ValueError) as bad_settings:
        load_settings(
            broker_credentials={"username": LOCAL_USER, "password": WRONG_PASSWORD, "bogus": 1}
        )
    assert WRONG_PASSWORD not in str(bad_settings.value)
    # the setting as JSON, validated when a client is made: the error names fields only
    with pytest.raises(CredentialsError) as bad_fields:
        aiokafka_security({"username": LOCAL_USER, "password": WRONG_PASSWORD, "bogus": "x"})
    assert "bogus" in str(bad_fields.value)
    assert WRONG_PASSWORD not in str(bad_fields.value)
    with pytest.raises(CredentialsError) as both:
        aiokafka_security({"username": LOCAL_USER, "password": WRONG_PASSWORD, "protocol": "x"})
    assert "protocol" in str(both.value)
    assert WRONG_PASSWORD not in str(both.value)


def test_missing_password_file_names_the_file_only(tmp_path: Path) -> None:
    creds = BrokerCredentials(username=LOCAL_USER, password_file=tmp_path / "nope")
    with pytest.raises(ValueError, match="cannot read the Kafka password file"):
        aiokafka_security(creds)
    secret = tmp_path / "pw"
    secret.write_text(LOCAL_SECRET + "\n")
    assert aiokafka_security(
        BrokerCredentials(username=LOCAL_USER, password_file=secret, protocol="SASL_PLAINTEXT")
    ) == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": LOCAL_USER,
        "sasl_plain_password": LOCAL_SECRET,
    }


def test_no_credentials_is_plaintext() -> None:
    assert aiokafka_security(None) == {"security_protocol": "PLAINTEXT"}
