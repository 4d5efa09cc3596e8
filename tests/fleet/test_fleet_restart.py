"""The fleet's state survives a crash: a worker killed (SIGKILL) right after its
first alerts fired, wherever its data path and aggregator were, is replaced by one
with an empty disk, which restores the sessions and the fleet's windows and alert
states from the changelogs, sends no alert twice, and resolves each alert once
(read committed: partials and alerts are written in transactions)."""

from __future__ import annotations

import math
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from spanguard.streams.localbroker.broker import free_ports
from spanguard.streams.sim.scenarios import demo_fleet
from tests.fleet.cluster import (
    WebhookReceiver,
    expected_alerts,
    fleet_pipeline,
    read_alerts,
    start_fleet_worker,
)
from tests.fleet.traces import run, shifted

pytestmark = pytest.mark.kafka

IDLE_SECONDS = 15.0
"""Long enough to kill the first worker before its tenants go idle."""


def test_alert_state_is_restored_after_a_crash(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = f"fleet-restart-{uuid.uuid4().hex[:8]}"
    start = math.floor(time.time() / 60) * 60 - 60
    lines = shifted(demo_fleet(24), start)
    expected = expected_alerts(run(lines))
    firing_at_once = [e for e in expected if e[3] == "firing" and e[1] != "unhealthy"]
    webhook = WebhookReceiver()
    hook = webhook.start()
    pipeline = fleet_pipeline(kafka_bootstrap, prefix, tmp_path, hook, IDLE_SECONDS)
    try:
        [port_1, port_2] = free_ports(2)
        first = start_fleet_worker(pipeline, "first", port_1)
        first.wait_ready(timeout=120)
        pipeline.produce(lines)

        # The instant rules fire on the first worker, which dies at once: its input
        # and its partials may be half processed, half committed.
        before = read_alerts(pipeline, 1, settled=False)
        assert {(a["alert_id"], a["rule"], a["tenant"], a["status"]) for a in before} <= set(
            firing_at_once
        )
        first.kill()

        # A new worker with an empty data directory: everything comes from the changelogs.
        second = start_fleet_worker(pipeline, "second", port_2)
        second.wait_ready(timeout=120)
        alerts = read_alerts(pipeline, len(expected))
        got = Counter((a["alert_id"], a["rule"], a["tenant"], a["status"]) for a in alerts)
        assert all(n == 1 for n in got.values()), f"sent more than once: {got}"
        assert sorted(got) == expected
        restored = re.findall(
            r"fleet: partition \d+ restored: (\d+) tenant\(s\)", second.log_text()
        )
        assert sum(map(int, restored)) >= 1, "the second worker restored the fleet's state"
    finally:
        pipeline.stop_all()
        webhook.stop()
