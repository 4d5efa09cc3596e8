"""A blocking wrapper of the async client, for harnesses without an event loop.

Every sync client of the process runs its coroutines on ONE background event
loop thread, so they also share one Kafka link (one output consumer).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar, Unpack

from spanguard.schemas import IntegrityFault
from spanguard.streams.sdk.client import Renewal, RewriteReport, Session, SpanguardClient
from spanguard.streams.sdk.decision import Decision
from spanguard.streams.sdk.messages import Message, Protect
from spanguard.streams.sdk.tracker import EvictionOptions

T = TypeVar("T")


def run_on_background_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the process's background loop and wait for its result."""
    return _LoopThread.run(coro)


class _LoopThread:
    """The process's background event loop (started on first use, a daemon thread)."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _loop: ClassVar[asyncio.AbstractEventLoop | None] = None

    @classmethod
    def run(cls, coro: Coroutine[Any, Any, T]) -> T:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="spanguard-sdk-loop", daemon=True
                )
                thread.start()
                cls._loop = loop
            loop = cls._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()


class SyncSession:
    """Blocking twin of :class:`~spanguard.streams.sdk.client.Session` (same methods, same
    results)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def session_id(self) -> str:
        """The session id."""
        return self.session.session_id

    @property
    def live(self) -> list[str]:
        """Live span ids in context order."""
        return self.session.live

    @property
    def renewals(self) -> list[Renewal]:
        """See :attr:`Session.renewals`."""
        return self.session.renewals

    def faults(self) -> list[IntegrityFault]:
        """Faults received so far."""
        return self.session.faults()

    def set_turn(self, turn: int) -> None:
        """The agent loop's turn for the events that follow."""
        self.session.set_turn(turn)

    def observe(self, messages: Iterable[Message]) -> list[IntegrityFault]:
        """See :meth:`Session.observe`."""
        return _LoopThread.run(self.session.observe(list(messages)))

    def score(
        self, scores: Mapping[str, float], *, scorer: str, query: str | None = None
    ) -> list[IntegrityFault]:
        """See :meth:`Session.score`."""
        return _LoopThread.run(self.session.score(scores, scorer=scorer, query=query))

    def check_rewrite(
        self, messages: Sequence[Message], *, invalidate_scores: bool | Iterable[str] = True
    ) -> list[IntegrityFault]:
        """See :meth:`Session.check_rewrite`."""
        return self.session.check_rewrite(messages, invalidate_scores=invalidate_scores)

    def rewrite(
        self,
        messages: Sequence[Message],
        *,
        invalidate_scores: bool | Iterable[str] = True,
        base_seq: int | None = None,
        strategy: str | None = None,
        trigger: str | None = None,
    ) -> RewriteReport:
        """See :meth:`Session.rewrite`."""
        return _LoopThread.run(
            self.session.rewrite(
                messages,
                invalidate_scores=invalidate_scores,
                base_seq=base_seq,
                strategy=strategy,
                trigger=trigger,
            )
        )

    def request_eviction(
        self,
        candidates: Sequence[str] | None = None,
        *,
        timeout: float | None = None,
        **options: Unpack[EvictionOptions],
    ) -> Decision:
        """See :meth:`Session.request_eviction`."""
        return _LoopThread.run(
            self.session.request_eviction(candidates, timeout=timeout, **options)
        )

    def close(self) -> None:
        """See :meth:`Session.close`."""
        _LoopThread.run(self.session.close())


class SyncSpanguardClient:
    """Blocking twin of :class:`~spanguard.streams.sdk.client.SpanguardClient`.

    ``with SyncSpanguardClient.kafka("127.0.0.1:9092") as client:`` connects;
    ``client.session("s-1")`` gives a :class:`SyncSession`.
    """

    def __init__(self, client: SpanguardClient) -> None:
        self.client = client

    @classmethod
    def offline(cls, **options: Any) -> Self:
        """See :meth:`SpanguardClient.offline`."""
        return cls(SpanguardClient.offline(**options))

    @classmethod
    def kafka(cls, bootstrap: str, topic_prefix: str = "spanguard", **options: Any) -> Self:
        """See :meth:`SpanguardClient.kafka`."""
        return cls(SpanguardClient.kafka(bootstrap, topic_prefix, **options))

    def connect(self) -> None:
        """See :meth:`SpanguardClient.connect`."""
        _LoopThread.run(self.client.connect())

    def close(self) -> None:
        """See :meth:`SpanguardClient.close`."""
        _LoopThread.run(self.client.close())

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def session(
        self,
        session_id: str,
        *,
        tenant: str = "default",
        start_seq: int = 0,
        protect: Protect | None = None,
    ) -> SyncSession:
        """See :meth:`SpanguardClient.session`."""
        return SyncSession(
            self.client.session(session_id, tenant=tenant, start_seq=start_seq, protect=protect)
        )
