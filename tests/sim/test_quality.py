"""End to end: a simulated fleet through the engine (in process, no Kafka), scored
against its truth; and the ``simulate`` / ``quality`` commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from spanguard.schemas.codec import encode_output
from spanguard.streams.cli import sim_cli
from spanguard.streams.cli.replay import replay
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.sim import SimConfig, SimulatedFleet, simulate
from spanguard.streams.sim.quality import QualityReport, evaluate, read_outputs

ALL_KINDS = {
    "SCORE_PROVENANCE_GAP",
    "STALE_SCORE",
    "REWRITE_WITHOUT_INVALIDATION",
    "UNDECLARED_MODIFICATION",
    "MONOTONIC_DRIFT",
    "ORPHANED_PARENT",
    "REWRITE_OF_REWRITE",
    "POISONED_SPAN",
    "UNGATED_EVICTION",
    "REFERENT_DROPPED",
    "SEQUENCE_GAP",
    "PRUNING_STALLED",
    "SUMMARY_BALLOONING",
    "EMPTY_SUMMARY",
    "TOOL_PAIR_SPLIT",
    "PROTECTED_SPAN_REWRITTEN",
    "SUMMARY_LOST_KEYS",
    "COMPACTION_THRASHING",
}


def run_engine(fleet: SimulatedFleet) -> list[dict[str, Any]]:
    driver = EngineDriver()
    driver.pipe(fleet.lines)
    return [orjson.loads(encode_output(o)) for o in driver.outputs]


@pytest.fixture(scope="module")
def fleet() -> SimulatedFleet:
    return simulate(SimConfig(sessions=30, seed=7, fault_rate=0.6))


@pytest.fixture(scope="module")
def outputs(fleet: SimulatedFleet) -> list[dict[str, Any]]:
    return run_engine(fleet)


@pytest.fixture(scope="module")
def report(fleet: SimulatedFleet, outputs: list[dict[str, Any]]) -> QualityReport:
    return evaluate(fleet.truth, outputs)


def test_every_injected_kind_is_found_exactly(report: QualityReport) -> None:
    by_kind = {k.kind: k for k in report.kinds}
    assert set(by_kind) == ALL_KINDS
    for kind in by_kind.values():
        assert kind.injected >= 1, kind
        assert kind.recall == 1.0, kind
        # Every rule involved is exact: nothing is reported that was not injected.
        assert kind.precision == 1.0, kind
        assert kind.located == kind.injected, kind
    assert report.lowest_recall() == 1.0


def test_healthy_sessions_have_no_warning_or_critical_fault(report: QualityReport) -> None:
    assert report.healthy_sessions >= 5
    assert report.healthy_fault_count == 0
    assert report.unknown_session_faults == 0


def test_dead_letters_get_the_expected_reasons(report: QualityReport) -> None:
    assert report.deadletters
    for row in report.deadletters:
        assert row.expected == row.rejected == row.matched, row


def test_the_gate_destroys_no_live_referent(report: QualityReport) -> None:
    assert report.referent_without_gate > 15
    assert report.requests_needing > 10
    assert report.referent_with_gate == 0
    assert report.decisions_missing == 0
    assert report.decisions_matching == report.decisions_expected > 50


def test_the_gate_evicts_less_in_referent_dense_sessions(report: QualityReport) -> None:
    volume = {row.group: row for row in report.volume}
    dense, sparse = volume["dense"], volume["sparse"]
    assert dense.change is not None and sparse.change is not None
    # Contract 1.2 refuses the protected system prompt and task, and half a tool pair,
    # besides the pins: the gate evicts far less than a naive pruner.
    assert -0.8 < dense.change < -0.1
    assert dense.pinned > 10 and dense.protected > 10 and dense.paired > 0
    assert sparse.change > dense.change
    healthy = volume["dense-healthy"]
    kept = healthy.pinned + healthy.protected + healthy.paired
    assert healthy.frozen == 0 and healthy.committed + kept == healthy.requested


def test_quality_notices_a_broken_engine(
    fleet: SimulatedFleet, outputs: list[dict[str, Any]]
) -> None:
    """The figures move when the outputs are wrong: these checks can fail."""
    healthy = next(s for s in fleet.truth.sessions if s.healthy)
    needed = next(e for s in fleet.truth.sessions for e in s.evictions if e.needed)
    tampered: list[dict[str, Any]] = []
    for event in outputs:
        if event["type"] == "integrity.fault" and event["kind"] == "STALE_SCORE":
            continue  # an engine that never reports stale scores
        if (
            event["type"] == "eviction.decided"
            and event["session_id"] == needed.session_id
            and event["request_id"] == needed.request_id
        ):
            event = {**event, "committed": [*event["committed"], needed.needed[0]]}
        tampered.append(event)
    noise = next(o for o in outputs if o["type"] == "integrity.fault")
    tampered.append({**noise, "fault_id": "flt-x", "session_id": healthy.session_id})
    tampered.append(tampered[0])  # a duplicate delivery is not counted twice
    report = evaluate(fleet.truth, tampered)
    by_kind = {k.kind: k for k in report.kinds}
    assert by_kind["STALE_SCORE"].recall == 0.0
    assert report.lowest_recall() == 0.0
    assert report.healthy_fault_count == 1
    assert report.referent_with_gate == 1
    assert report.decisions_matching == report.decisions_expected - 1
    assert report.duplicates == 1
    assert by_kind[noise["kind"]].precision is not None
    assert by_kind[noise["kind"]].precision < 1.0  # type: ignore[operator]


def test_report_json_has_every_figure(report: QualityReport) -> None:
    data = report.to_json()
    assert data["healthy_sessions"]["warning_or_critical_faults"] == 0
    assert data["referents"]["evictions_destroying_a_live_referent_with_gate"] == 0
    assert data["faults"]["STALE_SCORE"]["recall"] == 1.0
    assert data["eviction_volume"]["dense"]["change"] < 0
    orjson.dumps(data)


def test_read_outputs_names_a_bad_line() -> None:
    assert read_outputs([b'{"type": "x"}', b"", b"  "]) == [{"type": "x"}]
    with pytest.raises(ValueError, match="line 2"):
        read_outputs([b"{}", b"nope"])
    with pytest.raises(ValueError, match="line 1 is not a JSON object"):
        read_outputs([b"[1]"])


# -- the commands --------------------------------------------------------------

app = typer.Typer()
app.command()(sim_cli.simulate)
app.command()(sim_cli.quality)
app.command()(replay)
runner = CliRunner()


def test_simulate_replay_quality_through_the_commands(tmp_path: Path) -> None:
    events = tmp_path / "sim.jsonl"
    result = runner.invoke(
        app,
        [
            "simulate",
            "--sessions",
            "20",
            "--seed",
            "5",
            "--fault-rate",
            "0.7",
            "--out",
            str(events),
        ],
    )
    assert result.exit_code == 0, result.output
    truth = tmp_path / "sim.truth.json"
    assert events.exists() and truth.exists()
    assert "Simulated fleet" in result.output
    again = tmp_path / "again.jsonl"
    other_truth = tmp_path / "t.json"
    result = runner.invoke(
        app,
        [
            "simulate",
            "-n",
            "20",
            "--seed",
            "5",
            "--fault-rate",
            "0.7",
            "-o",
            str(again),
            "--truth",
            str(other_truth),
            "-q",
        ],
    )
    assert result.exit_code == 0 and result.output == ""
    assert again.read_bytes() == events.read_bytes()
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["replay", str(events), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    figures = tmp_path / "q.json"
    result = runner.invoke(
        app,
        [
            "quality",
            "--truth",
            str(truth),
            "--outputs",
            str(out),
            "--json",
            str(figures),
            "--min-recall",
            "1.0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Detection per fault kind" in result.output
    assert "Evictions that would destroy a live referent" in result.output
    data = orjson.loads(figures.read_bytes())
    assert data["healthy_sessions"]["warning_or_critical_faults"] == 0
    assert data["referents"]["evictions_destroying_a_live_referent_with_gate"] == 0
    assert data["referents"]["evictions_destroying_a_live_referent_without_gate"] > 0
    assert all(f["recall"] in (None, 1.0) for f in data["faults"].values())

    # An engine that misses a kind: recall below the bar, exit 1.
    kept = [
        line
        for line in out.read_bytes().splitlines()
        if b'"kind":"REFERENT_DROPPED"' not in line and b'"kind":"UNGATED_EVICTION"' not in line
    ]
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(b"\n".join(kept) + b"\n")
    result = runner.invoke(
        app, ["quality", "--truth", str(truth), "--outputs", str(partial), "--min-recall", "0.9"]
    )
    assert result.exit_code == 1
    assert "recall below 0.9" in result.output


def test_quality_reads_stdin_and_reports_bad_input(tmp_path: Path) -> None:
    truth = tmp_path / "sim.truth.json"
    runner.invoke(app, ["simulate", "-n", "3", "-o", str(tmp_path / "sim.jsonl"), "-q"])
    result = runner.invoke(app, ["quality", "--truth", str(truth), "--outputs", "-"], input=b"")
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["quality", "--truth", str(truth), "--outputs", "-"], input=b"nope\n"
    )
    assert result.exit_code == 2
    result = runner.invoke(
        app, ["quality", "--truth", str(tmp_path / "missing.json"), "--outputs", "-"]
    )
    assert result.exit_code == 2
    not_truth = tmp_path / "x.json"
    not_truth.write_bytes(b"{}")
    result = runner.invoke(app, ["quality", "--truth", str(not_truth), "--outputs", "-"], input=b"")
    assert result.exit_code == 2


def test_simulate_rejects_bad_options(tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulate", "--faults", "NOPE", "-o", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 2 and "unknown fault" in result.output
    result = runner.invoke(app, ["simulate", "-o", "-"])
    assert result.exit_code == 2 and "--truth" in result.output
    result = runner.invoke(app, ["simulate", "--fault-rate", "2", "-o", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 2


def test_simulate_to_stdout(tmp_path: Path) -> None:
    truth = tmp_path / "t.json"
    result = runner.invoke(app, ["simulate", "-n", "2", "-o", "-", "--truth", str(truth), "-q"])
    assert result.exit_code == 0
    lines = result.stdout_bytes.splitlines()
    assert len(lines) == orjson.loads(truth.read_bytes())["events"]["lines"] > 10


def test_simulate_publishes_to_kafka_and_still_writes_the_truth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spanguard.streams.kafka_io.producer as producer
    import spanguard.streams.kafka_io.topics as topics

    sent: dict[str, Any] = {}

    async def fake_produce(
        bootstrap: str, topic: str, lines: list[bytes], rate: float | None
    ) -> int:
        sent.update(bootstrap=bootstrap, topic=topic, lines=list(lines), rate=rate)
        return len(sent["lines"])

    async def fake_topics(settings: object) -> list[str]:
        return []

    monkeypatch.setattr(producer, "produce_lines", fake_produce)
    monkeypatch.setattr(topics, "ensure_topics", fake_topics)
    monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", "simtest")
    monkeypatch.setenv("SPANGUARD_BROKER", "kafka://broker-a:9092")
    truth = tmp_path / "k.truth.json"
    result = runner.invoke(
        app,
        ["simulate", "-n", "4", "--seed", "9", "--kafka", "--rate", "500", "--truth", str(truth)],
    )
    assert result.exit_code == 0, result.output
    assert sent["topic"] == "simtest.events" and sent["bootstrap"] == "broker-a:9092"
    assert sent["rate"] == 500
    expected = simulate(SimConfig(sessions=4, seed=9))
    assert sent["lines"] == expected.lines
    data = orjson.loads(truth.read_bytes())
    assert data["events"]["file"] is None and data["events"]["lines"] == len(expected.lines)
