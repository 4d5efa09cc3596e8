"""Alerts to Alertmanager's v2 API: the payload, and a real Alertmanager receiving it."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from spanguard.streams.fleet.aggregates import Window
from spanguard.streams.fleet.alertmanager import (
    AlertmanagerClient,
    AlertmanagerNotifier,
    Links,
    postable_alert,
    redacted,
)
from spanguard.streams.fleet.alerts import AlertBook, AlertState
from spanguard.streams.fleet.config import FleetSettings, alerts_endpoint
from spanguard.streams.fleet.rules import Evaluation, parse_rules
from spanguard.streams.localbroker.broker import free_ports
from tests.fleet.monitoring_stack import alertmanager, http_json

RULES = parse_rules(
    """
rules:
  - {name: stale-burst, kind: fault_count, fault: STALE_SCORE, above: 2, severity: critical,
     description: many stale scores}
  - {name: any-critical, kind: fault_severity, at_least: critical}
"""
)
EVENT_T0 = 1_796_000_040.0
"""Event time of the replayed traffic: far in the past of the wall clock."""


def fired(tenant: str = "acme", now: float = 1_800_000_000.0) -> tuple[AlertBook, AlertState]:
    book = AlertBook(tenant, repeat_interval=3600)
    window = Window(EVENT_T0, EVENT_T0 + 60)
    alert = book.fire(RULES[0], window, Evaluation(True, 3, ["s1", "s/2"]), EVENT_T0 + 5, now)
    assert alert is not None
    return book, book.states["stale-burst"]


def seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_postable_alert_is_wall_time_with_event_window_in_annotations() -> None:
    now = 1_800_000_000.0
    _, state = fired(now=now)
    links = Links("https://guard.example/")
    posted = postable_alert("acme", state, RULES[0], now + 30, 60.0, links)
    assert posted["labels"] == {
        "alertname": "stale-burst",
        "tenant": "acme",
        "severity": "critical",
        "service": "spanguard",
        "fault_kind": "STALE_SCORE",
    }
    assert seconds(posted["startsAt"]) == now  # when it fired, not the event time
    assert seconds(posted["endsAt"]) == now + 30 + 4 * 60  # renewed by the next posts
    notes = posted["annotations"]
    assert seconds(notes["event_window_start"]) == EVENT_T0
    assert notes["sessions"] == "s1, s/2"
    assert notes["description"] == "many stale scores"
    assert notes["inspector"] == "https://guard.example/sessions/acme/s1"
    assert posted["generatorURL"] == "https://guard.example/?tenant=acme"


def test_resolved_alert_ends_when_it_resolved() -> None:
    book, state = fired(now=100.0)
    [resolved] = book.resolve_closed(EVENT_T0 + 180, lambda rule, window: 0, now=250.0)
    assert resolved.status == "resolved" and state.resolved_at == 250.0
    posted = postable_alert("acme", state, RULES[0], 260.0, 60.0)
    assert seconds(posted["startsAt"]) == 100.0 and seconds(posted["endsAt"]) == 250.0


def test_passwords_in_urls_never_reach_the_logs() -> None:
    assert (
        redacted("http://ops:s3cret@am:9093/api/v2/alerts")
        == "http://ops:***@am:9093/api/v2/alerts"
    )
    assert redacted("http://am:9093") == "http://am:9093"


def test_urls_are_checked() -> None:
    assert alerts_endpoint("http://am:9093/") == "http://am:9093/api/v2/alerts"
    assert alerts_endpoint("http://am:9093/api/v2/alerts") == "http://am:9093/api/v2/alerts"
    with pytest.raises(ValueError, match="must start with http"):
        FleetSettings(alertmanager_urls=["am:9093"])


def active(url: str) -> dict[str, dict[str, Any]]:
    """Alertmanager's active alerts, by alertname."""
    found = http_json(f"{url}/api/v2/alerts?active=true&silenced=false&inhibited=false")
    return {a["labels"]["alertname"]: a for a in found if a["status"]["state"] == "active"}


async def test_real_alertmanager_keeps_the_alert_active_while_renewed(tmp_path: Path) -> None:
    # The notifier runs on a clock of its own (``now``), three lifetimes in steps of half a
    # resend, with no waiting: every renewal must reach both Alertmanagers and leave the
    # alert more than three resends to live on that clock. Alertmanager's own (wall) clock
    # sees a control alert whose lifetime is over, and the resolution.
    resend = 60.0  # each post's endsAt is 4 resends (240 s) ahead
    with alertmanager(tmp_path, "am1") as am1, alertmanager(tmp_path, "am2") as am2:
        [dead_port] = free_ports(1)
        failures: list[str] = []
        client = AlertmanagerClient(
            [am1, am2, f"http://127.0.0.1:{dead_port}"], attempts=1, on_failure=failures.append
        )
        notifier = AlertmanagerNotifier(client, RULES, resend_seconds=resend)
        t0 = time.time()
        book, state = fired(now=t0)
        try:
            accepted = await notifier.changed([("acme", state)], t0)
            assert accepted == 2
            assert failures == [f"http://127.0.0.1:{dead_port}/api/v2/alerts"]
            # A control alert posted once and never renewed: its lifetime ended a resend ago.
            _, old = fired(now=t0 - 10 * resend)
            control = postable_alert("acme", old, None, t0 - 5 * resend, resend)
            control["labels"]["alertname"] = "control"
            assert await client.post([control]) == 2

            now, renewals = t0, 0
            while now < t0 + 3 * 4 * resend:  # three lifetimes on the notifier's clock
                now += resend / 2
                task = notifier.renew([("acme", state)], now)
                if task is not None:
                    renewals += 1
                    assert await asyncio.wait_for(task, timeout=30) == 2
                for url in (am1, am2):
                    alert = active(url)["stale-burst"]
                    assert alert["labels"]["tenant"] == "acme"
                    assert abs(seconds(alert["startsAt"]) - state.started_at) < 1e-3
                    left = seconds(alert["endsAt"]) - now
                    assert left > 3 * resend, f"{url}: {left:.0f} s left at +{now - t0:.0f} s"
            assert renewals == 12, renewals
            for url in (am1, am2):
                assert "control" not in active(url), "the control alert should have expired"

            [ended] = book.resolve_closed(EVENT_T0 + 180, lambda r, w: 0, now=time.time())
            assert ended.status == "resolved"
            assert await notifier.changed([("acme", state)], time.time()) == 2
            for url in (am1, am2):
                assert "stale-burst" not in active(url)
        finally:
            await notifier.close()
