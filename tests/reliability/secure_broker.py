"""The broker the reliability tests share: PLAINTEXT plus SASL_SSL (SCRAM-SHA-512), own CA."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SecureBroker:
    """A running broker and what a client needs to reach it.

    Attributes:
        bootstrap: The SASL_SSL listener (TLS + SCRAM-SHA-512).
        plaintext: The PLAINTEXT listener of the same broker.
        ca_file: The CA that signed the broker's certificate.
        user: The SCRAM user the broker knows.
        password: Its password (a test secret; the tests check it never leaks).
        password_file: A file holding the password.
    """

    bootstrap: str
    plaintext: str
    ca_file: Path
    user: str
    password: str
    password_file: Path
