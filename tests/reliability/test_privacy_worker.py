"""Privacy, proven on a real worker: after it processed a fleet whose spans carry text,
no topic of the deployment but the input and dead-letter topics (outputs, changelogs)
and nothing in its data directory holds a span text or a clear referent key.

The positive control runs the same worker with ``clear_keys`` on: the scan must then
find the keys, which proves it reads what the worker wrote.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from spanguard.streams.kafka_io.privacy import PrivacyReport, privacy_scan
from spanguard.streams.settings import Settings
from spanguard.streams.sim import SimConfig, simulate
from tests.pipeline import Pipeline
from tests.reliability.secure_broker import SecureBroker

pytestmark = pytest.mark.kafka


def run_worker_and_scan(
    broker: SecureBroker, tmp: Path, lines: list[bytes], extra: dict[str, str]
) -> PrivacyReport:
    pipe = Pipeline(broker.plaintext, f"priv-{uuid.uuid4().hex[:8]}", tmp, dict(extra))
    try:
        worker = pipe.start_worker("w")
        worker.wait_ready()
        pipe.produce(lines)
        pipe.wait_committed()
        settings = Settings(
            broker=f"kafka://{broker.plaintext}",
            topic_prefix=pipe.prefix,
            app_id=f"{pipe.prefix}-app",
        )
        return asyncio.run(privacy_scan(settings, lines, data_dir=tmp / "data-w"))
    finally:
        pipe.stop_all()


@pytest.fixture(scope="module")
def fleet() -> list[bytes]:
    """Simulated sessions, left open (no ``session.closed``) so that their state, with
    its referent keys, is in the changelog when the scan runs."""
    lines = simulate(SimConfig(sessions=10, seed=33, events_per_session=40)).lines
    return [line for line in lines if b'"type":"session.closed"' not in line]


def test_a_real_worker_leaves_no_text_and_no_clear_key(
    secure_broker: SecureBroker, tmp_path: Path, fleet: list[bytes]
) -> None:
    # fleet monitoring on: its tables are on disk in the data directory too
    report = run_worker_and_scan(secure_broker, tmp_path, fleet, {"SPANGUARD_FLEET": "{}"})
    changelogs = [t for t in report.topics if t.endswith(".changelog")]
    assert changelogs, report.topics  # the state changelog was read, not only the outputs
    assert report.records > 0
    assert [f.describe() for f in report.findings] == []


def test_the_scan_sees_what_the_worker_wrote(
    secure_broker: SecureBroker, tmp_path: Path, fleet: list[bytes]
) -> None:
    report = run_worker_and_scan(
        secure_broker, tmp_path, fleet, {"SPANGUARD_ENGINE__CLEAR_KEYS": "true"}
    )
    assert {f.kind for f in report.findings} == {"referent key"}
    places = {f.where.split("[")[0].rsplit(".", 1)[-1] for f in report.findings}
    assert "changelog" in places  # state holds the clear keys too
