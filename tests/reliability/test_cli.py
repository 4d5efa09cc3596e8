"""Command-line failures are one clear line: unreachable broker, empty input, bad settings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from rich.console import Console
from typer.testing import CliRunner

from spanguard.schemas import EventRejected, RejectReason
from spanguard.schemas.codec import decode_output
from spanguard.streams.cli.demo_lines import demo_line
from spanguard.streams.cli.main import app
from spanguard.streams.cli.summary import OutputSummary
from spanguard.streams.localbroker.broker import free_port

runner = CliRunner()


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> str:
    """SPANGUARD_BROKER names a loopback port where nothing listens."""
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("SPANGUARD_BROKER", f"kafka://{address}")
    return address


def test_produce_to_an_unreachable_broker_is_one_line(no_broker: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b'{"type":"session.closed","session_id":"s1"}\n')
    result = runner.invoke(app, ["produce", str(trace)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: cannot use Kafka at {no_broker}: nothing listens")
    assert "spanguard kafka start" in lines[0]
    assert "Traceback" not in result.output


def test_consume_from_an_unreachable_broker_is_one_line(no_broker: str) -> None:
    result = runner.invoke(app, ["consume", "--idle", "1"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "nothing listens" in lines[0]


@pytest.mark.parametrize("content", [b"", b"\n  \n\r\n"])
def test_produce_an_empty_file_gives_a_hint(no_broker: str, tmp_path: Path, content: bytes) -> None:
    trace = tmp_path / "empty.jsonl"
    trace.write_bytes(content)
    result = runner.invoke(app, ["produce", str(trace)])
    assert result.exit_code == 2
    assert "nothing to publish" in result.stderr
    assert "spanguard simulate" in result.stderr


def test_produce_an_unreadable_password_file_is_one_line(
    no_broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "SPANGUARD_BROKER_CREDENTIALS",
        f'{{"username": "u", "password_file": "{tmp_path / "missing"}"}}',
    )
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b"{}\n")
    result = runner.invoke(app, ["produce", str(trace)])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot read the Kafka password file {tmp_path / 'missing'}: "
        "No such file or directory"
    ]


def test_consume_summary_counts_outputs_not_inputs() -> None:
    summary = OutputSummary()
    summary.add(
        EventRejected(
            session_id=None,
            tenant=None,
            caused_by=None,
            ts="2026-01-01T00:00:00Z",
            rejection_id="r1",
            reason=RejectReason.INVALID_JSON,
            detail="x",
            raw="",
            raw_size=0,
            topic="t",
            partition=0,
            offset=0,
        )
    )
    console = Console(record=True, width=100)
    summary.render(console, counted="outputs")
    text = console.export_text()
    assert "1 output records" in text
    assert "input records" not in text


def test_follow_lines_keep_square_brackets() -> None:
    # rich reads "[u5:PINNED]" as markup and eats it unless it is escaped
    decision = decode_output(
        orjson.dumps(
            {
                "type": "eviction.decided",
                "schema_version": 1,
                "session_id": "s[1]",
                "tenant": "t",
                "caused_by": "e1",
                "ts": "2026-01-01T00:00:00Z",
                "decision_id": "d1",
                "request_id": "r1",
                "basis": "score",
                "action": "PARTIAL",
                "committed": ["a1"],
                "refused": [{"span_id": "u5", "reason": "PINNED"}],
                "dropped": [],
                "pins": [],
                "faults": [],
                "recompute_id": None,
            }
        )
    )
    console = Console(record=True, width=200)
    console.print(demo_line(decision))
    text = console.export_text()
    assert "refused=[u5:PINNED]" in text
    assert "t/s[1]" in text
