"""API tokens: the admin token reads everything, a tenant token only its tenants;
tokens never show up in errors."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from spanguard.streams.fleet.auth import ALL, Authorizer, TenantToken
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.fleet_view import local_view, merge_views
from spanguard.streams.fleet.rules import default_rules
from tests.fleet.traces import faulty, feed

ADMIN = "admin-token-0123456789"
ACME = "acme-token-0123456789"


def authorizer() -> Authorizer:
    return Authorizer(
        SecretStr(ADMIN), [TenantToken(token=SecretStr(ACME), tenants=["acme", "acme-eu"])]
    )


def test_scopes() -> None:
    auth = authorizer()
    assert auth.scope(f"Bearer {ADMIN}") == ALL
    acme = auth.scope(f"bearer {ACME}")
    assert acme is not None and not acme.everything
    assert acme.allows("acme") and acme.allows("acme-eu") and not acme.allows("globex")
    for header in (None, "", "Bearer", f"Basic {ADMIN}", "Bearer wrong-token-0123456789"):
        assert auth.scope(header) is None
    assert Authorizer(None).scope(None) == ALL  # nothing configured: open


def test_a_tenant_token_sees_only_its_tenants_rows() -> None:
    ev = FleetEvaluator(FleetSettings(), default_rules())
    tenants = ["acme", "globex", "globex"]
    feed(ev, [faulty(tenant, 1_796_000_040.0 + n, f"s{n}") for n, tenant in enumerate(tenants)])
    scope = authorizer().scope(f"Bearer {ACME}")
    assert scope is not None
    fleet = merge_views([local_view(ev, allowed=scope.allows)])
    assert [t["tenant"] for t in fleet["tenants"]] == ["acme"]
    assert {a["tenant"] for a in fleet["alerts"]} == {"acme"}
    assert {w["tenant"] for w in fleet["worst_sessions"]} == {"acme"}
    assert fleet["totals"]["faults"] == 1
    assert sum(map(sum, fleet["series"]["faults_per_minute_by_kind"].values())) == 1


def test_tokens_never_appear_in_validation_errors() -> None:
    secret = "too-short-secret"  # 16 characters: fine
    FleetSettings(api_tokens=[TenantToken(token=SecretStr(secret), tenants=["a"])])
    for bad in (
        {"api_tokens": [{"token": "short-secret", "tenants": ["a"]}]},
        {"api_tokens": [{"token": "a-long-enough-secret", "tenants": []}]},
        {"otlp_headers": {"x-api-key": ["a-long-enough-secret"]}},
    ):
        with pytest.raises(ValidationError) as caught:
            FleetSettings.model_validate(bad)
        assert "secret" not in str(caught.value)
    dumped = FleetSettings(
        api_tokens=[TenantToken(token=SecretStr(ACME), tenants=["a"])],
        otlp_headers={"x-api-key": SecretStr("otlp-secret")},
    ).model_dump_json()
    assert ACME not in dumped and "otlp-secret" not in dumped
