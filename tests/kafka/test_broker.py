"""The local Kafka broker: real produce/consume, compaction, transactions, and its lifecycle."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord
from typer.testing import CliRunner

from spanguard.streams.cli.main import app
from spanguard.streams.kafka_io.topics import create_topics, topic_config
from spanguard.streams.localbroker.broker import DEFAULT_HOME, BrokerError, LocalBroker, free_ports

SHARED_LIB_DIR = DEFAULT_HOME / "lib"  # the jars every test broker shares (see conftest.py)
WaitUntil = Callable[..., Awaitable[None]]  # the conftest fixture ``wait_until``

# --------------------------------------------------------------------------- helpers


async def read_all(
    bootstrap: str, topic: str, *, isolation_level: str = "read_uncommitted", timeout: float = 30
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of a single-partition topic, from its beginning to its current end."""
    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        begin = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, begin)
        records: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while await consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"could not read {topic} up to offset {end}"
            batch = await consumer.getmany(tp, timeout_ms=500)
            records.extend(batch.get(tp, []))
        return records
    finally:
        await consumer.stop()


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --------------------------------------------------------------------------- real broker


async def test_produce_consume_roundtrip(
    kafka_bootstrap: str, unique_name: Callable[[str], str], wait_until: WaitUntil
) -> None:
    topic = unique_name("roundtrip")
    await create_topics(kafka_bootstrap, [topic], partitions=3)
    sent = [(f"key-{i % 5}".encode(), f"value-{i}".encode()) for i in range(30)]

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in sent:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()

    received: list[tuple[bytes, bytes]] = []
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=unique_name("group"),
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    await consumer.start()
    try:

        async def poll() -> bool:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                received.extend((r.key, r.value) for r in records if r.key and r.value)
            return len(received) >= len(sent)

        await wait_until(poll, timeout=60, what="all 30 records")
        await consumer.commit()
    finally:
        await consumer.stop()

    assert sorted(received) == sorted(sent)
    for key in {k for k, _ in sent}:  # order is kept per key (one key, one partition)
        assert [v for k, v in received if k == key] == [v for k, v in sent if k == key]


