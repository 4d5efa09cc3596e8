"""The markers of ended sessions: closed (``session.closed``) or expired (idle expiry,
contract 1.2).

A marker answers for a session that has no state any more: a redelivered event at
or below its last ``seq`` is a duplicate, a new one is refused (``SESSION_CLOSED``,
``SESSION_EXPIRED``). Markers are forgotten ``tombstone_retention`` after the close or
the expiry, by the partition's event-time clock
(:class:`~spanguard.streams.engine.expiry.Lifetimes`), so the store holds the sessions
ended in the last retention, whatever the number of sessions ever seen.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Reversible
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

SessionKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Marker:
    """An ended session: how it ended, the last ``seq`` it had accepted (a redelivered
    event at or below it is a duplicate), and when (the close, by the clock; the
    expiry, newest ``ts`` + ``idle_timeout``)."""

    kind: Literal["closed", "expired"]
    last_seq: int
    at: datetime | None
    """None for a marker restored from before 1.2: kept for good."""


class Markers:
    """The markers of one partition's ended sessions, in the order they ended, and
    when each is forgotten."""

    __slots__ = ("_book", "_forget", "retention")

    def __init__(self, retention: timedelta) -> None:
        self.retention = retention
        self._book: dict[SessionKey, Marker] = {}
        self._forget: list[tuple[datetime, SessionKey]] = []

    def __contains__(self, key: object) -> bool:
        return key in self._book

    def __len__(self) -> int:
        return len(self._book)

    def get(self, key: SessionKey) -> Marker | None:
        """The marker of ``key``, if its session ended (and is not forgotten yet)."""
        return self._book.get(key)

    def items(self) -> Reversible[tuple[SessionKey, Marker]]:
        """Every marker, oldest first (a marker goes last when its session ends): walked
        backwards, the newest first."""
        return self._book.items()

    @property
    def closed(self) -> Mapping[SessionKey, int]:
        """The closed sessions and the last ``seq`` each accepted (a live view)."""
        return _Closed(self._book)

    def mark(self, key: SessionKey, marker: Marker) -> None:
        """Remember an ended session (and when to forget it)."""
        self._book[key] = marker
        if self.retention and marker.at is not None:
            heapq.heappush(self._forget, (marker.at + self.retention, key))

    def forgotten(self, clock: datetime | None) -> Iterator[SessionKey]:
        """The markers whose retention has run out by ``clock``, taken off the book."""
        forget = self._forget
        while forget and clock is not None and forget[0][0] < clock:
            at, key = heapq.heappop(forget)
            marker = self._book.get(key)
            if marker is not None and marker.at is not None and marker.at + self.retention == at:
                del self._book[key]
                yield key


class _Closed(Mapping[SessionKey, int]):
    """The closed sessions of a marker book, by key: their last ``seq``."""

    __slots__ = ("_book",)

    def __init__(self, book: dict[SessionKey, Marker]) -> None:
        self._book = book

    def __getitem__(self, key: SessionKey) -> int:
        marker = self._book[key]
        if marker.kind != "closed":
            raise KeyError(key)
        return marker.last_seq

    def __iter__(self) -> Iterator[SessionKey]:
        return (key for key, marker in self._book.items() if marker.kind == "closed")

    def __len__(self) -> int:
        return sum(1 for marker in self._book.values() if marker.kind == "closed")
