"""The spans that left a session's live set, one int each (issue 22).

A session remembers every span that left it (until ``max_gone_spans``): when it left,
its rewrite counter (lineage still counts it), its arrival number (where its state
record lives) and the referent keys it held. Kept as a :class:`GoneSpan` object each,
with its own ``seq`` and arrival ints, that is ~130 B a gone span, ~1.9 KB a simulated
session. :class:`GoneSpans` packs the three numbers into one int per span (~40 B) and
keeps the keys apart, in a dict made only when a gone span held any; reading an entry
makes the :class:`GoneSpan` it was made from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass

from spanguard.streams.engine.keys import StoredKey

FIELD_BITS = 32
"""Bits of the arrival number and of the counter in a packed entry (``seq`` takes the
bits above them, as many as it needs: the contract does not bound it)."""
_FIELD_MASK = (1 << FIELD_BITS) - 1
_NO_KEYS: tuple[StoredKey, ...] = ()


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


def pack(seq: int, stale_rewrites: int, arrival: int) -> int:
    """One int of a gone span's three numbers (:func:`unpack` gives them back).

    The counter and the arrival number have :data:`FIELD_BITS` bits each: a session
    with 2**32 arrivals would hold terabytes, so a larger one is a broken record."""
    # a negative field shifts to -1: refused with the too large ones
    if seq < 0 or stale_rewrites >> FIELD_BITS or arrival >> FIELD_BITS:
        raise OverflowError(f"gone span out of range: {seq}, {stale_rewrites}, {arrival}")
    return (seq << 2 * FIELD_BITS) | (arrival << FIELD_BITS) | stale_rewrites


def unpack(packed: int) -> tuple[int, int, int]:
    """``(seq, stale_rewrites, arrival)`` of a :func:`pack` ed entry."""
    return packed >> 2 * FIELD_BITS, packed & _FIELD_MASK, (packed >> FIELD_BITS) & _FIELD_MASK


class GoneSpans(MutableMapping[str, GoneSpan]):
    """Span id -> :class:`GoneSpan`, as a dict of them reads, stored one packed int a
    span (see the module). Iterates in insertion order, as a dict does; an entry read
    is a new :class:`GoneSpan` each time (changing it changes nothing here)."""

    __slots__ = ("_keys", "_packed")

    def __init__(self, spans: Mapping[str, GoneSpan] | None = None) -> None:
        self._packed: dict[str, int] = {}
        self._keys: dict[str, tuple[StoredKey, ...]] | None = None
        """The keys of the gone spans that held any (None until one did)."""
        if spans is not None:
            self.update(spans)

    def leave(
        self, span_id: str, seq: int, stale_rewrites: int, arrival: int, keys: tuple[StoredKey, ...]
    ) -> None:
        """Remember ``span_id`` as gone (``self[span_id] = GoneSpan(...)``, without
        the object)."""
        self._packed[span_id] = pack(seq, stale_rewrites, arrival)
        held = self._keys
        if keys:
            if held is None:
                held = self._keys = {}
            held[span_id] = keys
        elif held is not None:
            held.pop(span_id, None)

    def discard(self, span_id: str) -> int | None:
        """Forget ``span_id`` if it is gone: the arrival number it had, or None (a
        ``pop`` that builds no :class:`GoneSpan`, on every span added)."""
        packed = self._packed.pop(span_id, None)
        if packed is None:
            return None
        if self._keys is not None:
            self._keys.pop(span_id, None)
        return (packed >> FIELD_BITS) & _FIELD_MASK

    def __getitem__(self, span_id: str) -> GoneSpan:
        seq, stale_rewrites, arrival = unpack(self._packed[span_id])
        held = self._keys
        keys = _NO_KEYS if held is None else held.get(span_id, _NO_KEYS)
        return GoneSpan(seq, stale_rewrites, arrival, keys)

    def __setitem__(self, span_id: str, gone: GoneSpan) -> None:
        self.leave(span_id, gone.seq, gone.stale_rewrites, gone.arrival, gone.keys)

    def __delitem__(self, span_id: str) -> None:
        del self._packed[span_id]
        if self._keys is not None:
            self._keys.pop(span_id, None)

    def __contains__(self, span_id: object) -> bool:
        return span_id in self._packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def __repr__(self) -> str:
        return f"GoneSpans({dict(self.items())!r})"
