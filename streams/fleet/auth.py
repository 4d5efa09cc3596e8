"""Who may read what on the worker's API: the admin token, and tokens scoped to tenants.

* ``api_token`` (the deployment setting) opens everything: every tenant, ``/metrics``.
* Each entry of the fleet setting ``api_tokens`` opens only its ``tenants``: their
  sessions, their rows of ``/fleet`` (tenants, alerts, worst sessions, the chart's
  series and totals computed over them alone), nothing of anyone else's (403), and
  not ``/metrics``, whose series span every tenant.
* With neither set, the API is open (the server binds 127.0.0.1 by default).

Tokens are compared in constant time, all of them every time; a token never
appears in a response, a log line or a metric.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class TenantToken(BaseModel):
    """One API token and the tenants it may read."""

    # A validation error must not echo the token it refused.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    token: SecretStr = Field(min_length=16, description="the bearer token (16 characters or more)")
    tenants: list[str] = Field(min_length=1, description="tenants this token may read")


@dataclass(frozen=True, slots=True)
class Scope:
    """What one request may read: every tenant (``tenants`` None) or these."""

    tenants: frozenset[str] | None

    @property
    def everything(self) -> bool:
        """True for the admin token (or an open API)."""
        return self.tenants is None

    def allows(self, tenant: str) -> bool:
        """Whether the request may read ``tenant``."""
        return self.tenants is None or tenant in self.tenants


ALL = Scope(None)


class Authorizer:
    """Maps an ``Authorization`` header to a :class:`Scope` (None: not authenticated)."""

    def __init__(self, admin: SecretStr | None, scoped: Iterable[TenantToken] = ()) -> None:
        self._admin = admin.get_secret_value().encode("utf-8") if admin is not None else None
        self._scoped = [
            (t.token.get_secret_value().encode("utf-8"), frozenset(t.tenants)) for t in scoped
        ]

    @property
    def open(self) -> bool:
        """True when no token is configured (every request reads everything)."""
        return self._admin is None and not self._scoped

    def scope(self, authorization: str | None) -> Scope | None:
        """The scope of a request's ``Authorization`` header, or None (401)."""
        if self.open:
            return ALL
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return None
        presented = given.strip().encode("utf-8")
        found: Scope | None = None
        # Compare with every token (no early exit): the time does not tell which matched.
        if self._admin is not None and hmac.compare_digest(presented, self._admin):
            found = ALL
        tenants: set[str] = set()
        for secret, allowed in self._scoped:
            if hmac.compare_digest(presented, secret):
                tenants |= allowed
        if found is None and tenants:
            found = Scope(frozenset(tenants))
        return found
