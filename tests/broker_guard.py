"""The ``kafka`` marker tells the truth: a test without it starts no Kafka broker.

``make test-fast`` runs ``pytest -m "not kafka"`` and promises no broker, so tests/conftest.py
holds every test to the marker twice:

* at set-up, before any fixture runs, a test that asks for a broker fixture
  (:data:`BROKER_FIXTURES`, directly or through another fixture such as ``pipeline``) fails
  when it lacks the marker;
* :meth:`LocalBroker.start` called while such a test runs (by a fixture or by the test
  itself, in the pytest process) fails with the test's name before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from spanguard.streams.localbroker.broker import LocalBroker

BROKER_FIXTURES = frozenset({"local_kafka_broker", "secure_broker"})
"""The fixtures that start a broker (or name one through ``$KAFKA_BOOTSTRAP``)."""

_running: list[pytest.Item] = []
"""The test being run (set up, called or torn down), if any."""


def unmarked(item: pytest.Item) -> bool:
    return item.get_closest_marker("kafka") is None


def refuse(item: pytest.Item, what: str) -> None:
    """Fail ``item`` because it ``what`` without the ``kafka`` marker."""
    pytest.fail(
        f"{item.nodeid} {what} but has no `kafka` marker: add `pytestmark = pytest.mark.kafka`"
        " (or @pytest.mark.kafka), so `make test-fast` (-m 'not kafka') starts no broker",
        pytrace=False,
    )


def check_fixtures(item: pytest.Item) -> None:
    """Fail an unmarked test that asks for a broker fixture, before the broker starts."""
    wanted = sorted(BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if wanted and unmarked(item):
        refuse(item, f"needs a Kafka broker (fixture {', '.join(wanted)})")


@contextmanager
def running(item: pytest.Item) -> Iterator[None]:
    """Record ``item`` as the running test."""
    _running.append(item)
    try:
        yield
    finally:
        _running.pop()


@contextmanager
def guarded_starts() -> Iterator[None]:
    """Make :meth:`LocalBroker.start` refuse to run inside an unmarked test."""
    original = LocalBroker.start

    def start(self: LocalBroker, *args: Any, **kwargs: Any) -> str:
        if _running and unmarked(_running[-1]):
            refuse(_running[-1], "starts a local Kafka broker")
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalBroker, "start", start)
        yield
