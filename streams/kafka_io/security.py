"""How spanguard's Kafka clients authenticate: TLS and SASL (SCRAM, PLAIN) as aiokafka kwargs.

One place builds the connection security of every client (worker, ``produce``,
``consume``, topic creation, ``privacy-scan``): :func:`aiokafka_security` turns
the ``broker_credentials`` setting into the keyword arguments aiokafka's
producers, consumers and admin client take.

Secrets come from the environment (``SPANGUARD_BROKER_CREDENTIALS``, JSON) or
from files (``password_file``, e.g. a mounted Kubernetes or Docker secret). The
password is a :class:`~pydantic.SecretStr`: it never shows in a repr, a log line
or a validation error, and :func:`describe_security` gives a line safe to log.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

__all__ = [
    "BrokerCredentials",
    "CredentialsError",
    "aiokafka_security",
    "as_credentials",
    "describe_security",
]

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class CredentialsError(ValueError):
    """The credentials cannot be used (a file is missing or unreadable); never names a secret."""


class BrokerCredentials(BaseModel):
    """TLS and SASL settings for the connection to Kafka (``broker_credentials``).

    Example (environment)::

        SPANGUARD_BROKER_CREDENTIALS='{"username": "spanguard",
            "password_file": "/run/secrets/kafka", "cafile": "/etc/kafka/ca.pem"}'

    Attributes:
        protocol: Kafka's ``security.protocol``. Default: ``SASL_SSL`` when a
            ``username`` is set, else ``SSL``.
        mechanism: The SASL mechanism (``SCRAM-SHA-512`` by default).
        username: SASL user; setting it turns SASL on.
        password: SASL password (prefer ``password_file``); never shown.
        password_file: A file whose content (without the trailing newline) is the
            password; read when a client connects, so a rotated secret is picked up.
        cafile: PEM bundle of the CAs that signed the brokers' certificates
            (default: the system's trust store).
        certfile: Client certificate (PEM), for brokers that require mutual TLS.
        keyfile: The client certificate's private key (PEM).
        check_hostname: Verify that the broker's certificate names the host connected to.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: Protocol | None = None
    mechanism: Mechanism = "SCRAM-SHA-512"
    username: str | None = Field(None, min_length=1)
    password: SecretStr | None = None
    password_file: Path | None = None
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    check_hostname: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> BrokerCredentials:
        if self.password is not None and self.password_file is not None:
            raise ValueError("give password or password_file, not both")
        if self.username is None and (self.password is not None or self.password_file):
            raise ValueError("a password needs a username")
        if self.username is not None and self.password is None and self.password_file is None:
            raise ValueError(f"username {self.username!r} needs a password or password_file")
        if self.keyfile is not None and self.certfile is None:
            raise ValueError("keyfile needs certfile")
        sasl = self.effective_protocol.startswith("SASL_")
        if sasl != (self.username is not None):
            raise ValueError(f"protocol {self.effective_protocol} and username do not agree")
        return self

    @property
    def effective_protocol(self) -> Protocol:
        """``protocol``, or the default it implies."""
        if self.protocol is not None:
            return self.protocol
        return "SASL_SSL" if self.username is not None else "SSL"

    def read_password(self) -> str:
        """The SASL password, read from ``password_file`` when that is how it is given.

        Raises:
            CredentialsError: When the file cannot be read or is empty (the message
                names the file, never its content).
        """
        if self.password is not None:
            return self.password.get_secret_value()
        if self.password_file is None:
            raise CredentialsError("no password configured")
        try:
            text = self.password_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CredentialsError(
                f"cannot read the Kafka password file {self.password_file}: "
                f"{getattr(exc, 'strerror', None) or type(exc).__name__}"
            ) from None
        password = text.rstrip("\r\n")
        if not password:
            raise CredentialsError(f"the Kafka password file {self.password_file} is empty")
        return password

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: the configured CAs (or the system's), hostname checks on."""
        try:
            context = ssl.create_default_context(
                cafile=str(self.cafile) if self.cafile is not None else None
            )
            if self.certfile is not None:
                context.load_cert_chain(
                    str(self.certfile), str(self.keyfile) if self.keyfile else None
                )
        except (OSError, ssl.SSLError) as exc:
            raise CredentialsError(f"cannot load the Kafka TLS files: {exc}") from None
        context.check_hostname = self.check_hostname
        return context


def as_credentials(
    credentials: BrokerCredentials | Mapping[str, Any] | None,
) -> BrokerCredentials | None:
    """``credentials`` as a :class:`BrokerCredentials` (a mapping, e.g. the setting's JSON,
    is validated).

    Raises:
        CredentialsError: When the mapping is not valid; the message names the fields
            and the problems, never a value.
    """
    if credentials is None or isinstance(credentials, BrokerCredentials):
        return credentials
    try:
        return BrokerCredentials.model_validate(dict(credentials))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'broker_credentials'}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
        raise CredentialsError(f"invalid broker_credentials: {problems}") from None


def aiokafka_security(
    credentials: BrokerCredentials | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The keyword arguments that give an aiokafka client the configured security.

    Pass them to ``AIOKafkaProducer``, ``AIOKafkaConsumer`` or ``AIOKafkaAdminClient``
    (``**aiokafka_security(settings.broker_credentials)``). ``credentials`` is a
    :class:`BrokerCredentials` or a mapping of its fields. Without credentials:
    ``{"security_protocol": "PLAINTEXT"}``.

    Raises:
        CredentialsError: When the credentials are invalid, or a password file or a
            TLS file cannot be read.
    """
    credentials = as_credentials(credentials)
    if credentials is None:
        return {"security_protocol": "PLAINTEXT"}
    protocol = credentials.effective_protocol
    kwargs: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        kwargs["ssl_context"] = credentials.ssl_context()
    if credentials.username is not None:
        kwargs["sasl_mechanism"] = credentials.mechanism
        kwargs["sasl_plain_username"] = credentials.username
        kwargs["sasl_plain_password"] = credentials.read_password()
    return kwargs


def describe_security(credentials: BrokerCredentials | Mapping[str, Any] | None) -> str:
    """One line that says how clients connect, safe to log (no secret in it)."""
    credentials = as_credentials(credentials)
    if credentials is None:
        return "PLAINTEXT (no TLS, no authentication)"
    parts: list[str] = [credentials.effective_protocol]
    if credentials.username is not None:
        source = "file" if credentials.password_file is not None else "setting"
        parts.append(
            f"{credentials.mechanism} as {credentials.username!r} (password from {source})"
        )
    if credentials.effective_protocol.endswith("SSL"):
        parts.append(f"CA {credentials.cafile or 'system trust store'}")
    return ", ".join(parts)
