"""The data path's configuration as the worker derives it from the settings."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from spanguard.streams.app.topology import runtime_config
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.runtime.config import RuntimeConfig
from spanguard.streams.runtime.kafka_transport import KafkaTransport
from spanguard.streams.runtime.records import OutRecord
from spanguard.streams.settings import load_settings


def test_checkpoint_interval_follows_the_guarantee() -> None:
    assert runtime_config(load_settings()).commit_interval == 1.0
    exactly_once = runtime_config(load_settings(processing_guarantee="exactly_once"))
    assert exactly_once.exactly_once and exactly_once.commit_interval == 0.1


def test_the_input_fetch_wait_comes_from_the_settings() -> None:
    assert runtime_config(load_settings()).fetch_wait == 0.005
    assert runtime_config(load_settings(fetch_wait=0.02)).fetch_wait == 0.02


def test_the_pending_batches_bound_comes_from_the_settings() -> None:
    assert runtime_config(load_settings()).max_pending_batches == 32
    assert runtime_config(load_settings(max_pending_batches=4)).max_pending_batches == 4
    with pytest.raises(ValueError, match="max_pending_batches"):
        load_settings(max_pending_batches=0)


def test_the_input_consumer_holds_fetches_as_configured() -> None:
    config = RuntimeConfig("in", {}, "changelog", fetch_wait=0.005)
    options = KafkaTransport("127.0.0.1:1", config, "group", partitions=1).input_consumer_options()
    assert options["fetch_max_wait_ms"] == 5
    assert options["isolation_level"] == "read_committed"
    assert options["enable_auto_commit"] is False


class TopicsSent:
    """An aiokafka producer's ``send`` that notes the topic and acknowledges at once."""

    def __init__(self) -> None:
        self.topics: list[str] = []

    async def send(self, topic: str, value: bytes | None, **_: Any) -> asyncio.Future[None]:
        self.topics.append(topic)
        acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        acked.set_result(None)
        return acked


async def test_outputs_sent_after_acknowledgements_have_a_producer_of_their_own() -> None:
    # aiokafka keeps one produce request in flight per broker and producer: a decision
    # released by its causes' acks must not queue behind the next batch's outputs.
    config = RuntimeConfig("in", {"faults": "faults", "decisions": "decisions"}, "changelog")
    transport = KafkaTransport("127.0.0.1:1", config, "group", partitions=1)
    at_once, after_acks = TopicsSent(), TopicsSent()
    transport._outputs = (at_once, after_acks)  # type: ignore[assignment]
    await transport.send(OutRecord("faults", b"s", b"{}"))
    await transport.send(OutRecord("decisions", b"s", b"{}"), after_acks=True)
    assert at_once.topics == ["faults"]
    assert after_acks.topics == ["decisions"]


def test_the_broker_is_a_host_port_list_or_faust_urls() -> None:
    plain = load_settings(broker="k1:9092, k2:9093")
    assert bootstrap_servers(plain.broker) == "k1:9092,k2:9093"
    urls = load_settings(broker="kafka://k1:9092;kafka://k2:9093")
    assert bootstrap_servers(urls.broker) == "k1:9092,k2:9093"
    with pytest.raises(ValueError, match="host:port"):
        load_settings(broker="k1")
