"""The worker's HTTP API and dashboard, on Faust's web server (aiohttp underneath).

| path | what | auth |
|---|---|---|
| ``GET /`` | the dashboard (one static page; it calls the API) | open |
| ``GET /metrics`` | Prometheus text exposition | token |
| ``GET /fleet?windows=1&tenants=200&outcome=`` | every worker's tenants, alerts, sessions | token |
| ``GET /fleet/local?windows=1`` | this worker's part of ``/fleet`` | token |
| ``GET /sessions/{tenant}/{session_id}`` | the session inspector (routed to its worker) | token |
| ``GET /healthz`` | the process answers | open |
| ``GET /readyz`` | 200 while the data path makes progress, else 503 with the reason | open |

``/healthz`` and ``/readyz`` are served whenever the web server is; the other routes
come with fleet monitoring.

With ``api_token`` (or fleet ``api_tokens``) set, "token" routes want
``Authorization: Bearer <token>`` (401 otherwise); a token scoped to tenants
reads only theirs (403 for another tenant's session or ``?tenant=``; ``/fleet``
lists its tenants only; ``/metrics`` is the admin token's). ``/fleet``'s
``outcome`` (``clean``, ``warning``, ``critical``) keeps only the compacted
sessions whose worst compaction had that outcome (400 for another value). See
:mod:`spanguard.streams.fleet.auth`. The server binds ``web_host`` (127.0.0.1 by
default). No route returns span text: the state has none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
import faust
from pydantic import SecretStr
from yarl import URL

from spanguard.streams.fleet.aggregates import OUTCOMES
from spanguard.streams.fleet.auth import Authorizer, Scope
from spanguard.streams.fleet.fleet_view import MAX_TENANTS, merge_views
from spanguard.streams.fleet.session_view import merge_session_views

if TYPE_CHECKING:
    from spanguard.streams.app.fleet import Fleet

Health = Callable[[], tuple[bool, str]]
"""The data path's readiness: (ready, the reason when not)."""

log = logging.getLogger(__name__)

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PEER_TIMEOUT = 2.0
"""Seconds to wait for another worker's part of ``/fleet``."""


def dashboard_html() -> bytes:
    """The dashboard page (``streams/fleet/static/dashboard.html``)."""
    return resources.files("spanguard.streams.fleet").joinpath("static/dashboard.html").read_bytes()


def install_health(app: Any, health: Health) -> None:
    """Register ``/healthz`` and ``/readyz`` on the Faust ``app``."""

    class Healthz(faust.web.View):
        async def get(self, request: Any) -> Any:
            return self.json({"status": "ok"})

    class Readyz(faust.web.View):
        async def get(self, request: Any) -> Any:
            ready, reason = health()
            return self.json({"ready": ready, "reason": reason}, status=200 if ready else 503)

    app.page("/healthz")(Healthz)
    app.page("/readyz")(Readyz)


def install_web(app: Any, api_token: SecretStr | None, fleet: Fleet) -> None:
    """Register the API and the dashboard on the Faust ``app`` (``api_token``: the
    deployment's admin token, beside the fleet's scoped tokens)."""
    authorizer = Authorizer(api_token, fleet.settings.api_tokens)
    page = dashboard_html()

    def scope_of(view: Any, request: Any) -> tuple[Scope | None, Any | None]:
        """(the request's scope, None) when it may pass, else (None, the 401 response)."""
        scope = authorizer.scope(request.headers.get("Authorization"))
        if scope is not None:
            return scope, None
        return None, view.json(
            {"error": "unauthorized", "detail": "send Authorization: Bearer <token>"},
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="spanguard"'},
        )

    def forbidden(view: Any, what: str) -> Any:
        return view.json(
            {"error": "forbidden", "detail": f"this token may not read {what}"}, status=403
        )

    class Dashboard(faust.web.View):
        async def get(self, request: Any) -> Any:
            return self.bytes(page, content_type="text/html", headers=_no_store())

    class Metrics(faust.web.View):
        async def get(self, request: Any) -> Any:
            scope, refusal = scope_of(self, request)
            if scope is None:
                return refusal
            if not scope.everything:  # the series span every tenant
                return forbidden(self, "/metrics (it covers every tenant)")
            response = self.bytes(fleet.metrics.render())
            response.headers["Content-Type"] = METRICS_CONTENT_TYPE
            return response

    retention = fleet.settings.retention_windows

    class FleetAll(faust.web.View):
        local = False
        """True for ``/fleet/local``: this worker's part of the view only."""

        async def get(self, request: Any) -> Any:
            scope, refusal = scope_of(self, request)
            if scope is None:
                return refusal
            allowed = _allowed(scope, request.query.get("tenant"))
            if allowed is None:
                return forbidden(self, "this tenant")
            windows = _int_param(request, "windows", 1, 0, retention)
            if self.local:
                return self.json(fleet.local_view(windows, allowed), headers=_no_store())
            tenants = _int_param(request, "tenants", MAX_TENANTS, 1, 100_000)
            outcome = request.query.get("outcome") or None
            if outcome is not None and outcome not in OUTCOMES:
                return self.json(
                    {"error": "bad_request", "detail": f"outcome is one of {list(OUTCOMES)}"},
                    status=400,
                )
            parts, unreachable = await _gather_parts(fleet, request, windows, allowed)
            view = merge_views(parts, unreachable, tenants, outcome)
            return self.json(view, headers=_no_store())

    class FleetLocal(FleetAll):
        local = True

    async def session_view(view: Any, request: Any, tenant: str, session_id: str) -> Any:
        found = fleet.session(tenant, session_id)
        if request.query.get("local") is None:
            # The state lives on the worker that owns the session's partition; the
            # recent records may be spread over the workers that owned it before.
            answers = await _session_from_peers(fleet, request, tenant, session_id)
            found = merge_session_views([v for v in (found, *answers) if v is not None])
        if found is not None:
            return view.json(found, headers=_no_store())
        return view.json(
            {"error": "not_found", "tenant": tenant, "session_id": session_id}, status=404
        )

    class Session(faust.web.View):
        async def get(self, request: Any, tenant: str, session_id: str) -> Any:
            scope, refusal = scope_of(self, request)
            if scope is None:
                return refusal
            if not scope.allows(tenant):
                return forbidden(self, "this tenant's sessions")
            return await session_view(self, request, tenant, session_id)

    app.page("/")(Dashboard)
    app.page("/metrics")(Metrics)
    app.page("/fleet")(FleetAll)
    app.page("/fleet/local")(FleetLocal)
    app.page("/sessions/{tenant}/{session_id}")(Session)


