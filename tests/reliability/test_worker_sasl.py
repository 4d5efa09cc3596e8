"""The worker's whole data path over TLS + SASL/SCRAM: the same outputs as replay,
and the password in none of its logs."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from spanguard.streams.sim.scenarios import demo_fleet
from tests.pipeline import Pipeline
from tests.reliability.secure_broker import SecureBroker

pytestmark = pytest.mark.kafka


def test_a_worker_over_sasl_ssl_makes_replays_outputs(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    # the test's own producer and reader use the broker's plaintext listener
    pipeline = Pipeline(secure_broker.plaintext, f"sasl-{tmp_path.name[-6:]}", tmp_path)
    pipeline.settings["SPANGUARD_BROKER"] = f"kafka://{secure_broker.bootstrap}"
    pipeline.settings["SPANGUARD_BROKER_CREDENTIALS"] = orjson.dumps(
        {
            "username": secure_broker.user,
            "password_file": str(secure_broker.password_file),
            "cafile": str(secure_broker.ca_file),
        }
    ).decode()
    try:
        worker, _ = pipeline.processes_like_replay("sasl", demo_fleet(8))
        assert secure_broker.password not in worker.log_text()
    finally:
        pipeline.stop_all()
