"""Why a Kafka client cannot connect, in one line an operator can act on.

aiokafka reports every bootstrap failure as ``Unable to bootstrap from [...]``
(the cause goes to its log). :func:`diagnose_connection` opens one connection
to each bootstrap address itself, so the real cause (nothing listening, TLS not
trusted, credentials refused) comes back as a sentence. Nothing it returns
contains a secret: the SASL password is scrubbed from every message.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping
from typing import Any

from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

__all__ = ["diagnose_connection", "redact"]


def redact(text: str, security: Mapping[str, Any] | None) -> str:
    """``text`` with the SASL password (if any) replaced by ``***``."""
    password = (security or {}).get("sasl_plain_password")
    if isinstance(password, str) and password:
        text = text.replace(password, "***")
    return text


def _why(exc: BaseException, address: str, security: Mapping[str, Any]) -> str:
    user = security.get("sasl_plain_username")
    mechanism = security.get("sasl_mechanism")
    if isinstance(exc, SaslAuthenticationFailed | AuthenticationFailedError):
        return (
            f"{address} refused the credentials of {user!r} ({mechanism}): wrong user or password"
        )
    if isinstance(exc, UnsupportedSaslMechanismError | IllegalSaslStateError):
        return f"{address} does not accept SASL {mechanism} on this port"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{address}: the broker's TLS certificate is not trusted ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        return f"{address}: TLS handshake failed ({exc.reason or exc}); is this a TLS port?"
    if isinstance(exc, ConnectionRefusedError):
        return f"nothing listens at {address} (connection refused)"
    if isinstance(exc, TimeoutError):
        return (
            f"{address} did not answer in time (wrong port, or a TLS/SASL port spoken to in plain)"
        )
    if isinstance(exc, OSError):
        return f"cannot reach {address}: {exc.strerror or exc}"
    if isinstance(exc, KafkaConnectionError):
        return (
            f"{address} closed the connection (a TLS or SASL port spoken to without them? "
            f"connecting with {security.get('security_protocol', 'PLAINTEXT')})"
        )
    if isinstance(exc, KafkaError):
        return f"{address}: {type(exc).__name__}: {exc}"
    return f"{address}: {type(exc).__name__}"


async def diagnose_connection(
    bootstrap: str, security: Mapping[str, Any] | None = None, timeout: float = 10.0
) -> str:
    """One line saying why ``bootstrap`` cannot be used with ``security``, or that it can.

    Tries each ``host:port`` of ``bootstrap`` in turn and reports the first failure
    (or "connected" when every address accepts the connection and its
    authentication).
    """
    kwargs = dict(security or {"security_protocol": "PLAINTEXT"})
    reasons: list[str] = []
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            reasons.append(f"{address!r} is not host:port")
            continue
        try:
            conn = await asyncio.wait_for(
                create_conn(
                    host or "127.0.0.1",
                    int(port),
                    client_id="spanguard-diagnose",
                    request_timeout_ms=int(timeout * 1000),
                    **kwargs,
                ),
                timeout=timeout,
            )
        except Exception as exc:  # every failure becomes a sentence, never a traceback
            reasons.append(_why(exc, address, kwargs))
        else:
            with contextlib.suppress(Exception):
                conn.close()
    if not reasons:
        return f"connected to {bootstrap}"
    return redact("; ".join(reasons), kwargs)
