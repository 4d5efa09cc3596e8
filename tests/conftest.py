"""Fixtures shared by every test directory: the real Kafka broker, unique names,
``wait_until`` and the ``pipeline`` of worker processes (tests/pipeline.py).

``kafka_bootstrap`` is ``$KAFKA_BOOTSTRAP`` when that is set (a broker someone else runs),
else the address of a broker this session starts itself, on first use: a
:class:`LocalBroker` in a temporary directory on free ports, sharing the jars in
``<project>/.kafka/lib`` (fetched from the checked-in lock if missing), stopped when the
session ends.

Both broker fixtures (this one and tests/reliability's ``secure_broker``) are for tests
with the ``kafka`` marker only: tests/broker_guard.py fails any other test that asks for
one or starts a :class:`LocalBroker`, so ``pytest -m "not kafka"`` starts no broker.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from spanguard.streams.localbroker.broker import DEFAULT_HOME, LocalBroker, free_ports
from tests import broker_guard
from tests.pipeline import Pipeline

# No property test has a time limit: hypothesis's default 200 ms deadline is a wall-clock
# assert, which a loaded 2-core CI machine broke once (a names test at 496 ms).
settings.register_profile("spanguard", deadline=None)
settings.load_profile("spanguard")

SHARED_LIB_DIR = DEFAULT_HOME / "lib"
"""Jars shared by every broker the tests start."""

WaitUntil = Callable[..., Awaitable[None]]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Run every test with :meth:`LocalBroker.start` refusing it unless it has ``kafka``."""
    with broker_guard.guarded_starts(), broker_guard.running(item):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """An unmarked test that asks for a broker fixture fails before any fixture runs."""
    broker_guard.check_fixtures(item)


@pytest.fixture(scope="session")
def shared_lib_dir() -> Path:
    """The Kafka jars every broker of the tests shares (for tests that start their own)."""
    return SHARED_LIB_DIR


@pytest.fixture(scope="session")
def local_kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker | None]:
    """The broker this session started, or ``None`` when ``$KAFKA_BOOTSTRAP`` names another."""
    if os.environ.get("KAFKA_BOOTSTRAP"):
        yield None
        return
    port, controller_port = free_ports(2)
    broker = LocalBroker(
        home=tmp_path_factory.mktemp("kafka-broker"),
        port=port,
        controller_port=controller_port,
        lib_dir=SHARED_LIB_DIR,
        stop_with_parent=True,  # a killed pytest leaves no JVM behind
    )
    broker.fetch()
    broker.start(timeout=120)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(local_kafka_broker: LocalBroker | None) -> str:
    """Bootstrap address of the broker under test (``host:port``)."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        return external
    assert local_kafka_broker is not None
    return local_kafka_broker.bootstrap


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Make topic, group and app names unique per test (and per call)."""
    test = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:40].strip("-")

    def make(prefix: str) -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def wait_until() -> WaitUntil:
    """Await ``condition()`` (sync or async) becoming true, failing after ``timeout`` seconds.

    Usage: ``await wait_until(lambda: len(seen) == 10, timeout=30, what="10 events")``.
    """

    async def wait(
        condition: Callable[[], object],
        *,
        timeout: float = 30.0,
        interval: float = 0.05,
        what: str = "condition",
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
            await asyncio.sleep(interval)

    return wait


@pytest.fixture
def pipeline(
    kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]
) -> Iterator[Pipeline]:
    """A fresh topic prefix and consumer group; its workers are killed afterwards."""
    pipe = Pipeline(kafka_bootstrap, unique_name("sg"), tmp_path)
    try:
        yield pipe
    finally:
        pipe.stop_all()
