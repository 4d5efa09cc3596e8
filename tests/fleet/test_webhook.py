"""Alertmanager webhook delivery, against a local aiohttp receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from schemas import FleetAlert, Severity
from streams.fleet.aggregates import Window
from streams.fleet.alerts import Status, make_alert
from streams.fleet.webhook import ZERO_TIME, AlertmanagerWebhook, alertmanager_payload

T0 = 1_796_000_040.0


def alert(status: Status = "firing") -> FleetAlert:
    return make_alert(
        "acme",
        "critical-fault",
        Severity.CRITICAL,
        status,
        Window(T0, T0 + 60),
        3,
        ["s1", "s2"],
        T0 + 61,
    )


class Receiver:
    """An Alertmanager-style receiver that fails the first ``failures`` posts."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.received: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        if self.failures > 0:
            self.failures -= 1
            return web.Response(status=503)
        self.received.append(await request.json())
        return web.Response(status=200)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    target = Receiver()
    app = web.Application()
    app.router.add_post("/hook", target.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield target, str(server.make_url("/hook"))
    finally:
        await server.close()


def test_payload_is_alertmanager_webhook_format() -> None:
    firing = alertmanager_payload(alert())
    assert firing["version"] == "4" and firing["status"] == "firing"
    assert firing["groupLabels"] == {"alertname": "critical-fault", "tenant": "acme"}
    [entry] = firing["alerts"]
    assert entry["labels"]["alertname"] == "critical-fault"
    assert entry["labels"]["severity"] == "critical"
    assert entry["fingerprint"] == alert().fingerprint
    assert entry["startsAt"] == "2026-11-30T00:54:00Z" and entry["endsAt"] == ZERO_TIME
    assert entry["annotations"]["sessions"] == "s1, s2"
    resolved = alertmanager_payload(alert("resolved"))
    assert resolved["alerts"][0]["endsAt"] == "2026-11-30T00:55:01Z"


async def test_delivers_firing_and_resolved(receiver: tuple[Receiver, str]) -> None:
    target, url = receiver
    hook = AlertmanagerWebhook(url, timeout=2)
    try:
        assert await hook.deliver(alert())
        assert await hook.deliver(alert("resolved"))
    finally:
        await hook.close()
    assert [p["status"] for p in target.received] == ["firing", "resolved"]
    assert target.received[0]["alerts"][0]["annotations"]["alert_id"] == alert().alert_id


async def test_retries_then_gives_up_and_reports(receiver: tuple[Receiver, str]) -> None:
    target, url = receiver
    failed: list[FleetAlert] = []
    hook = AlertmanagerWebhook(url, attempts=3, backoff=0.01, on_failure=failed.append)
    try:
        target.failures = 2
        assert await hook.deliver(alert())  # third attempt succeeds
        target.failures = 5
        task = hook.submit(alert("resolved"))
        assert not await task
    finally:
        await hook.close()
    assert len(target.received) == 1
    assert [a.status for a in failed] == ["resolved"]


async def test_unreachable_receiver_is_a_failure_not_an_exception() -> None:
    hook = AlertmanagerWebhook("http://127.0.0.1:9/hook", timeout=1, attempts=1)
    try:
        assert not await hook.deliver(alert())
    finally:
        await hook.close()
