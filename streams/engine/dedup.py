"""The duplicate window of one session: the ids of its last accepted events.

An event whose id is in the window is a duplicate (a redelivery) and produces
nothing. The window holds a stable 64-bit digest of each id (:func:`event_digest`,
the same in every process), never the strings; the changelog keeps those digests
(:mod:`spanguard.streams.engine.persist`, from slices of the window's ring), and a
restore puts them back as they were.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort
from hashlib import blake2b
from struct import Struct

SORTED_FROM = 64
"""Ids from which the window also keeps its digests sorted, for a binary search.
Below it a lookup scans the ring (a C loop over at most this many integers, well
under the cost of an event) and the window holds one array instead of two: most
sessions stay below it (a simulated session accepts ~60 events)."""

_SIGNED_64 = Struct("<q").unpack
"""Eight bytes as a signed little-endian integer (an ``array("q")`` item)."""


def event_digest(event_id: str) -> int:
    """The window's digest of an event id: its 8-byte BLAKE2b digest
    (:func:`hashlib.blake2b` with ``digest_size=8``) of the id's UTF-8 bytes (a lone
    surrogate, which strict UTF-8 refuses, as ``surrogatepass`` encodes it), read as a
    signed little-endian integer (an ``array("q")`` item). The same in every process
    and version, so the changelog keeps it, where Python's own ``hash()`` of a string
    (free: cached) is seeded per process. Computed once per event: ~5,900
    instructions (callgrind), ~1.4% of a mean event of ``bench.engine``'s workload."""
    try:
        data = event_id.encode()
    except UnicodeEncodeError:
        data = event_id.encode("utf-8", "surrogatepass")
    digest: int = _SIGNED_64(blake2b(data, digest_size=8).digest())[0]
    return digest


class DedupWindow:
    """The last ``window`` accepted event ids of a session, as digests.

    ``ring`` holds the digests in the order they were accepted (a circular buffer
    once the window is full, the oldest at ``head``); from :data:`SORTED_FROM` ids on,
    ``ordered`` holds the same digests sorted. The digest is :func:`event_digest`
    (BLAKE2b, the same in every process, so the changelog keeps the digests and not the
    ids). Two different ids of one window share a digest with a probability of about
    ``window / 2**64`` per event (5e-16 for 10,000): such an id would be taken for a
    duplicate. Costs 8 bytes per id below :data:`SORTED_FROM` ids and 16 from there,
    where the strings and their set cost ~120.
    """

    __slots__ = ("head", "ordered", "ring")

    def __init__(self) -> None:
        self.ring = array("q")
        self.ordered: array[int] | None = None
        self.head = 0

    def __contains__(self, digest: int) -> bool:
        """Whether the window holds ``digest`` (:func:`event_digest` of an id)."""
        ordered = self.ordered
        if ordered is None:
            return digest in self.ring
        at = bisect_left(ordered, digest)
        return at < len(ordered) and ordered[at] == digest

    def __len__(self) -> int:
        return len(self.ring)

    def add(self, digest: int, window: int) -> None:
        """Enter an id's digest; past ``window`` ids the oldest leaves."""
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

    def between(self, start: int, stop: int) -> list[int]:
        """The digests held at [start, stop), in the order they were accepted: 0 is the
        oldest held, ``len(self) - 1`` the newest; clipped to what the window holds (a
        changelog record: a chunk, or the open chunk)."""
        ring = self.ring
        size = len(ring)
        start, stop = max(0, start), min(stop, size)
        if stop <= start:
            return []
        head = self.head  # not 0 only once full: the ring's oldest digest
        first, last = start + head, stop + head
        if last <= size:
            return ring[first:last].tolist()
        if first >= size:
            return ring[first - size : last - size].tolist()
        return ring[first:].tolist() + ring[: last - size].tolist()