def _no_store() -> dict[str, str]:
    return {"Cache-Control": "no-store"}


def peer_urls(fleet: Fleet) -> list[URL]:
    """The web URLs of the other live workers (from their heartbeats)."""
    return [URL(member.url) for member in fleet.members.peers(time.time())]


def _int_param(request: Any, name: str, default: int, low: int, high: int) -> int:
    """A bounded integer query parameter (the default when absent or not a number)."""
    try:
        value = int(request.query.get(name, default))
    except (TypeError, ValueError):
        return default
    return max(low, min(high, value))


def _allowed(scope: Scope, tenant: str | None) -> Callable[[str], bool] | None:
    """The tenant filter of a /fleet request (``?tenant=`` narrows it); None when the
    request names a tenant its scope may not read (403)."""
    if tenant is not None:
        if not scope.allows(tenant):
            return None
        return lambda name: name == tenant
    return scope.allows


async def _gather_parts(
    fleet: Fleet, request: Any, windows: int, allowed: Callable[[str], bool]
) -> tuple[list[dict[str, Any]], int]:
    """This worker's part and every peer's ``/fleet/local``; peers that do not answer
    in time are counted as unreachable (the view is then partial)."""
    tenant_query = {"tenant": request.query["tenant"]} if "tenant" in request.query else {}
    query = {"windows": windows, **tenant_query}
    peers = await _ask_peers(
        fleet, request, lambda url: url.with_path("/fleet/local").with_query(query), "fleet view"
    )
    parts = [fleet.local_view(windows, allowed), *(p for p in peers if p is not None)]
    return parts, sum(1 for p in peers if p is None)


async def _session_from_peers(
    fleet: Fleet, request: Any, tenant: str, session_id: str
) -> list[dict[str, Any]]:
    """Every other live worker's own view of the session (``?local=1``), in parallel;
    workers that do not know it or do not answer in time give nothing."""
    path = f"/sessions/{quote(tenant, safe='')}/{quote(session_id, safe='')}"
    answers = await _ask_peers(
        fleet,
        request,
        lambda url: url.with_path(path, encoded=True).with_query(local=1),
        "session inspector",
    )
    return [a for a in answers if a is not None]


async def _ask_peers(
    fleet: Fleet, request: Any, address: Callable[[URL], URL], what: str
) -> list[dict[str, Any] | None]:
    """GET ``address(peer)`` of every other live worker, in parallel, with the caller's
    token (each peer filters to the same scope): each answer's JSON object, or None
    when the peer answers otherwise than 200 or not in time."""
    headers = {}
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    timeout = aiohttp.ClientTimeout(total=PEER_TIMEOUT)

    async def ask(url: URL) -> dict[str, Any] | None:
        try:
            async with fleet.http().get(address(url), headers=headers, timeout=timeout) as response:
                if response.status != 200:
                    return None
                data = await response.json()
                return data if isinstance(data, dict) else None
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("%s: worker %s did not answer: %s", what, url, exc)
            return None

    return list(await asyncio.gather(*(ask(url) for url in peer_urls(fleet))))
