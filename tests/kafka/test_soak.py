"""The soak's short variant in CI (bench/soak.py runs the long one): never-closed
sessions over 30 days of event time through one real worker, a fresh worker taking
its share of the partitions from the changelog half-way; live sessions stay within
those active in the last idle_timeout, and Kafka's outputs equal replay's."""

from __future__ import annotations

from pathlib import Path

from bench.soak import Soak, SoakPlan, verdicts
from spanguard.streams.localbroker.broker import LocalBroker


def test_a_month_of_never_closed_sessions_stays_bounded_and_equals_replay(
    kafka_bootstrap: str, local_kafka_broker: LocalBroker | None, tmp_path: Path
) -> None:
    plan = SoakPlan(
        sessions=3000,
        days=30,
        samples=(50, 100),
        fresh_worker=(50,),
        fresh_tries=2,
        commit_timeout=120,
    )
    log_dir = None if local_kafka_broker is None else local_kafka_broker.data_dir
    soak = Soak(plan, kafka_bootstrap, log_dir, tmp_path, f"soak-{tmp_path.name[-8:]}")
    samples = soak.run()
    kafka = soak.kafka_outputs(settle=3, timeout=120)

    assert [s.percent for s in samples] == [50, 100]
    for s in samples:
        # the worker holds what replay holds, and no session idle for longer than
        # idle_timeout: 3,000 sessions opened over 30 days, ~100 a day
        assert s.live_sessions == s.replay_live_sessions, s
        assert 0 < s.live_sessions <= s.active_in_idle_timeout < 250, s
    # half-way, a fresh worker restored its share from the changelog (and gave it back)
    # twice, each from an empty data dir; the faster start is the sample's figure
    assert samples[0].fresh_worker_ready_s is not None and samples[0].fresh_worker_restored
    assert len(samples[0].fresh_worker_ready_tries) == 2
    assert samples[0].fresh_worker_ready_s == min(samples[0].fresh_worker_ready_tries)
    assert samples[1].fresh_worker_ready_tries == []
    assert samples[-1].sessions_expired > 2500, samples[-1]
    # sessions that came back after 30 h were refused, after 20 h accepted
    expired = [k for k in soak.replay.outputs if k.startswith("rejected:SESSION_EXPIRED")]
    assert len(expired) > 100
    assert kafka.keys() == soak.replay.outputs.keys()
    [same] = [v for v in verdicts(samples, kafka, soak.replay.outputs) if "replay" in v.target]
    assert same.met, same
