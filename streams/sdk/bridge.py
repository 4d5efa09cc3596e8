"""Running a session's coroutines from a framework's sync or async hooks.

A Kafka session belongs to the event loop of its link; an offline one to no
loop. Sync hooks (``agent.invoke``) block on the session's loop (the shared
background loop of :mod:`spanguard.streams.sdk.sync` for offline sessions); async hooks
(``agent.ainvoke``) await directly when they already run on that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from spanguard.streams.sdk.client import Session
from spanguard.streams.sdk.sync import SyncSession, run_on_background_loop

T = TypeVar("T")
AnySession = Session | SyncSession


def unwrap(session: AnySession) -> Session:
    """The async session behind a sync or async one."""
    return session.session if isinstance(session, SyncSession) else session


def _home_loop(session: Session) -> asyncio.AbstractEventLoop | None:
    link = session.client.link
    return link.loop if link is not None else None


def run_sync(session: Session, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code.

    Raises:
        RuntimeError: When called on the session's own running loop (it would
            deadlock): use the framework's async entry point there.
    """
    home = _home_loop(session)
    if home is None:
        return run_on_background_loop(coro)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is home:
        coro.close()
        raise RuntimeError(
            "a sync hook ran on the session's own event loop: call the agent's async API "
            "(ainvoke), or create the client with SyncSpanguardClient"
        )
    return asyncio.run_coroutine_threadsafe(coro, home).result()


async def run_async(session: Session, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` from async code, on the session's loop."""
    home = _home_loop(session)
    running = asyncio.get_running_loop()
    if home is None or home is running:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, home))