async def test_compacted_topic_is_created_and_compacts(
    kafka_bootstrap: str, unique_name: Callable[[str], str], wait_until: WaitUntil
) -> None:
    topic = unique_name("compacted")
    await create_topics(
        kafka_bootstrap,
        [topic],
        configs={
            "cleanup.policy": "compact",
            "segment.ms": "100",  # roll segments quickly: the active one is never cleaned
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    assert (await topic_config(kafka_bootstrap, topic))["cleanup.policy"] == "compact"

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(50):
            await producer.send(topic, f"v{i}".encode(), key=b"k")
        await producer.flush()

        async def compacted() -> bool:
            # each new record lets the broker roll the previous segment, so it can be cleaned
            await producer.send_and_wait(topic, b"tick", key=b"filler")
            records = await read_all(kafka_bootstrap, topic)
            return [r.value for r in records if r.key == b"k"] == [b"v49"]

        await wait_until(compacted, timeout=60, interval=0.2, what="the log cleaner")
    finally:
        await producer.stop()


async def test_transactional_producer_commits_and_aborts(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    """The exactly-once prerequisites: transactions, and consumer offsets inside them."""
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    group = unique_name("eos-group")
    await create_topics(kafka_bootstrap, [source])
    await create_topics(kafka_bootstrap, [sink])

    plain = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await plain.start()
    try:
        for i in range(3):
            await plain.send(source, f"in-{i}".encode())
        await plain.flush()
    finally:
        await plain.stop()

    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        transactional_id=unique_name("txn"),
        enable_idempotence=True,
    )
    await producer.start()
    try:
        # consume-transform-produce with the input offsets committed in the transaction
        source_tp = TopicPartition(source, 0)
        consumed = await read_all(kafka_bootstrap, source)
        async with producer.transaction():
            for record in consumed:
                await producer.send(sink, b"out-" + record.value)
            await producer.send_offsets_to_transaction({source_tp: consumed[-1].offset + 1}, group)

        await producer.begin_transaction()
        await producer.send_and_wait(sink, b"aborted")
        await producer.abort_transaction()

        async with producer.transaction():
            await producer.send(sink, b"committed-last")
    finally:
        await producer.stop()

    committed_records = await read_all(kafka_bootstrap, sink, isolation_level="read_committed")
    committed = [r.value for r in committed_records]
    assert committed == [b"out-in-0", b"out-in-1", b"out-in-2", b"committed-last"]
    uncommitted = [r.value for r in await read_all(kafka_bootstrap, sink)]
    assert b"aborted" in uncommitted  # really written, then hidden by the abort marker

    checker = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    await checker.start()
    try:
        assert await checker.committed(source_tp) == 3
    finally:
        await checker.stop()


# --------------------------------------------------------------------------- lifecycle


@pytest.mark.parametrize("taken", ["port", "controller_port"])
def test_start_refuses_a_port_taken_by_another_process(tmp_path: Path, taken: str) -> None:
    port, controller_port = free_ports(2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", port if taken == "port" else controller_port))
        squatter.listen()
        broker = LocalBroker(
            home=tmp_path / "home",
            port=port,
            controller_port=controller_port,
            lib_dir=SHARED_LIB_DIR,
        )
        # refused at once, before anything of a broker: no configuration written, no JVM
        # launched (its log untouched), and no waiting (a 5 s deadline would end that)
        taken_port = port if taken == "port" else controller_port
        with pytest.raises(BrokerError, match=rf"^127\.0\.0\.1:{taken_port} .* refusing to start"):
            broker.start(timeout=5)
        assert not broker.config_file.exists() and not broker.log_file.exists()
    assert not broker.pid_file.exists()
    assert not broker.status().running


def test_an_unusable_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setenv("SPANGUARD_JAVA", str(tmp_path / "no-such-java"))
    port, controller_port = free_ports(2)
    broker = LocalBroker(
        home=tmp_path / "home",
        port=port,
        controller_port=controller_port,
        lib_dir=tmp_path / "lib",
    )
    with pytest.raises(BrokerError, match=r"^SPANGUARD_JAVA=.*no-such-java is neither a java"):
        broker.start(timeout=5)
    assert not broker.pid_file.exists()
    assert not (tmp_path / "lib").exists()  # refused before any download


def test_start_is_idempotent(local_kafka_broker: LocalBroker | None) -> None:
    if local_kafka_broker is None:
        pytest.skip("KAFKA_BOOTSTRAP names an external broker")
    before = local_kafka_broker.status()
    assert before.running and before.pid is not None

    assert local_kafka_broker.start(timeout=5) == before.bootstrap
    # a second object for the same home (as the CLI makes) sees the running broker too
    twin = LocalBroker(
        home=local_kafka_broker.home,
        port=local_kafka_broker.port,
        controller_port=local_kafka_broker.controller_port,
        lib_dir=local_kafka_broker.lib_dir,
    )
    assert twin.start(timeout=5) == before.bootstrap
    assert local_kafka_broker.status().pid == before.pid
    assert twin.is_answering()


def test_stop_only_ends_its_own_process(
    tmp_path: Path, local_kafka_broker: LocalBroker | None
) -> None:
    # a home that never started a broker: nothing to stop
    port, controller_port = free_ports(2)
    idle = LocalBroker(
        home=tmp_path / "idle", port=port, controller_port=controller_port, lib_dir=SHARED_LIB_DIR
    )
    assert idle.stop() is False

    # a PID file naming some other live process: it is left alone, the stale file removed
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        idle.home.mkdir(parents=True, exist_ok=True)
        idle.pid_file.write_text(f"{stranger.pid}\n")
        assert idle.status().running is False
        assert idle.stop(timeout=1) is False
        assert stranger.poll() is None and pid_alive(stranger.pid)
        assert not idle.pid_file.exists()

        # a PID file naming a Kafka broker of *another* home: also left alone
        if local_kafka_broker is not None:
            other_pid = local_kafka_broker.status().pid
            assert other_pid is not None
            idle.pid_file.write_text(f"{other_pid}\n")
            assert idle.stop(timeout=1) is False
            assert pid_alive(other_pid)
            assert local_kafka_broker.status().running
    finally:
        assert stranger.stdin is not None
        stranger.stdin.close()
        stranger.wait(timeout=10)


async def test_lifecycle_start_stop_restart_keeps_data(
    tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    port, controller_port = free_ports(2)
    broker = LocalBroker(
        home=tmp_path / "own", port=port, controller_port=controller_port, lib_dir=SHARED_LIB_DIR
    )
    try:
        bootstrap = broker.start(timeout=120)
        assert bootstrap == f"127.0.0.1:{port}"
        status = broker.status()
        assert status.running and status.pid is not None
        pid = status.pid
        assert broker.pid_file.read_text().strip() == str(pid)
        assert (broker.data_dir / "meta.properties").is_file()

        topic = unique_name("durable")
        await create_topics(bootstrap, [topic])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"survives", key=b"k")
        finally:
            await producer.stop()

        assert broker.stop(timeout=30) is True
        assert not pid_alive(pid)
        assert not broker.pid_file.exists()
        stopped = broker.status()
        assert (stopped.running, stopped.pid, stopped.bootstrap) == (False, None, bootstrap)
        assert broker.stop() is False  # stopping twice is harmless

        # restart on the formatted storage: the topic and its record are still there
        assert broker.start(timeout=120) == bootstrap
        records: list[Any] = await read_all(bootstrap, topic)
        assert [(r.key, r.value) for r in records] == [(b"k", b"survives")]
    finally:
        broker.stop()
    assert not broker.status().running


# --------------------------------------------------------------------------- command line

cli = CliRunner()


def test_cli_unusable_java_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    # An explicit controller port: port + 1 (the default) may be any other process's.
    port, controller_port = free_ports(2)
    home = ["--home", str(tmp_path / "home")]

    started = cli.invoke(
        app,
        ["kafka", "start", "--port", str(port), "--controller-port", str(controller_port), *home],
    )
    assert started.exit_code == 1
    assert started.stderr.splitlines()[-1] == (
        f"error: JAVA_HOME={tmp_path / 'no-jdk'} has no bin/java; fix or unset it (without "
        "it the broker uses the Java of spanguard[broker])"
    )
    assert "Traceback" not in started.output


@pytest.mark.parametrize(
    ("broker", "message"),
    [
        ("kafka://10.1.2.3:9092", "is not on 127.0.0.1"),
        ("kafka://127.0.0.1:9092;kafka://127.0.0.1:9093", "names several brokers"),
    ],
)
def test_cli_start_refuses_a_configured_address_it_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broker: str, message: str
) -> None:
    monkeypatch.setenv("SPANGUARD_BROKER", broker)
    result = cli.invoke(app, ["kafka", "start", "--home", str(tmp_path / "home")])
    assert result.exit_code == 1
    assert message in result.stderr
    assert not (tmp_path / "home" / "broker.pid").exists()


def test_cli_start_honours_the_configured_broker_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, controller_port = free_ports(2)
    monkeypatch.setenv("SPANGUARD_BROKER", f"kafka://127.0.0.1:{port}")
    home = ["--home", str(tmp_path / "home")]
    try:
        # An explicit controller port: port + 1 (the default) is even, the parity Linux
        # gives outgoing connections, so during the suite it is often some client's.
        result = cli.invoke(
            app,
            ["kafka", "start", *home, "--controller-port", str(controller_port),
             "--lib-dir", str(SHARED_LIB_DIR), "--timeout", "120"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == f"127.0.0.1:{port}"
        assert LocalBroker(home=tmp_path / "home", port=port).is_answering()
    finally:
        stopped = cli.invoke(app, ["kafka", "stop", *home])
    assert stopped.exit_code == 0, stopped.output
    assert "Kafka broker stopped" in stopped.stderr


def test_cli_start_with_a_sasl_listener_serves_scram_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, controller_port, sasl_port = free_ports(3)
    password = "cli-scram-" + uuid.uuid4().hex[:10]
    monkeypatch.setenv("SPANGUARD_SCRAM_PASSWORD", password)
    home = tmp_path / "home"
    try:
        started = cli.invoke(
            app,
            [
                "kafka", "start", "--home", str(home), "--lib-dir", str(SHARED_LIB_DIR),
                "--port", str(port), "--controller-port", str(controller_port),
                "--sasl-port", str(sasl_port), "--scram-user", "demo", "--timeout", "120",
            ],
        )  # fmt: skip
        assert started.exit_code == 0, started.output
        assert f"SASL_SSL (SCRAM-SHA-512) on 127.0.0.1:{sasl_port}" in started.stderr
        assert password not in started.output
        secret = tmp_path / "password"
        secret.write_text(password)
        monkeypatch.setenv("SPANGUARD_BROKER", f"kafka://127.0.0.1:{sasl_port}")
        monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", "cli-sasl")
        monkeypatch.setenv(
            "SPANGUARD_BROKER_CREDENTIALS",
            f'{{"username": "demo", "password_file": "{secret}", '
            f'"cafile": "{home / "tls" / "ca.pem"}"}}',
        )
        trace = tmp_path / "trace.jsonl"
        trace.write_bytes(b'{"session_id": "s1"}\n')
        produced = cli.invoke(app, ["produce", str(trace)])
        assert produced.exit_code == 0, produced.output
        assert "published 1 record(s) to cli-sasl.events" in produced.stderr
    finally:
        cli.invoke(app, ["kafka", "stop", "--home", str(home)])


def test_cli_sasl_listener_needs_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPANGUARD_SCRAM_PASSWORD", raising=False)
    port, sasl_port = free_ports(2)
    result = cli.invoke(
        app,
        ["kafka", "start", "--home", str(tmp_path), "--port", str(port), "--sasl-port",
         str(sasl_port)],
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: --sasl-port needs the SCRAM password: --scram-password-file FILE or "
        "$SPANGUARD_SCRAM_PASSWORD"
    )
