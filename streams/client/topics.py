"""Creating the contract's topics with the configured partitions and replication."""

from __future__ import annotations

import contextlib

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.client.kafka_io import OUTPUT_SUFFIXES, bootstrap_servers
from streams.settings import Settings


def contract_topics(settings: Settings) -> list[str]:
    """``<prefix>.events`` and every output topic."""
    return [settings.topic("events"), *(settings.topic(s) for s in OUTPUT_SUFFIXES)]


async def ensure_topics(settings: Settings) -> list[str]:
    """Create the contract's topics that do not exist yet; returns the ones created.

    All input of one session must land on one partition of one topic, so the
    topics are created explicitly (not by the broker's auto-create, whose
    partition count may differ from the table's).
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers(settings.broker))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [t for t in contract_topics(settings) if t not in existing]
        if wanted:
            # Another worker may create them at the same moment: that is fine.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [NewTopic(t, settings.partitions, settings.replication) for t in wanted]
                )
        return wanted
    finally:
        await admin.close()
