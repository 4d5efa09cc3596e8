"""`spanguard replay` end to end, through the real command line."""

from pathlib import Path

import orjson
from typer.testing import CliRunner

from spanguard.streams.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["replay", *args])


def outputs(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_healthy_example_has_no_warning(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run(str(EXAMPLES / "healthy.jsonl"), "--out", str(out), "--fail-on", "warning")
    assert result.exit_code == 0, result.output
    events = outputs(out)
    assert [e for e in events if e["type"] == "integrity.fault"] == []
    assert {e["action"] for e in events if e["type"] == "eviction.decided"} >= {"COMMIT"}


def test_broken_example_fails_on_critical_and_explains(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run(str(EXAMPLES / "broken.jsonl"), "--out", str(out), "--fail-on", "critical")
    assert result.exit_code == 1
    kinds = {e["kind"] for e in outputs(out) if e["type"] == "integrity.fault"}
    assert {
        "SCORE_PROVENANCE_GAP",
        "REWRITE_WITHOUT_INVALIDATION",
        "MONOTONIC_DRIFT",
        "ORPHANED_PARENT",
        "REWRITE_OF_REWRITE",
        "POISONED_SPAN",
    } <= kinds
    assert "Integrity faults" in result.output


def test_invalid_lines_become_rejections_and_processing_goes_on(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    good = (EXAMPLES / "healthy.jsonl").read_bytes().splitlines()
    trace.write_bytes(b"\n".join([b"not json", *good[:3], b"", b"[]"]) + b"\n")
    out = tmp_path / "out.jsonl"
    result = run(str(trace), "--out", str(out))
    assert result.exit_code == 0, result.output
    reasons = [e["reason"] for e in outputs(out) if e["type"] == "event.rejected"]
    assert reasons == ["INVALID_JSON", "NOT_AN_OBJECT"]


def test_stdin_to_stdout_is_deterministic() -> None:
    data = (EXAMPLES / "broken.jsonl").read_bytes()
    first = runner.invoke(app, ["replay", "-", "--quiet"], input=data)
    second = runner.invoke(app, ["replay", "-", "--quiet"], input=data)
    assert first.exit_code == 0 and first.stdout == second.stdout and first.stdout


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = run(str(tmp_path / "nope.jsonl"))
    assert result.exit_code == 2
    assert "No such file" in result.output


def test_compactions_example_is_the_scenarios_and_each_failure_is_told_apart(
    tmp_path: Path,
) -> None:
    from spanguard.streams.sim.compactions import compaction_fleet

    example = EXAMPLES / "compactions.jsonl"
    assert example.read_bytes().splitlines() == compaction_fleet(), (
        "regenerate: examples/compactions.jsonl from"
        " spanguard.streams.sim.compactions.compaction_fleet()"
    )
    out = tmp_path / "out.jsonl"
    result = run(str(example), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "Compactions" in result.output and "tokens saved" in result.output
    events = outputs(out)
    kinds: dict[str, list[str]] = {}
    for event in events:
        if event["type"] == "integrity.fault":
            kinds.setdefault(event["session_id"], []).append(event["kind"])
    assert kinds == {
        "split-pair": ["TOOL_PAIR_SPLIT"],
        "rewritten-prompt": ["PROTECTED_SPAN_REWRITTEN"],
        "lost-keys": ["SUMMARY_LOST_KEYS"],
        "thrashing": ["COMPACTION_THRASHING"],
    }  # and nothing for the healthy counterparts
    refused = {
        (event["session_id"], r["span_id"], r["reason"], r.get("held_by"))
        for event in events
        if event["type"] == "eviction.decided"
        for r in event["refused"]
    }
    assert refused == {
        ("half-pair-eviction", "sys", "PROTECTED", None),
        ("half-pair-eviction", "a1", "TOOL_PAIR", "t1"),
    }
    records = [e for e in events if e["type"] == "context.compacted"]
    assert len(records) == 14
    for record in records:
        faults = [
            e["fault_id"]
            for e in events
            if e["type"] == "integrity.fault" and e["caused_by"] == record["caused_by"]
        ]
        assert record["faults"] == faults
        assert events.index(record) > max(
            (events.index(e) for e in events if e.get("fault_id") in faults), default=-1
        )
