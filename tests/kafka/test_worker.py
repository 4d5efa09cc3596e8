"""The worker on the real broker: same outputs as replay, in the promised order,
recovered after a crash, shared between workers, and safe on bad input."""

from __future__ import annotations

import base64
import signal
import subprocess

import orjson
import pytest

from tests.kafka.traces import expiring_traces, scenario_traces
from tests.pipeline import Pipeline, has_ids, identities, identity, replay_outputs

GARBAGE = [
    b"\x00\xff\xfe not even text",
    b"{this is not json",
    b'{"type": "span.added", "schema_version": 1, "event_id": "bad-1", "session_id": "sess-bad",'
    b' "tenant": "acme", "seq": 0, "turn": 0, "ts": "2026-11-30T09:00:00Z", "span_id": "a",'
    b' "position": -4, "tokens": 3, "text": "negative position"}',
    b'{"type": "span.removed", "schema_version": 1}',
    b"[1, 2, 3]",
]


def test_kafka_outputs_equal_replay_in_order_with_dead_letters(pipeline: Pipeline) -> None:
    lines = scenario_traces()
    mixed = lines[:10] + GARBAGE + lines[10:]
    # Equivalence: the same set of outputs (no output lost, none invented)...
    worker, got = pipeline.processes_like_replay("a", mixed)
    # ... and the same records.
    expected = replay_outputs(mixed)
    by_id = {identity(r): orjson.loads(r) for r in expected}
    for record in got:
        data = orjson.loads(record)
        if data["type"] != "event.rejected":
            assert data == by_id[identity(record)]

    # Dead letters: each bad record with its reason and raw bytes; valid neighbours processed.
    rejected = [orjson.loads(r) for r in got if orjson.loads(r)["type"] == "event.rejected"]
    raws = {base64.b64decode(r["raw"]): r for r in rejected}
    replayed = [orjson.loads(r) for r in expected if orjson.loads(r)["type"] == "event.rejected"]
    assert set(raws) == {base64.b64decode(r["raw"]) for r in replayed}
    assert set(GARBAGE) <= set(raws)
    assert raws[GARBAGE[0]]["reason"] == "INVALID_JSON"
    assert raws[GARBAGE[2]]["reason"] == "INVALID_FIELD"
    assert raws[GARBAGE[3]]["reason"] == "UNKNOWN_TYPE"
    assert raws[GARBAGE[4]]["reason"] == "NOT_AN_OBJECT"
    assert all(r["topic"] == pipeline.topic("events") and r["offset"] >= 0 for r in rejected)

    # Ordering: every fault, pin and recompute a decision lists was acknowledged by
    # the broker before the decision was sent.
    assert worker.journal is not None
    acks = [orjson.loads(line) for line in worker.journal.read_bytes().splitlines()]
    acked_at = {a["output_id"]: a["acked_ns"] for a in acks}
    decisions = {
        orjson.loads(r)["decision_id"]: orjson.loads(r)
        for r in got
        if orjson.loads(r)["type"] == "eviction.decided"
    }
    compactions = {
        orjson.loads(r)["compaction_id"]: orjson.loads(r)
        for r in got
        if orjson.loads(r)["type"] == "context.compacted"
    }
    checked = checked_compactions = 0
    for ack in acks:
        if ack["type"] == "eviction.decided":
            decision = decisions[ack["output_id"]]
            causes = decision["faults"] + decision["pins"] + [decision["recompute_id"] or ""]
        elif ack["type"] == "context.compacted":
            # Contract 1.2: a compaction record follows every fault it lists, the same way.
            causes = compactions[ack["output_id"]]["faults"]
            checked_compactions += len(causes)
        else:
            continue
        for cause in filter(None, causes):
            assert acked_at[cause] < ack["sent_ns"], (cause, ack["output_id"])
            checked += 1
    assert checked > 20
    assert checked_compactions >= 4  # the compaction scenarios' faults, at least


