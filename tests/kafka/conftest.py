"""The tests of this directory talk to a real Kafka broker (the fixtures are in
tests/conftest.py): every one gets the ``kafka`` marker, so ``pytest -m "not kafka"``
skips them."""

from __future__ import annotations

from pathlib import Path

import pytest

KAFKA_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected from tests/kafka/ with ``kafka``."""
    for item in items:
        if KAFKA_DIR in item.path.parents:
            item.add_marker(pytest.mark.kafka)
