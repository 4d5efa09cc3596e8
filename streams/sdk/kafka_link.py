"""The process's connection to spanguard on Kafka: one producer and ONE output consumer.

Every session of a process shares one :class:`KafkaLink` per (bootstrap,
topic prefix, event loop): a single consumer reads ``<prefix>.decisions`` (and
the faults, pins and recompute topics, so that a decision comes with the
outputs it lists) and routes each record to its session's :class:`Inbox` by
(tenant, session id); a waiter is matched by request id. No call creates a
consumer of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import ClassVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from spanguard.schemas import FleetAlert, InputEvent
from spanguard.schemas.codec import decode_output
from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.producer import murmur2_partitioner
from spanguard.streams.sdk.inbox import Inbox

log = logging.getLogger(__name__)

#: Output topics whose records belong to a session (alerts are per tenant,
#: dead letters are read by operators, not by a harness).
SESSION_OUTPUTS = ("faults", "pins", "recompute", "decisions")
READ_BACKOFF = Backoff(0.1, 5.0)
"""Pauses of the output consumer after failed fetches (it reconnects by itself)."""


class SpanguardUnavailable(RuntimeError):
    """The broker (or the service's topics) cannot be reached."""


LinkKey = tuple[str, str, int]


class KafkaLink:
    """A producer of ``<prefix>.events`` and the one consumer of the session outputs.

    Use :meth:`acquire` / :meth:`release` (reference counted per process and
    event loop) rather than the constructor, so that every client of the
    process shares it.
    """

    _shared: ClassVar[dict[LinkKey, KafkaLink]] = {}
    consumers_started: ClassVar[int] = 0
    """How many output consumers this process started (one per link)."""

    def __init__(self, bootstrap: str, prefix: str, *, connect_timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap_servers(bootstrap)
        self.prefix = prefix
        self.events_topic = f"{prefix}.events"
        self.connect_timeout = connect_timeout
        self.inboxes: dict[tuple[str, str], Inbox] = {}
        self.records_read = 0
        self._users = 0
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: list[asyncio.Future[object]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the link lives on (its consumer and producer are bound to it)."""

    # -- sharing -------------------------------------------------------------

    @classmethod
    async def acquire(
        cls, bootstrap: str, prefix: str, *, connect_timeout: float = 10.0
    ) -> KafkaLink:
        """The process's link for (bootstrap, prefix) on the running loop, started once.

        Raises:
            SpanguardUnavailable: When the broker or the output topics cannot be reached.
        """
        key = (bootstrap_servers(bootstrap), prefix, id(asyncio.get_running_loop()))
        link = cls._shared.get(key)
        if link is None:
            link = cls(bootstrap, prefix, connect_timeout=connect_timeout)
            cls._shared[key] = link
            try:
                await link._start()
            except BaseException:
                del cls._shared[key]
                await link._stop()
                raise
        link._users += 1
        return link

    async def release(self) -> None:
        """Give the link back; the last user stops it."""
        self._users -= 1
        if self._users > 0:
            return
        key = (self.bootstrap, self.prefix, id(asyncio.get_running_loop()))
        if self._shared.get(key) is self:
            del self._shared[key]
        await self._stop()

    # -- lifecycle -----------------------------------------------------------

    async def _start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            enable_idempotence=True,  # a session's events keep their order on retries
            acks="all",
            linger_ms=0,  # a harness waits on its request: do not hold it back
            partitioner=murmur2_partitioner,
            request_timeout_ms=int(self.connect_timeout * 1000),
        )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            fetch_max_wait_ms=20,  # a decision is waited for: fetch it as it lands
            request_timeout_ms=max(int(self.connect_timeout * 1000), 5000),
        )
        try:
            await asyncio.wait_for(self._producer.start(), self.connect_timeout)
            await asyncio.wait_for(self._consumer.start(), self.connect_timeout)
        except (KafkaError, OSError, TimeoutError) as exc:
            raise SpanguardUnavailable(f"cannot reach Kafka at {self.bootstrap}: {exc}") from exc
        # Existence from the full topic list (asking for a missing topic by name could
        # auto-create it with the broker's default partition count).
        existing = await self._consumer.topics()
        parts: list[TopicPartition] = []
        for suffix in SESSION_OUTPUTS:
            topic = f"{self.prefix}.{suffix}"
            if topic not in existing:
                raise SpanguardUnavailable(
                    f"topic {topic} does not exist: start a spanguard worker with "
                    f"topic prefix {self.prefix!r} first (it creates the topics)"
                )
            found = await self._producer.partitions_for(topic)
            parts.extend(TopicPartition(topic, p) for p in sorted(found))
        self._consumer.assign(parts)
        # Fix the read position at the current end BEFORE any request is sent, so a
        # decision produced right after cannot fall before it.
        await self._consumer.seek_to_end(*parts)
        for tp in parts:
            await self._consumer.position(tp)
        KafkaLink.consumers_started += 1
        self._reader = asyncio.create_task(self._read(), name=f"spanguard-outputs-{self.prefix}")

    async def _stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for client in (self._producer, self._consumer):
            if client is not None:
                with contextlib.suppress(KafkaError, OSError):
                    await client.stop()

    # -- sessions ------------------------------------------------------------

    def register(self, inbox: Inbox) -> None:
        """Route the outputs of ``inbox``'s session to it."""
        self.inboxes[inbox.key] = inbox

    def unregister(self, inbox: Inbox) -> None:
        """Stop routing to ``inbox``."""
        if self.inboxes.get(inbox.key) is inbox:
            del self.inboxes[inbox.key]

    # -- producing -------------------------------------------------------------

    async def send(self, event: InputEvent, *, wait: bool) -> None:
        """Produce ``event`` keyed by its session; with ``wait``, until the broker acked it
        and every earlier send of this link.

        Raises:
            SpanguardUnavailable: When the broker refused or could not be reached.
        """
        assert self._producer is not None, "link not started"
        value = event.model_dump_json(exclude_none=True).encode("utf-8")
        try:
            ack = await self._producer.send(
                self.events_topic, value=value, key=event.session_id.encode("utf-8")
            )
            self._pending.append(ack)
            if wait:
                pending, self._pending = self._pending, []
                await asyncio.gather(*pending)
        except (KafkaError, OSError) as exc:
            raise SpanguardUnavailable(f"could not produce to {self.events_topic}: {exc}") from exc

    async def flush(self) -> None:
        """Wait for the acks of every send so far."""
        pending, self._pending = self._pending, []
        await asyncio.gather(*pending)

    # -- consuming -------------------------------------------------------------

    async def _read(self) -> None:
        assert self._consumer is not None
        failures = 0
        while True:
            try:
                batch = await self._consumer.getmany(timeout_ms=200, max_records=2000)
            except KafkaError as exc:  # the consumer reconnects by itself; keep going
                failures += 1
                log.warning("spanguard output consumer: %s", exc)
                await asyncio.sleep(READ_BACKOFF.delay(failures))
                continue
            failures = 0
            for records in batch.values():
                for record in records:
                    self.records_read += 1
                    try:
                        self._route(record.value or b"")
                    except Exception:  # one bad delivery must not stop every session's
                        log.exception("spanguard output consumer: routing failed")

    def _route(self, raw: bytes) -> None:
        try:
            output = decode_output(raw)
        except ValidationError:
            log.warning("spanguard output consumer: skipped an unreadable record")
            return
        if isinstance(output, FleetAlert):
            return
        inbox = self.inboxes.get((output.tenant or "", output.session_id or ""))
        if inbox is not None:
            inbox.deliver(output)