def test_restarted_worker_recovers_state_from_changelog(pipeline: Pipeline) -> None:
    lines = scenario_traces()
    half = len(lines) // 2
    expected = replay_outputs(lines)
    expected_first = replay_outputs(lines[:half])
    first = pipeline.start_worker("first")
    first.wait_ready()
    pipeline.produce(lines[:half])
    pipeline.read_until(has_ids(set(identities(expected_first))))
    # Killed as soon as the outputs are out, whatever was checkpointed: the next
    # worker restores the last checkpoint and redoes the rest (same ids).
    first.kill()  # no clean shutdown: the changelog is all the next worker gets

    second = pipeline.start_worker("second")
    second.wait_ready()
    pipeline.produce(lines[half:])
    got = pipeline.read_settled(has_ids(set(identities(expected))))
    assert set(identities(got)) == set(identities(expected))
    decisions = [r for r in expected if b'"eviction.decided"' in r]
    assert {identity(d) for d in decisions} <= set(identities(got)), "no decision lost"
    assert "restored" in second.log_text()


def test_two_workers_share_partitions_and_survive_a_kill(pipeline: Pipeline) -> None:
    lines = scenario_traces()
    half = len(lines) // 2
    expected = replay_outputs(lines)
    a = pipeline.start_worker("a")
    b = pipeline.start_worker("b")
    a.wait_ready()
    b.wait_ready()
    pipeline.produce(lines[:half])
    pipeline.read_until(has_ids(set(identities(replay_outputs(lines[:half])))))
    journals = [w.journal.read_bytes() if w.journal and w.journal.exists() else b"" for w in (a, b)]
    assert all(journals), "both workers produced outputs: the partitions were split"
    b.kill()  # mid-stream: whatever b had not checkpointed, a redoes
    pipeline.produce(lines[half:])
    got = pipeline.read_settled(has_ids(set(identities(expected))), timeout=90)
    assert set(identities(got)) == set(identities(expected))


def test_sigterm_checkpoints_and_exits_within_ten_seconds(pipeline: Pipeline) -> None:
    lines = scenario_traces()
    worker = pipeline.start_worker("term")
    worker.wait_ready()
    pipeline.produce(lines)
    pipeline.read_until(has_ids(set(identities(replay_outputs(lines)))))
    # docs/operations.md: out within 10 s of SIGTERM (a deadline, not a measured duration)
    worker.process.send_signal(signal.SIGTERM)
    try:
        worker.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.kill()
        pytest.fail(f"still running 10 s after SIGTERM:\n{worker.log_text()[-3000:]}")
    assert worker.process.returncode == 0, worker.log_text()[-3000:]
    # the last checkpoint committed every input offset on the way out
    pipeline.wait_committed(timeout=5)


def test_worker_processes_share_the_partitions(pipeline: Pipeline) -> None:
    supervisor, _ = pipeline.processes_like_replay("pair", scenario_traces(), "--processes", "2")
    restored = [line for line in supervisor.log_text().splitlines() if "restored:" in line]
    pids = {line.split("] [")[1].split("]")[0] for line in restored}
    assert len(pids) == 2, "both processes took partitions"
    supervisor.stop(timeout=30)
    assert supervisor.process.returncode == 0, supervisor.log_text()[-2000:]


def test_idle_expiry_on_kafka_equals_replay_with_its_partitions(pipeline: Pipeline) -> None:
    # Contract 1.2: each input partition keeps its own event-time clock, so the worker's
    # outputs are those of `spanguard replay --partitions 4` (the topic's partitions).
    lines = expiring_traces()
    expected = replay_outputs(lines, partitions=4)
    assert sum(b"SESSION_EXPIRED" in record for record in expected) >= 5
    pipeline.start_worker("x").wait_ready()
    pipeline.produce(lines)
    got = pipeline.read_settled(has_ids(set(identities(expected))))
    assert identities(got) == identities(expected)

    def comparable(record: bytes) -> bytes | tuple[str, str, str]:
        # A dead letter says where it came from (topic, offset): replay's file, the
        # worker's topic; what it says of the event is the same.
        data = orjson.loads(record)
        if data["type"] != "event.rejected":
            return record
        return (data["reason"], data["detail"], data["raw"])

    assert sorted(map(comparable, got), key=repr) == sorted(map(comparable, expected), key=repr)
