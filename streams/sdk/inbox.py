"""Where one session's outputs land, and how a caller waits for the ones it needs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from spanguard.schemas import ID_FIELD, EvictionDecided, IntegrityFault, OutputEvent

Predicate = Callable[[], bool]

INBOX_OUTPUTS = 2_000
"""Outputs an inbox keeps by default: the newest; a long session's older ones go."""
INBOX_SLACK = 4
"""An inbox may hold 1/INBOX_SLACK more than its limit before the oldest are dropped
(down to the limit): one list cut per that many outputs, not one per output."""


@dataclass(slots=True)
class Inbox:
    """The outputs of one (tenant, session), deduplicated by their ids.

    Outputs arrive in any order across topics; a waiter says what it needs
    (a predicate over the inbox) and is woken when a delivery makes it true.

    Bounded, so that a session of months does not keep every output it ever had: the
    newest ``limit`` outputs are kept (a little more between two cuts), with their
    decisions; older ones are dropped, and a re-delivery of one of them is taken as
    new. ``late`` keeps the newest ``limit`` late decisions (a little more between
    cuts); a request id stays in ``given_up`` until its decision comes. A decision's
    causes come before it, so the outputs a waiting caller needs are among the newest.
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
    limit: int = INBOX_OUTPUTS
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
                self.given_up.discard(output.request_id)
                self.late.append(output)
        self._wake()
        most = self.limit + self.limit // INBOX_SLACK
        if len(self.outputs) > most:
            self._drop_oldest()
        if len(self.late) > most:
            del self.late[: len(self.late) - self.limit]

    def _drop_oldest(self) -> None:
        """Cut the inbox back to its newest ``limit`` outputs."""
        cut = len(self.outputs) - self.limit
        for old in self.outputs[:cut]:
            del self.by_id[str(getattr(old, ID_FIELD[old.type]))]
            if isinstance(old, EvictionDecided) and self.decisions.get(old.request_id) is old:
                del self.decisions[old.request_id]
        del self.outputs[:cut]

    def give_up(self, request_id: str) -> None:
        """The caller stopped waiting: a decision for it that comes later goes to ``late``."""
        decided = self.decisions.get(request_id)
        if decided is None:
            self.given_up.add(request_id)
        elif decided not in self.late:
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
