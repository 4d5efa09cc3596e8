"""A test without the ``kafka`` marker cannot start a broker (tests/broker_guard.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spanguard.streams.localbroker.broker import LocalBroker, free_ports
from tests import broker_guard


def test_an_unmarked_test_cannot_start_a_local_broker(tmp_path: Path) -> None:
    # Were the guard missing, this start would fail anyway, fast and starting nothing: its
    # jars come from a loopback port where nothing listens.
    port, controller_port, nowhere = free_ports(3)
    broker = LocalBroker(
        home=tmp_path / "home",
        port=port,
        controller_port=controller_port,
        lib_dir=tmp_path / "lib",
        jars_url=f"http://127.0.0.1:{nowhere}/maven",
    )
    with pytest.raises(pytest.fail.Exception) as failed:
        broker.start(timeout=5)
    assert str(failed.value).startswith(
        "tests/test_broker_guard.py::test_an_unmarked_test_cannot_start_a_local_broker"
        " starts a local Kafka broker but has no `kafka` marker"
    )
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").iterdir())


class Item:
    """The parts of a test item the fixture check reads."""

    def __init__(self, fixtures: list[str], marked: bool) -> None:
        self.nodeid = "tests/x.py::t"
        self.fixturenames = fixtures
        self.marked = marked

    def get_closest_marker(self, name: str) -> object:
        return pytest.mark.kafka if self.marked and name == "kafka" else None


@pytest.mark.parametrize(
    ("fixtures", "marked", "refused"),
    [
        (["tmp_path"], False, False),
        (["pipeline", "kafka_bootstrap", "local_kafka_broker"], False, True),
        (["secure_broker"], False, True),
        (["pipeline", "kafka_bootstrap", "local_kafka_broker"], True, False),
        (["secure_broker"], True, False),
    ],
)
def test_an_unmarked_test_cannot_ask_for_a_broker_fixture(
    fixtures: list[str], marked: bool, refused: bool
) -> None:
    item: Any = Item(fixtures, marked)
    if refused:
        with pytest.raises(pytest.fail.Exception, match=r"^tests/x.py::t needs a Kafka broker"):
            broker_guard.check_fixtures(item)
    else:
        broker_guard.check_fixtures(item)
