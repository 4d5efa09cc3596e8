"""Alerts to Alertmanager's own API: ``POST /api/v2/alerts`` with postable alerts.

Alertmanager keeps an alert active until its ``endsAt``; a client that posts an
alert once and goes quiet sees it resolved after ``resolve_timeout``. So, like
Prometheus does, the notifier

* posts an alert the moment it fires or resolves (from the fleet aggregator);
* re-posts every firing alert every ``resend_seconds`` (60 s by default, below
  Alertmanager's default ``resolve_timeout`` of 5 min), each time with
  ``endsAt = now + 4 * resend_seconds``: a worker that dies stops renewing and
  Alertmanager resolves its alerts a few intervals later, never sooner;
* posts ``endsAt = <resolution time>`` on resolve.

``startsAt`` is the wall time at which the alert first fired (replayed traffic
is hours old; Alertmanager and pagers reason in wall time). The event-time
window that fired goes into the annotations. Every alert goes to each
configured URL (an Alertmanager cluster wants them all, as Prometheus does);
a URL that does not accept it after ``attempts`` tries counts one send failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp

from spanguard.streams.fleet.alerts import AlertState
from spanguard.streams.fleet.config import alerts_endpoint
from spanguard.streams.fleet.rules import FaultCountRule, Rule
from spanguard.streams.fleet.times import to_datetime
from spanguard.streams.kafka_io.backoff import Backoff

log = logging.getLogger(__name__)

LIFETIME_RESENDS = 4
"""A firing alert's ``endsAt`` lies this many resend intervals ahead (as Prometheus)."""


def redacted(url: str) -> str:
    """``url`` without a password (``http://user:secret@am`` -> ``http://user:***@am``):
    what logs may show."""
    parsed = urlsplit(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)
    return urlunsplit(parsed._replace(netloc=netloc))


def _rfc3339(ts: float) -> str:
    return to_datetime(ts).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Links:
    """Where a person goes from an alert: the worker's dashboard (``external_url``)."""

    external_url: str = ""

    def dashboard(self, tenant: str) -> str:
        """The dashboard, filtered to ``tenant``; empty without an external URL."""
        if not self.external_url:
            return ""
        return f"{self.external_url.rstrip('/')}/?tenant={quote(tenant, safe='')}"

    def inspector(self, tenant: str, session_id: str) -> str:
        """The session inspector (JSON API) of one session."""
        if not self.external_url:
            return ""
        base = self.external_url.rstrip("/")
        return f"{base}/sessions/{quote(tenant, safe='')}/{quote(session_id, safe='')}"


def postable_alert(
    tenant: str,
    state: AlertState,
    rule: Rule | None,
    now: float,
    resend_seconds: float,
    links: Links = Links(),
) -> dict[str, Any]:
    """One Alertmanager v2 ``PostableAlert`` for the (rule, tenant) alert ``state``.

    Labels identify the alert (Alertmanager fingerprints them) and so never
    change while it is active: ``alertname`` (the rule), ``tenant``,
    ``severity``, ``service="spanguard"`` and, for a rule about one fault kind,
    ``fault_kind``. Everything that changes goes into the annotations.
    """
    labels = {
        "alertname": state.rule,
        "tenant": tenant,
        "severity": state.severity.value,
        "service": "spanguard",
    }
    if isinstance(rule, FaultCountRule):
        labels["fault_kind"] = rule.fault.value
    first, last = state.first_window, state.last_window
    annotations = {
        "summary": f"{state.rule} ({state.severity.value}) in tenant {tenant}: "
        f"{state.count} in the latest window",
        "count": str(state.count),
        "event_window_start": _rfc3339(first.start),
        "event_window_end": _rfc3339(last.end),
        "sessions": ", ".join(state.sessions),
    }
    if rule is not None and rule.description:
        annotations["description"] = rule.description
    if links.external_url:
        annotations["dashboard"] = links.dashboard(tenant)
        if state.sessions:
            annotations["inspector"] = links.inspector(tenant, state.sessions[0])
    firing = state.status == "firing"
    ends = now + LIFETIME_RESENDS * resend_seconds if firing else (state.resolved_at or now)
    return {
        "labels": labels,
        "annotations": annotations,
        "startsAt": _rfc3339(state.started_at or now),
        "endsAt": _rfc3339(ends),
        "generatorURL": links.dashboard(tenant),
    }


