"""The spans that left a session's live set, one int each (issue 22).

A session remembers every span that left it (until ``max_gone_spans``): when it left,
its rewrite counter (lineage still counts it), its arrival number (where its state
record lives) and the referent keys it held. Kept as a :class:`GoneSpan` object each,
that is 64 B a gone span, ~1 KB a simulated session. :class:`GoneSpans` keeps most gone
spans (counter 0, no keys) as one int of their ``seq`` and arrival number (32 B while
``seq`` < 2**28), the others as a tuple of that int, the counter and the keys; reading
an entry makes the :class:`GoneSpan` it was made from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import cast

from spanguard.streams.engine.keys import StoredKey

ARRIVAL_BITS = 32
"""Bits of the arrival number in a packed entry (``seq`` takes the bits above them, as
many as it needs: the contract does not bound it)."""
_ARRIVAL_MASK = (1 << ARRIVAL_BITS) - 1

Entry = int | tuple[int | StoredKey, ...]
"""A gone span as kept: its :func:`pack` ed ``seq`` and arrival, or, when its counter or
keys are not nothing, one flat tuple ``(packed, counter, key, key, ...)`` (a tuple of
the keys inside the tuple cost 56 B more a gone span)."""


@dataclass(slots=True)
class GoneSpan:
    """A span that left the live set: when, and its counter (lineage still counts it)."""

    seq: int
    stale_rewrites: int
    arrival: int
    """The arrival number it had while live: where its state record lives."""
    keys: tuple[StoredKey, ...] = ()
    """The referent keys it held (a later summary of it is checked against them:
    ``SUMMARY_LOST_KEYS``)."""


def pack(seq: int, arrival: int) -> int:
    """One int of a gone span's ``seq`` and arrival number (:func:`unpack` gives them
    back). The arrival number has :data:`ARRIVAL_BITS` bits: a session with 2**32
    arrivals would hold terabytes, so a larger one is a broken record."""
    # a negative arrival shifts to -1: refused with the too large ones
    if seq < 0 or arrival >> ARRIVAL_BITS:
        raise OverflowError(f"gone span out of range: seq {seq}, arrival {arrival}")
    return (seq << ARRIVAL_BITS) | arrival


def unpack(packed: int) -> tuple[int, int]:
    """``(seq, arrival)`` of a :func:`pack` ed entry."""
    return packed >> ARRIVAL_BITS, packed & _ARRIVAL_MASK


class GoneSpans(MutableMapping[str, GoneSpan]):
    """Span id -> :class:`GoneSpan`, as a dict of them reads, stored one packed int a
    span (see the module). Iterates in insertion order, as a dict does; an entry read
    is a new :class:`GoneSpan` each time (changing it changes nothing here)."""

    __slots__ = ("_entries",)

    def __init__(self, spans: Mapping[str, GoneSpan] | None = None) -> None:
        self._entries: dict[str, Entry] = {}
        if spans is not None:
            self.update(spans)

    def leave(
        self, span_id: str, seq: int, stale_rewrites: int, arrival: int, keys: tuple[StoredKey, ...]
    ) -> None:
        """Remember ``span_id`` as gone (``self[span_id] = GoneSpan(...)``, without
        the object)."""
        packed = pack(seq, arrival)
        self._entries[span_id] = (
            (packed, stale_rewrites, *keys) if stale_rewrites or keys else packed
        )

    def leave_many(
        self, seq: int, departed: Sequence[tuple[str, int, int, tuple[StoredKey, ...]]]
    ) -> None:
        """:meth:`leave` for each ``(span_id, stale_rewrites, arrival, keys)`` of
        ``departed``, all gone at ``seq``: a bulk removal's entries without a method
        call and a :func:`pack` call each."""
        if seq < 0 and departed:  # as leave: nothing to enter, nothing refused
            raise OverflowError(f"gone span out of range: seq {seq}")
        entries, high = self._entries, seq << ARRIVAL_BITS
        for span_id, stale_rewrites, arrival, keys in departed:
            # the checks of pack: the seq was checked above
            if arrival >> ARRIVAL_BITS:
                raise OverflowError(f"gone span out of range: seq {seq}, arrival {arrival}")
            packed = high | arrival
            entries[span_id] = (packed, stale_rewrites, *keys) if stale_rewrites or keys else packed

    def discard(self, span_id: str) -> int | None:
        """Forget ``span_id`` if it is gone: the arrival number it had, or None (a
        ``pop`` that builds no :class:`GoneSpan`, on every span added)."""
        entry = self._entries.pop(span_id, None)
        if entry is None:
            return None
        packed = entry if isinstance(entry, int) else entry[0]
        assert isinstance(packed, int)  # the first item of an entry (see ``Entry``)
        return packed & _ARRIVAL_MASK

    def __getitem__(self, span_id: str) -> GoneSpan:
        entry = self._entries[span_id]
        if isinstance(entry, int):
            seq, arrival = unpack(entry)
            return GoneSpan(seq, 0, arrival)
        packed, stale_rewrites = entry[0], entry[1]
        assert isinstance(packed, int) and isinstance(stale_rewrites, int)  # see ``Entry``
        seq, arrival = unpack(packed)
        # Past the two ints, an entry holds keys only (see ``Entry``).
        return GoneSpan(seq, stale_rewrites, arrival, cast(tuple[StoredKey, ...], entry[2:]))

    def __setitem__(self, span_id: str, gone: GoneSpan) -> None:
        self.leave(span_id, gone.seq, gone.stale_rewrites, gone.arrival, gone.keys)

    def __delitem__(self, span_id: str) -> None:
        del self._entries[span_id]

    def __contains__(self, span_id: object) -> bool:
        return span_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"GoneSpans({dict(self.items())!r})"
