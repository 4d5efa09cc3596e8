"""Where one session's outputs land, and how a caller waits for the ones it needs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from spanguard.schemas import ID_FIELD, EvictionDecided, IntegrityFault, OutputEvent

Predicate = Callable[[], bool]


@dataclass(slots=True)
class Inbox:
    """The outputs of one (tenant, session), deduplicated by their ids.

    Outputs arrive in any order across topics; a waiter says what it needs
    (a predicate over the inbox) and is woken when a delivery makes it true.
    """

    tenant: str
    session_id: str
    outputs: list[OutputEvent] = field(default_factory=list)
    by_id: dict[str, OutputEvent] = field(default_factory=dict)
    decisions: dict[str, EvictionDecided] = field(default_factory=dict)
    """request id -> decision."""
    late: list[EvictionDecided] = field(default_factory=list)
    """Decisions that arrived after their caller gave up (timed out)."""
    given_up: set[str] = field(default_factory=set)
    _waiters: list[tuple[Predicate, asyncio.Future[None]]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        """(tenant, session id)."""
        return (self.tenant, self.session_id)

    def deliver(self, output: OutputEvent) -> None:
        """Take one output (a repeat of an id already seen is ignored)."""
        output_id = str(getattr(output, ID_FIELD[output.type]))
        if output_id in self.by_id:
            return  # at-least-once delivery: the worker may re-emit after a restart
        self.by_id[output_id] = output
        self.outputs.append(output)
        if isinstance(output, EvictionDecided):
            self.decisions[output.request_id] = output
            if output.request_id in self.given_up:
                self.late.append(output)
        self._wake()

    def give_up(self, request_id: str) -> None:
        """The caller stopped waiting: a decision for it that comes later goes to ``late``."""
        self.given_up.add(request_id)
        decided = self.decisions.get(request_id)
        if decided is not None and decided not in self.late:
            self.late.append(decided)  # it came between the timeout and this call

    def faults(self) -> list[IntegrityFault]:
        """Every fault of this session received so far."""
        return [o for o in self.outputs if isinstance(o, IntegrityFault)]

    async def wait(self, ready: Predicate, timeout: float) -> bool:
        """Wait until ``ready()`` holds; False when ``timeout`` seconds pass first."""
        if ready():
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (ready, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _wake(self) -> None:
        for ready, future in list(self._waiters):
            if not future.done() and ready():
                future.set_result(None)
