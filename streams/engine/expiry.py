"""Idle expiry (contract 1.2): the event-time clock of one input partition, the
sessions it expires, and how long the markers of ended sessions are kept.

Most sessions never send ``session.closed``. The engine of a partition keeps a
clock, the newest ``ts`` of any schema-valid event it processed (never moving
back; on Kafka never past the record's broker timestamp + ``max_clock_skew``, so
one wild ``ts`` cannot expire a partition). Every session whose newest ``ts`` +
``idle_timeout`` is strictly behind the clock is expired at that moment, the event's
own session included; its state is deleted as by a close and a marker remembers it
(later new events are rejected ``SESSION_EXPIRED``). Markers of closed and expired
sessions are forgotten ``tombstone_retention`` after the close or the expiry, by the
same clock.

Both lists are heaps keyed by the moment something becomes due, so an event costs
O(log n) plus what actually expires. A session has one entry, whatever its number of
events: when it surfaces and the session had a newer event since, it moves on.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from spanguard.streams.engine.markers import Marker, Markers, SessionKey


class IdleWatch:
    """Sessions that become due ``after`` their newest ``ts``, by an event-time clock:
    a heap keyed by the moment each is due, one entry a session whatever its number of
    events (when it surfaces and the session had a newer event since, it moves on).
    Idle expiry and the cooling of idle sessions (:mod:`~spanguard.streams.engine.cold`)
    each keep one."""

    __slots__ = ("_due", "_watched", "after")

    def __init__(self, after: timedelta) -> None:
        self.after = after
        self._due: list[tuple[datetime, SessionKey]] = []
        self._watched: set[SessionKey] = set()
        """Sessions with an entry in ``_due`` (one each: the heap stays as large as the
        sessions watched, however many events they have)."""

    def watch(self, key: SessionKey, newest: datetime) -> None:
        """A session's newest ``ts`` is ``newest``: it is due ``after`` later. A session
        already watched keeps its entry, which moves on when it surfaces. With ``after``
        0 nothing is watched."""
        if self.after and key not in self._watched:
            self._watched.add(key)
            heapq.heappush(self._due, (newest + self.after, key))

    def due(
        self, clock: datetime | None, newest_of: Callable[[SessionKey], datetime | None]
    ) -> Iterator[tuple[SessionKey, datetime]]:
        """The sessions due strictly before ``clock`` and the moment each became due,
        taken off the watch: ``newest_of`` gives a session's newest ``ts`` (None: it is
        gone, or no longer to be watched; an entry that no longer matches it is stale
        and moves on)."""
        due = self._due
        while due and clock is not None and due[0][0] < clock:
            at, key = heapq.heappop(due)
            newest = newest_of(key)
            if newest is None:
                self._watched.discard(key)
                continue
            due_at = newest + self.after
            if due_at > at:  # a newer event since: the entry moves on
                heapq.heappush(due, (due_at, key))
                continue
            self._watched.discard(key)
            yield key, due_at

    def __len__(self) -> int:
        return len(self._due)


class Lifetimes:
    """The clock, the idle sessions it expires and, by the same clock, the markers of
    ended sessions it forgets (their store: :class:`~spanguard.streams.engine.markers.Markers`)."""

    __slots__ = ("_idle", "clock", "markers", "skew")

    def __init__(self, idle: timedelta, retention: timedelta, skew: timedelta) -> None:
        self._idle = IdleWatch(idle)
        self.skew = skew
        self.clock: datetime | None = None
        self.markers = Markers(retention)

    @property
    def idle(self) -> timedelta:
        """``idle_timeout``: a session with no event for this long expires (0: never)."""
        return self._idle.after

    def advance(self, ts: datetime, received: datetime | None) -> None:
        """Move the clock to an event's ``ts`` (never back; with a broker timestamp,
        never past it + the allowed skew)."""
        if received is not None and ts > received + self.skew:
            ts = received + self.skew
        if self.clock is None or ts > self.clock:
            self.clock = ts

    def watch(self, key: SessionKey, newest: datetime) -> None:
        """A session's newest ``ts`` is ``newest``: it expires ``idle_timeout`` later.
        A session already watched keeps its entry, which moves on when it surfaces."""
        self._idle.watch(key, newest)

    def expired(
        self, newest_of: Callable[[SessionKey], datetime | None]
    ) -> Iterator[tuple[SessionKey, datetime]]:
        """The sessions now expired and their expiry time, taking them off the watch:
        ``newest_of`` gives a live session's newest ``ts`` (an entry that no longer
        matches it is stale and skipped)."""
        return self._idle.due(self.clock, newest_of)

    @property
    def watching(self) -> int:
        """Entries waiting to expire a session: at most one per live session."""
        return len(self._idle)

    def forgotten(self) -> Iterator[SessionKey]:
        """The markers whose retention has run out by the clock, taken off the book."""
        return self.markers.forgotten(self.clock)

    def restore(self, clock: datetime | None, markers: dict[SessionKey, Marker]) -> None:
        """Take back a restored clock and markers (sessions are watched by the caller)."""
        if clock is not None and (self.clock is None or clock > self.clock):
            self.clock = clock
        for key, marker in markers.items():
            self.markers.mark(key, marker)
