"""Optional delivery of alerts to an Alertmanager-compatible webhook receiver.

The payload is Alertmanager's webhook format (``version: "4"``), one group per
fleet alert, so any receiver written for Alertmanager (chat bridges, paging
adapters) accepts spanguard's alerts unchanged. Delivery is best effort and
never blocks the aggregation: the topic ``<prefix>.alerts`` remains the record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from schemas import FleetAlert

log = logging.getLogger(__name__)

ZERO_TIME = "0001-01-01T00:00:00Z"
"""Alertmanager's "not ended" time."""


def _ts(value: Any) -> str:
    return str(value.isoformat().replace("+00:00", "Z"))


def alertmanager_payload(
    alert: FleetAlert, receiver: str = "spanguard", external_url: str = ""
) -> dict[str, Any]:
    """The Alertmanager webhook JSON for one ``fleet.alert``."""
    labels = {
        "alertname": alert.rule,
        "tenant": alert.tenant,
        "severity": alert.severity.value,
        "service": "spanguard",
    }
    resolved = alert.status == "resolved"
    annotations = {
        "summary": (
            f"{alert.rule} {'resolved' if resolved else 'firing'} for tenant {alert.tenant}: "
            f"{alert.count} in the window {_ts(alert.window.start)} - {_ts(alert.window.end)}"
        ),
        "sessions": ", ".join(alert.sessions),
        "alert_id": alert.alert_id,
    }
    entry = {
        "status": alert.status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": _ts(alert.window.start),
        "endsAt": _ts(alert.ts) if resolved else ZERO_TIME,
        "generatorURL": external_url,
        "fingerprint": alert.fingerprint,
    }
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alert.rule}", tenant="{alert.tenant}"}}',
        "truncatedAlerts": 0,
        "status": alert.status,
        "receiver": receiver,
        "groupLabels": {"alertname": alert.rule, "tenant": alert.tenant},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url,
        "alerts": [entry],
    }


class AlertmanagerWebhook:
    """POSTs alerts to ``url``, with a bounded number of attempts each."""

    def __init__(
        self,
        url: str,
        timeout: float = 5.0,
        attempts: int = 3,
        backoff: float = 0.5,
        on_failure: Callable[[FleetAlert], None] | None = None,
        external_url: str = "",
        session: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        """``session`` supplies a shared HTTP client (the worker's); without one the
        webhook opens its own and :meth:`close` closes it."""
        self.url = url
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.attempts = attempts
        self.backoff = backoff
        self.on_failure = on_failure
        self.external_url = external_url
        self._shared = session
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[bool]] = set()

    async def deliver(self, alert: FleetAlert) -> bool:
        """Send one alert; True when the receiver answered 2xx."""
        payload = alertmanager_payload(alert, external_url=self.external_url)
        session = self._client()
        for attempt in range(self.attempts):
            try:
                async with session.post(self.url, json=payload, timeout=self.timeout) as response:
                    if 200 <= response.status < 300:
                        return True
                    log.warning("webhook %s answered %d", self.url, response.status)
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("webhook %s failed: %s", self.url, exc)
            if attempt + 1 < self.attempts:
                await asyncio.sleep(self.backoff * 2**attempt)
        if self.on_failure is not None:
            self.on_failure(alert)
        return False

    def _client(self) -> aiohttp.ClientSession:
        if self._shared is not None:
            return self._shared()
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    def submit(self, alert: FleetAlert) -> asyncio.Task[bool]:
        """Deliver in the background (the caller does not wait for the receiver)."""
        task = asyncio.get_running_loop().create_task(self.deliver(alert))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Wait for deliveries in flight, then close the HTTP session."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