POST_BACKOFF = Backoff(0.5, 8.0)
"""Pauses between attempts to post to one Alertmanager."""


class AlertmanagerClient:
    """POSTs postable alerts to every configured Alertmanager."""

    def __init__(
        self,
        urls: Sequence[str],
        timeout: float = 5.0,
        attempts: int = 3,
        backoff: Backoff = POST_BACKOFF,
        on_failure: Callable[[str], None] | None = None,
        session: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        """``on_failure(url)`` is called once per URL that refused a post after every
        attempt. ``session`` supplies a shared HTTP client (the worker's); without one
        the client opens its own and :meth:`close` closes it."""
        self.endpoints = [alerts_endpoint(url) for url in urls]
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.attempts = attempts
        self.backoff = backoff
        self.on_failure = on_failure
        self._shared = session
        self._session: aiohttp.ClientSession | None = None

    async def post(self, alerts: list[dict[str, Any]]) -> int:
        """Send ``alerts`` to every Alertmanager; returns how many accepted them."""
        if not alerts:
            return len(self.endpoints)
        results = await asyncio.gather(*(self._post_one(url, alerts) for url in self.endpoints))
        return sum(results)

    async def _post_one(self, url: str, alerts: list[dict[str, Any]]) -> bool:
        session = self._client()
        for attempt in range(self.attempts):
            try:
                async with session.post(url, json=alerts, timeout=self.timeout) as response:
                    if 200 <= response.status < 300:
                        return True
                    body = (await response.text())[:200]
                    log.warning(
                        "Alertmanager %s answered %d: %s", redacted(url), response.status, body
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                why = redacted(str(exc)) if str(exc) else type(exc).__name__
                log.warning("Alertmanager %s unreachable: %s", redacted(url), why)
            if attempt + 1 < self.attempts:
                await asyncio.sleep(self.backoff.delay(attempt + 1))
        if self.on_failure is not None:
            self.on_failure(url)
        return False

    def _client(self) -> aiohttp.ClientSession:
        if self._shared is not None:
            return self._shared()
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def close(self) -> None:
        """Close the HTTP session this client opened (not a shared one)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


class AlertmanagerNotifier:
    """Decides what to post when: changes at once, firing alerts every resend interval.

    It holds no alert state of its own: what is firing is read from the fleet
    evaluator each time (so after a restart or a rebalance the alerts of the
    tenants this worker now aggregates are the ones it renews).
    """

    def __init__(
        self,
        client: AlertmanagerClient,
        rules: Iterable[Rule],
        resend_seconds: float = 60.0,
        links: Links = Links(),
    ) -> None:
        self.client = client
        self.rules = {rule.name: rule for rule in rules}
        self.resend_seconds = resend_seconds
        self.links = links
        self.last_resend: float | None = None
        self._tasks: set[asyncio.Task[int]] = set()

    def postables(
        self, alerts: Iterable[tuple[str, AlertState]], now: float
    ) -> list[dict[str, Any]]:
        """The postable alerts of (tenant, state) pairs."""
        return [
            postable_alert(
                tenant, state, self.rules.get(state.rule), now, self.resend_seconds, self.links
            )
            for tenant, state in alerts
        ]

    async def changed(self, alerts: Iterable[tuple[str, AlertState]], now: float) -> int:
        """Post alerts that just fired or resolved; returns how many URLs accepted."""
        return await self.client.post(self.postables(alerts, now))

    def renew(
        self, active: Iterable[tuple[str, AlertState]], now: float
    ) -> asyncio.Task[int] | None:
        """Re-post every firing alert (``active``: the evaluator's firing alerts) in
        the background when the resend interval is up; None when it is not."""
        if self.last_resend is not None and now - self.last_resend < self.resend_seconds:
            return None
        self.last_resend = now
        return self.submit(active, now)

    def submit(self, alerts: Iterable[tuple[str, AlertState]], now: float) -> asyncio.Task[int]:
        """:meth:`changed` in the background (the aggregator does not wait for it)."""
        task = asyncio.get_running_loop().create_task(self.changed(list(alerts), now))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Wait for posts in flight, then close the client."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.close()
