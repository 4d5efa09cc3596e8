"""The fleet's state survives a crash: a worker killed after its alerts fired is
replaced by one with an empty disk, which restores windows and alert states from
the changelogs, sends no firing alert again, and resolves each alert once."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.app.topology import control_app_id
from streams.client.kafka_io import produce_lines
from streams.kafka.broker import free_ports
from streams.sim.scenarios import demo_fleet
from tests.fleet.cluster import (
    WebhookReceiver,
    expected_alerts,
    fleet_env,
    read_alerts,
    spawn_fleet_worker,
)
from tests.fleet.traces import run, shifted

pytestmark = pytest.mark.kafka

IDLE_SECONDS = 15.0
"""Long enough to kill the first worker before its tenants go idle."""
PARTITIONS = 4
"""The default ``partitions`` setting: every topic of the test has four."""
CONSUMED = ("events", "faults", "pins", "recompute", "decisions", "fleet")


async def _caught_up(bootstrap: str, group: str, topics: list[str]) -> bool:
    partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await consumer.start()
    await admin.start()
    try:
        ends = await consumer.end_offsets(partitions)
        committed = await admin.list_consumer_group_offsets(group, partitions=partitions)
    finally:
        await admin.close()
        await consumer.stop()
    return all(
        end == 0 or (tp in committed and committed[tp].offset >= end) for tp, end in ends.items()
    )


def wait_caught_up(bootstrap: str, group: str, topics: list[str], timeout: float = 60) -> None:
    """Until the worker's group has committed every record of ``topics`` (bounded)."""
    deadline = time.monotonic() + timeout
    while not asyncio.run(_caught_up(bootstrap, group, topics)):
        assert time.monotonic() < deadline, "the worker never committed its input"
        time.sleep(0.5)


def test_alert_state_is_restored_after_a_crash(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = f"fleet-restart-{uuid.uuid4().hex[:8]}"
    start = math.floor(time.time() / 60) * 60 - 60
    lines = shifted(demo_fleet(24), start)
    expected = expected_alerts(run(lines))
    firing_at_once = [e for e in expected if e[3] == "firing" and e[1] != "unhealthy"]
    webhook = WebhookReceiver()
    hook = webhook.start()
    workers = []
    try:
        [port_1, port_2] = free_ports(2)
        env = fleet_env(kafka_bootstrap, prefix, tmp_path, "first", port_1, hook, IDLE_SECONDS)
        first = spawn_fleet_worker("first", env, tmp_path / "first.log", tmp_path)
        workers.append(first)
        first.wait_ready(timeout=120)
        asyncio.run(produce_lines(kafka_bootstrap, f"{prefix}.events", lines))

        # The instant rules fire on the first worker; then it has committed its input
        # (so nothing is re-delivered) and dies before the tenants go idle.
        before = read_alerts(kafka_bootstrap, f"{prefix}.alerts", len(firing_at_once), idle=1.0)
        assert sorted((a["alert_id"], a["rule"], a["tenant"], a["status"]) for a in before) == (
            sorted(firing_at_once)
        )
        wait_caught_up(
            kafka_bootstrap, control_app_id(f"{prefix}-app"), [f"{prefix}.{s}" for s in CONSUMED]
        )
        first.kill()

        # A new worker with an empty data directory: everything comes from the changelogs.
        env = fleet_env(kafka_bootstrap, prefix, tmp_path, "second", port_2, hook, IDLE_SECONDS)
        second = spawn_fleet_worker("second", env, tmp_path / "second.log", tmp_path)
        workers.append(second)
        second.wait_ready(timeout=120)
        alerts = read_alerts(kafka_bootstrap, f"{prefix}.alerts", len(expected))
        got = Counter((a["alert_id"], a["rule"], a["tenant"], a["status"]) for a in alerts)
        assert all(n == 1 for n in got.values()), f"sent more than once: {got}"
        assert sorted(got) == expected
        assert "fleet: 3 tenant(s) restored from the changelog" in second.log_text()
    finally:
        for worker in workers:
            worker.kill()
        webhook.stop()
