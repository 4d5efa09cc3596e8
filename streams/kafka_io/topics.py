"""Creating the contract's topics with the configured partitions, replication and size limit."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Protocol

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from spanguard.schemas import OUTPUT_SUFFIXES
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.security import BrokerCredentials, aiokafka_security

#: Room for a record's envelope beside its value (key, headers, batch header).
_ENVELOPE_BYTES = 64 * 1024


class _EventLimit(Protocol):
    @property
    def max_event_bytes(self) -> int: ...


class TopicSettings(Protocol):
    """What creating the contract's topics reads of a deployment's settings
    (:class:`spanguard.streams.settings.Settings` is one). A protocol, so that the
    Kafka layer depends on no deployment module."""

    @property
    def broker(self) -> str: ...
    @property
    def broker_credentials(self) -> BrokerCredentials | None: ...
    @property
    def partitions(self) -> int: ...
    @property
    def replication(self) -> int: ...
    @property
    def engine(self) -> _EventLimit: ...
    def topic(self, suffix: str) -> str: ...


def max_record_bytes(settings: TopicSettings) -> int:
    """The ``max.message.bytes`` of every topic spanguard creates (and its producers' limit).

    Twice ``max_event_bytes`` plus an envelope, so that

    - an input record somewhat over ``max_event_bytes`` still reaches the worker and is
      answered ``TOO_LARGE`` (instead of being refused by the broker, unseen);
    - the dead letter of an input just under the limit fits: its raw input, base64
      (4/3 of it), inside a JSON envelope.

    Producers (``spanguard produce``, the worker) set ``max_request_size`` to this value.
    """
    return 2 * settings.engine.max_event_bytes + _ENVELOPE_BYTES


def contract_topics(settings: TopicSettings) -> list[str]:
    """``<prefix>.events`` and every output topic."""
    return [settings.topic("events"), *(settings.topic(s) for s in OUTPUT_SUFFIXES)]


async def ensure_topics(settings: TopicSettings) -> list[str]:
    """Create the contract's topics that do not exist yet; returns the ones created.

    All input of one session must land on one partition of one topic, so the
    topics are created explicitly (not by the broker's auto-create, whose
    partition count may differ from the table's). Each gets ``max.message.bytes``
    from :func:`max_record_bytes`. Topics that exist are left as they are.
    """
    address = bootstrap_servers(settings.broker)
    async with admin_client(address, aiokafka_security(settings.broker_credentials)) as admin:
        existing = set(await admin.list_topics())
        wanted = [t for t in contract_topics(settings) if t not in existing]
        if wanted:
            configs = {"max.message.bytes": str(max_record_bytes(settings))}
            # Another worker may create them at the same moment: that is fine.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [
                        NewTopic(
                            t, settings.partitions, settings.replication, topic_configs=configs
                        )
                        for t in wanted
                    ]
                )
        return wanted


@contextlib.asynccontextmanager
async def admin_client(
    bootstrap: str, security: Mapping[str, Any] | None = None
) -> AsyncIterator[AIOKafkaAdminClient]:
    """A started admin client of ``bootstrap`` (``security``: aiokafka's options), closed
    on exit."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **(security or {}))
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def create_topics(
    bootstrap: str,
    names: Iterable[str],
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
) -> None:
    """Create the topics ``names`` on a plaintext ``bootstrap`` with one replica (for
    tools, benchmarks and tests; the worker creates its own with :func:`ensure_topics`)."""
    async with admin_client(bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(n, partitions, 1, topic_configs=dict(configs or {})) for n in names],
            timeout_ms=30_000,
        )


async def topic_config(bootstrap: str, name: str) -> dict[str, str]:
    """The configuration of topic ``name`` on a plaintext ``bootstrap`` (name -> value).

    Raises:
        AssertionError: When the broker answers with an error (no such topic).
    """
    async with admin_client(bootstrap) as admin:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    resource = responses[0].to_object()["resources"][0]
    assert resource["error_code"] == 0, resource
    return {e["config_names"]: e["config_value"] for e in resource["config_entries"]}
