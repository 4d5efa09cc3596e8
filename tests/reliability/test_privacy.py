"""`spanguard privacy-scan`: span text and clear referent keys, searched in topics and files.

The worker's data path is being rewritten, so the scanner is proven here on topics
this test fills itself: the engine's real outputs of a simulated fleet (clean), the
same outputs with keys left in clear (``clear_keys``: a real leak of keys), and a
topic where one record carries a span text. ``privacy_scan(settings, trace)`` is the
helper to call after a real worker run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from typer.testing import CliRunner

from spanguard.schemas import OUTPUT_SUFFIXES, TOPIC_OF
from spanguard.schemas.codec import encode_output
from spanguard.streams.cli.main import app
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.kafka_io.privacy import (
    needles_from_trace,
    privacy_scan,
    scan_directory,
    scanned_topics,
)
from spanguard.streams.kafka_io.topics import ensure_topics
from spanguard.streams.settings import Settings
from spanguard.streams.sim import SimConfig, simulate
from tests.reliability.secure_broker import SecureBroker

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def trace() -> list[bytes]:
    lines = simulate(SimConfig(sessions=12, seed=21, events_per_session=40)).lines
    # One record the engine must dead-letter, whatever the simulator writes: its text
    # and hash disagree (HASH_MISMATCH), and the dead letter keeps the raw input.
    bad = orjson.loads(lines[0])
    bad.update(event_id="s21-dead-letter", seq=10_000, text_sha256="0" * 64)
    return [*lines, orjson.dumps(bad)]


def outputs(trace: Sequence[bytes], clear_keys: bool = False) -> list[tuple[str, bytes, bytes]]:
    """(topic suffix, key, value) of every output of the engine over ``trace``."""
    engine = Engine(EngineSettings(clear_keys=clear_keys))
    records = []
    for offset, line in enumerate(trace):
        for event in engine.process_raw(line, Source("events", 0, offset)):
            key = (getattr(event, "session_id", None) or "").encode()
            records.append((TOPIC_OF[event.type], key, encode_output(event)))
    return records


async def fill(bootstrap: str, prefix: str, records: Sequence[tuple[str, bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=4 << 20)
    await producer.start()
    try:
        sent = [
            await producer.send(f"{prefix}.{suffix}", value=value, key=key or None)
            for suffix, key, value in records
        ]
        await asyncio.gather(*sent)  # every record acknowledged (an error fails the test)
    finally:
        await producer.stop()


async def deployment(
    broker: SecureBroker, trace: Sequence[bytes], records: Sequence[tuple[str, bytes, bytes]]
) -> Settings:
    """A topic prefix holding ``records``, plus the raw trace on its input topic."""
    settings = Settings(broker=f"kafka://{broker.plaintext}", topic_prefix=uuid.uuid4().hex[:10])
    await ensure_topics(settings)
    events = [("events", b"", line) for line in trace]
    await fill(broker.plaintext, settings.topic_prefix, [*events, *records])
    return settings


def test_needles_hold_texts_and_keys_but_not_ids(trace: list[bytes]) -> None:
    needles = needles_from_trace(trace)
    assert len(needles.texts) > 50
    assert all(len(text) >= 8 for text in needles.texts)
    assert len(needles.keys) > 10
    # session and event ids are the harness's identifiers: never needles
    assert not any(key.startswith("s21-") for key in needles.keys)


def test_scanned_topics_skip_input_and_dead_letters() -> None:
    topics = ["p.events", "p.faults", "p.deadletter", "p.pins", "px.faults", "app-t-changelog"]
    topics += ["app.changelog", "apple.changelog", "p-app.fleet"]
    assert scanned_topics(topics, "p", "app") == [
        "app-t-changelog",
        "app.changelog",
        "p.faults",
        "p.pins",
    ]


async def test_real_outputs_are_clean(secure_broker: SecureBroker, trace: list[bytes]) -> None:
    records = outputs(trace)
    # the dead-letter topic does hold raw input (that is allowed, and not scanned)
    assert any(suffix == "deadletter" for suffix, _, _ in records)
    settings = await deployment(secure_broker, trace, records)
    report = await privacy_scan(settings, trace)
    assert report.topics == sorted(settings.topic(s) for s in OUTPUT_SUFFIXES if s != "deadletter")
    assert report.records == sum(1 for suffix, _, _ in records if suffix != "deadletter")
    assert report.findings == []
    assert report.clean


async def test_clear_keys_and_a_leaked_text_are_found(
    secure_broker: SecureBroker, trace: list[bytes], tmp_path: Path
) -> None:
    needles = needles_from_trace(trace)
    leaked_text = max(needles.texts, key=len)
    records = outputs(trace, clear_keys=True)  # keys emitted unhashed: a real leak
    records.append(("faults", b"s1", b'{"evidence": {"note": "' + leaked_text.encode() + b'"}}'))
    settings = await deployment(secure_broker, trace, records)
    report = await privacy_scan(settings, trace)
    kinds = {finding.kind for finding in report.findings}
    assert kinds == {"span text", "referent key"}
    text_hits = [f for f in report.findings if f.kind == "span text"]
    assert [f.where.split("[")[0] for f in text_hits] == [settings.topic("faults")]
    assert all(len(f.preview) <= 12 for f in report.findings)


def test_data_directory_scan(trace: list[bytes], tmp_path: Path) -> None:
    needles = needles_from_trace(trace)
    clean = tmp_path / "clean"
    (clean / "store").mkdir(parents=True)
    (clean / "store" / "000001.log").write_bytes(
        b"".join(value for _, _, value in outputs(trace) if b"event.rejected" not in value)
    )
    assert scan_directory(clean, needles) == (1, [])
    leaky = tmp_path / "leaky"
    leaky.mkdir()
    (leaky / "state.bin").write_bytes(b"\x00\x01" + needles.texts[3].encode() + b"\xff")
    files, findings = scan_directory(leaky, needles)
    assert files == 1
    assert "span text" in {f.kind for f in findings}
    assert {f.where for f in findings} == {str(leaky / "state.bin")}


def test_cli_exits_non_zero_with_a_report_on_a_leak(
    secure_broker: SecureBroker,
    trace: list[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace_file = tmp_path / "trace.jsonl"
    trace_file.write_bytes(b"\n".join(trace) + b"\n")
    needles = needles_from_trace(trace)
    secret_text = needles.texts[0]
    clean = asyncio.run(deployment(secure_broker, trace, outputs(trace)))
    leaky = asyncio.run(
        deployment(secure_broker, trace, [("pins", b"k", b"x" + secret_text.encode() + b"y")])
    )
    runner = CliRunner()
    monkeypatch.setenv("SPANGUARD_BROKER", f"kafka://{secure_broker.plaintext}")

    monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", clean.topic_prefix)
    ok = runner.invoke(app, ["privacy-scan", str(trace_file)])
    assert ok.exit_code == 0, ok.output
    assert "clean: no span text and no clear referent key found" in ok.stdout

    monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", leaky.topic_prefix)
    leak = runner.invoke(app, ["privacy-scan", str(trace_file)])
    assert leak.exit_code == 1, leak.output
    assert "LEAK: " in leak.stdout
    assert f"{leaky.topic('pins')}[0]@0: span text" in leak.stdout
    assert secret_text not in leak.stdout  # the report never prints what it found
