"""Which workers are up, and where their web servers are: ``<prefix>.workers``.

The fleet view (``/fleet``) joins every worker's part, and the session
inspector asks the worker that owns a session. Workers find each other
through a small topic: every ``tick_seconds`` each worker writes a heartbeat
(keyed by its web URL: the URL, the wall time, its input partitions), reads
everyone's, and counts as up the workers heard from within
``LIVENESS_TICKS`` ticks. A worker that stops cleanly writes a tombstone.
The topic has one partition, is compacted, and keeps an hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

log = logging.getLogger(__name__)

LIVENESS_TICKS = 3
"""A worker not heard from for this many ticks is taken for gone."""


@dataclass(frozen=True, slots=True)
class Member:
    """One worker as its last heartbeat described it."""

    url: str
    seen: float
    partitions: frozenset[int] = frozenset()


def heartbeat(url: str, now: float, partitions: Iterable[int]) -> tuple[bytes, bytes]:
    """The (key, value) record of one heartbeat."""
    value = {"url": url, "ts": now, "partitions": sorted(partitions)}
    return url.encode("utf-8"), orjson.dumps(value)


@dataclass
class Members:
    """The workers heard from (a pure registry: heartbeats in, live members out)."""

    own_url: str
    tick_seconds: float
    known: dict[str, Member] = field(default_factory=dict)

    def record(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of ``<prefix>.workers`` (a tombstone removes the worker)."""
        if key is None:
            return
        url = key.decode("utf-8", "replace")
        if value is None:
            self.known.pop(url, None)
            return
        try:
            data = orjson.loads(value)
            member = Member(
                url=str(data["url"]),
                seen=float(data["ts"]),
                partitions=frozenset(int(p) for p in data.get("partitions", ())),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("membership: unreadable heartbeat of %s skipped", url)
            return
        self.known[member.url] = member

    def live(self, now: float) -> list[Member]:
        """Workers heard from recently, by URL."""
        horizon = now - LIVENESS_TICKS * self.tick_seconds
        return sorted((m for m in self.known.values() if m.seen >= horizon), key=lambda m: m.url)

    def peers(self, now: float) -> list[Member]:
        """Live workers other than this one."""
        return [m for m in self.live(now) if m.url != self.own_url]


class MembershipService:
    """Writes this worker's heartbeats and reads everyone's (aiokafka, no group)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        members: Members,
        partitions: Callable[[], Iterable[int]],
        client_options: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
        replication: int = 1,
    ) -> None:
        self.bootstrap = bootstrap
        self.replication = replication
        self.topic = topic
        self.members = members
        self._partitions = partitions
        self._options = dict(client_options or {})
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def ensure_topic(self) -> None:
        """Create ``<prefix>.workers`` (one partition, compacted) if it is missing."""
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic
        from aiokafka.errors import TopicAlreadyExistsError

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self._options)
        await admin.start()
        try:
            if self.topic not in set(await admin.list_topics()):
                configs = {"cleanup.policy": "compact,delete", "retention.ms": "3600000"}
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics(
                        [NewTopic(self.topic, 1, self.replication, topic_configs=configs)]
                    )
        finally:
            await admin.close()

    async def run(self) -> None:
        """Heartbeat and listen until :meth:`stop`; then write the tombstone."""
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        await self.ensure_topic()
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **self._options)
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **self._options,
        )
        await producer.start()
        await consumer.start()
        try:
            tick = self.members.tick_seconds
            next_beat = 0.0
            while not self._stopping.is_set():
                now = self._clock()
                if now >= next_beat:
                    key, value = heartbeat(self.members.own_url, now, self._partitions())
                    await producer.send_and_wait(self.topic, value, key=key)
                    next_beat = now + tick
                batch = await consumer.getmany(timeout_ms=int(tick * 500))
                for records in batch.values():
                    for record in records:
                        self.members.record(record.key, record.value)
        finally:
            with contextlib.suppress(Exception):
                key = self.members.own_url.encode("utf-8")
                await asyncio.wait_for(producer.send_and_wait(self.topic, None, key=key), 5)
            for closer in (consumer.stop, producer.stop):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer(), 5)

    def start(self) -> None:
        """Run in the background of the current event loop."""
        self._task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        """Stop heartbeating (with a tombstone) and wait for it."""
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 10)
