"""The Faust host: what the worker takes from Faust, and nothing it does not use.

Faust supervises the worker (start and stop order, signals, crash reporting), serves
the web API and runs the timers. It does not touch Kafka: the data path and fleet
monitoring's aggregator own their partitions through their own aiokafka clients
(:mod:`spanguard.streams.runtime`). :class:`Host` is Faust's boot strategy with its
Kafka services off, so the app starts no consumer (the ``<app_id>-control`` group is
never joined), no leader assignor (no leader topic is declared or subscribed to), no
topic conductor, no tables and no Faust producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import faust
from faust.app.base import BootStrategy
from mode import Service

from spanguard.streams.app.processes import READY_LINE
from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.runtime.kafka_transport import KafkaTransport
from spanguard.streams.runtime.owner import PartitionOwner
from spanguard.streams.settings import Settings

log = logging.getLogger(__name__)

STOP_TIMEOUT = 8.0
"""Seconds a stopping owner gives its last checkpoint before it closes anyway
(SIGTERM must end a worker within 10 s)."""
JOIN_BACKOFF = Backoff(0.5, 5.0)
"""Pauses between attempts to join an owner's consumer group at start."""


class Host(BootStrategy):
    """Faust's boot strategy without Kafka: supervision, web server and timers only."""

    enable_kafka = False


def control_app_id(app_id: str) -> str:
    """The Faust app's id. It names no consumer group any more (the app starts no
    consumer); it stays distinct from ``app_id``, the data path's group."""
    return f"{app_id}-control"


def faust_app(settings: Settings) -> faust.App:
    """The Faust application that hosts a worker (nothing started yet)."""
    app = faust.App(control_app_id(settings.app_id), **faust_config(settings))
    app.boot_strategy = Host(app)
    return app


def faust_config(settings: Settings) -> dict[str, Any]:
    """The Faust settings derived from ours (one place, so tests see what runs)."""
    return {
        # Never connected to (no Kafka service starts), so no credentials either.
        "broker": [f"kafka://{s}" for s in bootstrap_servers(settings.broker).split(",")],
        "store": "memory://",
        "datadir": str(settings.data_dir),
        "web_enabled": settings.web_enabled,
        "web_port": settings.web_port,
        "web_bind": settings.web_host,
        "web_host": settings.web_host,
        "autodiscover": False,
        "topic_allow_declare": False,
    }


class OwnerService(Service):
    """Runs a :class:`PartitionOwner` (the data path, the fleet aggregator) inside the
    app: joins its consumer group when the app starts, checkpoints and leaves when it
    stops.

    With ``ready_timeout`` the app's start waits (that long at most) for the first
    assignment to be opened, and a group that cannot be joined fails the start. Without,
    joining is retried in the background until it succeeds (the fleet's topic is created
    by the data path, which may not have run yet).
    """

    def __init__(
        self,
        owner: PartitionOwner[Any],
        transport: KafkaTransport,
        *,
        ready_timeout: float | None = None,
        on_crash: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.owner = owner
        self.transport = transport
        self.ready_timeout = ready_timeout
        self.on_crash = on_crash
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def on_start(self) -> None:
        if self.ready_timeout is None:
            self._task = asyncio.ensure_future(self._run(join=True))
            return
        await self.transport.start(self.owner.assign, self.owner.revoke)
        self._task = asyncio.ensure_future(self._run(join=False))
        try:
            await asyncio.wait_for(self.owner.assigned.wait(), self.ready_timeout)
        except TimeoutError:
            log.warning("spanguard: no partitions assigned after %.0fs", self.ready_timeout)
            return
        log.info("%s: partitions %s", READY_LINE, sorted(self.owner.parts))

    async def _run(self, join: bool) -> None:
        try:
            if join and not await self._join():
                return
            await self.owner.run(self._stopping)
        except Exception:
            if self.on_crash is not None:
                self.on_crash()
            raise

    async def _join(self) -> bool:
        """Join the group, retrying; False when the service stopped first."""
        failures = 0
        while not self._stopping.is_set():
            try:
                await self.transport.start(self.owner.assign, self.owner.revoke)
                return True
            except Exception as exc:
                failures += 1
                log.info("%s: not joined yet (%r); retrying", self.owner.owner_config.name, exc)
                with contextlib.suppress(TimeoutError):  # a stop ends the pause at once
                    await asyncio.wait_for(self._stopping.wait(), JOIN_BACKOFF.delay(failures))
        return False

    async def on_stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT)
            except Exception as exc:  # past the deadline: the next owner redoes the rest
                log.warning("%s: did not stop cleanly: %r", self.owner.owner_config.name, exc)
                self._task.cancel()
        await self.transport.stop()
