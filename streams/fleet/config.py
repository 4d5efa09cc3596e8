"""The fleet monitor's settings: windows, alert rules, Alertmanager, label caps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from spanguard.streams.fleet.auth import TenantToken
from spanguard.streams.fleet.otel import logs_endpoint

ALERTS_API_PATH = "/api/v2/alerts"
"""Alertmanager's v2 alerts endpoint, under its base URL."""


def alerts_endpoint(url: str) -> str:
    """``http://am:9093`` (or ``.../api/v2/alerts``) -> the v2 alerts endpoint.

    Raises ValueError on anything that is not an http(s) URL. (Here, not in
    :mod:`~spanguard.streams.fleet.alertmanager`: the settings are read by every
    command, the notifier's aiohttp only by the worker.)
    """
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"Alertmanager URL must start with http:// or https://: {url!r}")
    base = url.rstrip("/")
    return base if base.endswith(ALERTS_API_PATH) else base + ALERTS_API_PATH


class FleetSettings(BaseModel):
    """Every knob of fleet monitoring.

    A deployment sets them under ``fleet`` in the settings (TOML ``[fleet]``, or
    ``SPANGUARD_FLEET='{"window_seconds": 30}'``); :meth:`from_settings` reads them.
    Times are seconds. Window edges and the repeat interval are measured in event
    time (the events' ``ts``); only ``idle_seconds`` and ``tick_seconds`` are wall
    clock, because they exist for tenants whose events stopped.
    """

    # Validation errors must not echo what they refused (tokens, OTLP headers).
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    enabled: bool = Field(
        True, description="install fleet monitoring in the worker (checked by build_topology)"
    )
    window_seconds: float = Field(60.0, gt=0, description="tumbling window size")
    grace_seconds: float = Field(
        10.0, ge=0, description="event time past a window's end before it counts as closed"
    )
    idle_seconds: float = Field(
        90.0,
        gt=0,
        description="wall time without observations after which a tenant's windows close",
    )
    retention_windows: int = Field(
        60, ge=2, description="windows kept per tenant (views, chart, state changelog)"
    )
    rules_file: Path | None = Field(
        None, description="alert rules (YAML, docs/monitoring.md); built-in rules when unset"
    )
    repeat_interval_seconds: float = Field(
        3600.0, ge=0, description="a firing alert is re-sent at most this often"
    )
    max_tenant_labels: int = Field(
        50,
        ge=1,
        description=(
            "tenants with their own metric label (labelled_tenants, then those of lowest "
            "sha256: the same on every worker); the rest are 'other'"
        ),
    )
    labelled_tenants: tuple[str, ...] = Field(
        (),
        description="tenants that always have their own metric label (they use its slots first)",
    )
    alert_sample_sessions: int = Field(5, ge=0, description="sessions listed in an alert")
    top_sessions: int = Field(20, ge=1, description="worst sessions tracked per tenant window")
    ring_size: int = Field(64, ge=1, description="recent records kept per session (inspector)")
    ring_sessions: int = Field(
        2000, ge=1, description="sessions whose recent records a worker keeps (LRU)"
    )
    tick_seconds: float = Field(
        2.0,
        gt=0,
        description="idle windows, heartbeats, lag and alert gauges, Alertmanager renewals",
    )
    alertmanager_urls: list[str] = Field(
        default_factory=list,
        description="Alertmanager base URLs (every member of a cluster); alerts go to "
        "their v2 API, POST /api/v2/alerts",
    )
    alertmanager_resend_seconds: float = Field(
        60.0,
        gt=0,
        description="firing alerts are re-posted this often (keep it below Alertmanager's "
        "resolve_timeout); each post's endsAt lies 4 intervals ahead",
    )
    alertmanager_timeout_seconds: float = Field(5.0, gt=0, description="per post attempt")
    alertmanager_attempts: int = Field(
        3, ge=1, description="attempts per post and URL before counting a send failure"
    )
    external_url: str = Field(
        "",
        description="how people reach the dashboard (e.g. https://spanguard.example); "
        "alerts link to it and to the session inspector",
    )

    otlp_endpoint: str | None = Field(
        None,
        description="OTLP/HTTP collector (e.g. http://collector:4318): faults, pins and "
        "decisions are exported as OpenTelemetry log records (needs the otel extra)",
    )
    otlp_headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="headers of every OTLP request (e.g. an API key; never logged)",
    )

    api_tokens: list[TenantToken] = Field(
        default_factory=list,
        description="bearer tokens scoped to tenants: each reads only its tenants' "
        "sessions and /fleet rows (403 for others) and not /metrics",
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp_url(cls, url: str | None) -> str | None:
        if url is not None:
            logs_endpoint(url)  # raises ValueError with the URL
        return url

    @field_validator("alertmanager_urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            alerts_endpoint(url)  # raises ValueError with the URL
        return urls

    @classmethod
    def from_settings(cls, settings: Any) -> FleetSettings:
        """The ``fleet`` field of a :class:`~spanguard.streams.settings.Settings`, or the defaults
        when the deployment settings have none (older settings class)."""
        value = getattr(settings, "fleet", None)
        if isinstance(value, FleetSettings):
            return value
        if isinstance(value, dict):
            return cls.model_validate(value)
        return cls()

    @property
    def retention_seconds(self) -> float:
        """How long a window is kept after its start."""
        return self.window_seconds * self.retention_windows
