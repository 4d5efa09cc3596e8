"""The duplicate window of one session: the ids of its last accepted events.

An event whose id is in the window is a duplicate (a redelivery) and produces
nothing. The window holds 64-bit digests of the ids, never the strings: the
changelog keeps the ids themselves (:mod:`spanguard.streams.engine.changes`), and a
restore digests them again.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort

SORTED_FROM = 64
"""Ids from which the window also keeps its digests sorted, for a binary search.
Below it a lookup scans the ring (a C loop over at most this many integers, well
under the cost of an event) and the window holds one array instead of two: most
sessions stay below it (a simulated session accepts ~60 events)."""


class DedupWindow:
    """The last ``window`` accepted event ids of a session, as digests.

    ``ring`` holds the digests in the order they were accepted (a circular buffer
    once the window is full, the oldest at ``head``); from :data:`SORTED_FROM` ids on,
    ``ordered`` holds the same digests sorted. The digest is Python's own ``hash()``
    of the id (SipHash, seeded per process): free, because a string caches its hash,
    and never persisted. Two different ids of one window share a digest with a
    probability of about ``window / 2**64`` per event (5e-16 for 10,000): such an id
    would be taken for a duplicate. Costs 8 bytes per id below :data:`SORTED_FROM`
    ids and 16 from there, where the strings and their set cost ~120.
    """

    __slots__ = ("head", "ordered", "ring")

    def __init__(self) -> None:
        self.ring = array("q")
        self.ordered: array[int] | None = None
        self.head = 0

    def __contains__(self, event_id: str) -> bool:
        digest = hash(event_id)
        ordered = self.ordered
        if ordered is None:
            return digest in self.ring
        at = bisect_left(ordered, digest)
        return at < len(ordered) and ordered[at] == digest

    def __len__(self) -> int:
        return len(self.ring)

    def add(self, event_id: str, window: int) -> None:
        """Enter an id; past ``window`` ids the oldest leaves."""
        digest = hash(event_id)
        ring, ordered = self.ring, self.ordered
        if len(ring) < window:
            ring.append(digest)
            if ordered is not None:
                insort(ordered, digest)
            elif len(ring) >= SORTED_FROM:
                self.ordered = array("q", sorted(ring))
            return
        head = self.head
        if ordered is not None:
            del ordered[bisect_left(ordered, ring[head])]
            insort(ordered, digest)
        ring[head] = digest
        self.head = (head + 1) % window
