"""A throw-away certificate authority and broker certificate for the local broker's TLS listener.

Made with the ``openssl`` command line tool (present wherever Kafka's Java is), so
no Python crypto package is needed. For tests and local development only: the
private keys are written unencrypted, readable by their owner only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertificateError", "TestCertificates", "make_test_certificates"]

_DAYS = "30"
_TIMEOUT_S = 60.0


class CertificateError(RuntimeError):
    """Raised when ``openssl`` is missing or fails."""


@dataclass(frozen=True, slots=True)
class TestCertificates:
    """Where :func:`make_test_certificates` wrote its files.

    Attributes:
        ca_file: The CA certificate (PEM): what clients trust (``cafile``).
        broker_keystore: The broker's private key (PKCS#8, unencrypted) followed by its
            certificate, in one PEM file: Kafka's ``ssl.keystore.type=PEM`` keystore.
    """

    __test__ = False  # not a pytest test class, despite its name

    ca_file: Path
    broker_keystore: Path


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificateError("'openssl' was not found on PATH; it is needed to make certificates")
    try:
        result = subprocess.run(
            [openssl, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CertificateError(f"openssl {args[0]} did not finish in {_TIMEOUT_S:.0f} s") from exc
    if result.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed: {result.stderr.strip()[-2000:]}")


def make_test_certificates(
    directory: Path, hostnames: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ()
) -> TestCertificates:
    """Create a CA and a broker certificate it signed, valid for ``hostnames`` and ``ips``.

    Files written to ``directory``: ``ca.pem``, ``ca.key``, ``broker.pem`` (key + cert).
    """
    directory.mkdir(parents=True, exist_ok=True)
    san = ",".join([*(f"DNS:{h}" for h in hostnames), *(f"IP:{ip}" for ip in ips)])
    if not san:
        raise CertificateError("a broker certificate needs at least one host name or address")
    ext = directory / "broker.ext"
    ext.write_text(
        f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", _DAYS,
        "-subj", "/CN=spanguard test CA", "-keyout", "ca.key", "-out", "ca.pem",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", f"/CN={(hostnames or ips)[0]}",
        "-keyout", "broker.key", "-out", "broker.csr",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", _DAYS, "-sha256", "-extfile", ext.name, "-out", "broker.crt",
        cwd=directory,
    )  # fmt: skip
    keystore = directory / "broker.pem"
    keystore.write_text(
        (directory / "broker.key").read_text() + (directory / "broker.crt").read_text()
    )
    for private in (directory / "ca.key", directory / "broker.key", keystore):
        private.chmod(0o600)
    return TestCertificates(ca_file=directory / "ca.pem", broker_keystore=keystore)
