"""What persistence tracks of one session between two drains of the changelog.

A session's state records (:mod:`spanguard.streams.engine.persist`) are its header,
blocks of spans by arrival number and chunks of duplicate-window digests. This module
keeps, per session and only when the engine keeps a changelog, which of them changed
since the last drain: the domain state reports each span it changes by arrival number
(:class:`~spanguard.streams.engine.state.SessionState` calls :meth:`SessionChanges.touch`),
and knows nothing of blocks or chunks. Of the duplicate window it keeps counts only:
the digests a chunk holds are read from the window's own ring
(:class:`~spanguard.streams.engine.dedup.DedupWindow`) when the chunk is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet

BLOCK_SPANS = 8
"""Spans per state block: spans are persisted in blocks of consecutive arrivals."""
TAIL_SPANS = 4
"""Newest spans kept in the session header until this many gather (then a block write)."""
CHUNK_IDS = 16
"""Duplicate-window digests per chunk record; the open chunk travels in the header."""

SLOT_BYTES = 8
"""What an arrival costs in :class:`SessionChanges`' list of span ids: one pointer."""
SPILLED_BYTES = 64
"""What an arrival costs in the dict of spilled spans: its share of the dict's table
(30 to 45 B, with headroom) and its key, an int object of 28 B past 256."""
SPILL_EVERY = 64
"""Arrivals between two looks for a sparse prefix to spill: the list of span ids outgrows
what it must hold by at most this many slots, and the look (a scan of the list) costs
a few instructions an arrival."""

_CLEAN: frozenset[int] = frozenset()
"""``dirty_blocks`` of a session with no block to write: most sessions, between two
drains (an empty set costs 216 B a session, the placeholder nothing)."""


class SessionChanges:
    """One session's change tracking: which blocks and chunks a drain must write, and
    which span holds each arrival (what a block holds)."""

    __slots__ = (
        "_base",
        "_ids",
        "_spilled",
        "dirty_blocks",
        "drained_chunks",
        "persisted_below",
        "remembered",
    )

    def __init__(self) -> None:
        # Which span holds each arrival, live or gone (what each block holds; see
        # :meth:`span_ids`). Arrivals are dense small ints, one a span added or created,
        # so a list indexed by ``arrival - _base`` holds them at a pointer an arrival,
        # where a dict took about 36 B (1.4 KB a simulated session). A vacated arrival
        # is None. ``_base`` moves up in whole blocks as the oldest arrivals are
        # vacated (gone spans forgotten: ``max_gone_spans``); the few old spans that
        # stay (a system prompt, live for good) move to the ``_spilled`` dict rather
        # than keep a slot for every arrival after theirs (:meth:`compact`).
        self._ids: list[str | None] = []
        """Span id by ``arrival - _base``; None: vacated (or never placed)."""
        self._base = 0
        """The arrival of ``_ids[0]``, a multiple of ``BLOCK_SPANS``."""
        self._spilled: dict[int, str] | None = None
        """Span id by arrival, for placed arrivals below ``_base`` (None: there are none,
        as in most sessions)."""
        self.persisted_below = 0
        """Arrivals below this live in block records; newer ones in the header's tail."""
        self.dirty_blocks: AbstractSet[int] = _CLEAN
        """Blocks changed since the last drain."""
        self.remembered = 0
        """Event ids accepted into the duplicate window, ever (numbers the chunks: chunk
        ``n`` holds the ids accepted ``n * CHUNK_IDS`` to ``(n + 1) * CHUNK_IDS - 1``,
        counting from 0; the open chunk, ``remembered % CHUNK_IDS`` ids, is not full)."""
        self.drained_chunks = 0
        """Full chunks as of the last drain (``remembered // CHUNK_IDS`` then): the chunks
        filled since, numbered from it, are the ones the next drain writes."""

    def touch(self, arrival: int) -> None:
        """The span of ``arrival`` changed: mark the block holding it (spans in the
        header's tail need nothing: the header is written with every change)."""
        if arrival < self.persisted_below:
            self._dirty().add(arrival // BLOCK_SPANS)

    def touch_many(self, arrivals: Iterable[int]) -> None:
        """:meth:`touch` for each of ``arrivals``."""
        below = self.persisted_below
        blocks = {arrival // BLOCK_SPANS for arrival in arrivals if arrival < below}
        if blocks:
            self._dirty().update(blocks)

    def span_ids(self, start: int, stop: int) -> list[str]:
        """The spans holding the arrivals in [start, stop), oldest first (a block's, or
        the header's tail: one slice of the list)."""
        if stop <= start:
            return []
        base = self._base
        window = self._ids[max(0, start - base) : max(0, stop - base)]
        if None in window:  # most blocks have no vacated arrival: no filtering pass
            window = [span_id for span_id in window if span_id is not None]
        found: list[str] = window  # type: ignore[assignment]  # no None left in it
        spilled = self._spilled
        if spilled is None or start >= base:
            return found
        older = [spilled[a] for a in range(start, min(stop, base)) if a in spilled]
        return older + found

    def placed(self) -> Iterator[tuple[int, str]]:
        """``(arrival, span id)`` of every placed arrival, oldest first (for checks: a
        drain reads blocks with :meth:`span_ids`)."""
        if self._spilled is not None:
            yield from sorted(self._spilled.items())
        base = self._base
        for at, span_id in enumerate(self._ids):
            if span_id is not None:
                yield base + at, span_id

    def place(self, arrival: int, span_id: str) -> None:
        """A span took ``arrival`` (a new one, or one back under a new arrival): mark its
        block."""
        ids = self._ids
        if arrival - self._base == len(ids):
            ids.append(span_id)  # the common case: the newest arrival, next in the list
        else:
            self._put(arrival, span_id)
        if not arrival % SPILL_EVERY:
            self.compact()
        self.touch(arrival)

    def reload(self, arrival: int, span_id: str) -> None:
        """A restored span holds ``arrival``: as :meth:`place`, but its block is written as
        it is (nothing to mark). Restoring places arrivals in any order, with gaps where
        spans were forgotten: :meth:`compact` once all are placed."""
        self._put(arrival, span_id)

    def vacate(self, arrival: int) -> None:
        """The span of ``arrival`` is forgotten or came back under a new arrival."""
        at = arrival - self._base
        ids = self._ids
        if 0 <= at < len(ids):
            ids[at] = None  # the slot goes when its block does (:meth:`compact`)
        elif at < 0 and self._spilled is not None:
            self._spilled.pop(arrival, None)
            if not self._spilled:
                self._spilled = None
        self.touch(arrival)

    def _put(self, arrival: int, span_id: str) -> None:
        """Place ``arrival`` anywhere: below the list, past its end or in it."""
        ids = self._ids
        base = self._base
        if arrival < base:
            if self._spilled is not None:
                # Spans below the list are in the dict (it exists): so is this one.
                self._spilled[arrival] = span_id
                return
            # A restore placing an older block after a newer one: the list starts lower.
            lowered = arrival - arrival % BLOCK_SPANS
            if ids:
                ids[:0] = [None] * (base - lowered)
            self._base = base = lowered
        elif not ids:
            # An empty list starts at the arrival's block, not with a slot for each
            # arrival since the old base (after a spill, or a restore past forgotten spans).
            self._base = base = arrival - arrival % BLOCK_SPANS
        at = arrival - base
        if at >= len(ids):
            ids.extend([None] * (at + 1 - len(ids)))
        ids[at] = span_id

    def compact(self) -> None:
        """Drop the whole blocks at the start of the list whose slots cost more than their
        spans would in the dict, moving those spans there (every ``SPILL_EVERY``
        arrivals placed, and once a restore has placed them all).

        The cut is the one that saves most bytes: a leading run of vacated blocks goes
        for nothing; a span that stays among them (live for good, say) costs
        ``SPILLED_BYTES`` in the dict, less than the ``SLOT_BYTES`` a slot of every
        arrival after it would, once it is sparse enough."""
        ids = self._ids
        if ids.count(None) < BLOCK_SPANS:
            return  # a prefix that saves bytes has a whole block's worth of holes
        saving = best = cut = 0
        for start in range(0, len(ids) - BLOCK_SPANS + 1, BLOCK_SPANS):
            held = BLOCK_SPANS - ids[start : start + BLOCK_SPANS].count(None)
            saving += BLOCK_SPANS * SLOT_BYTES - held * SPILLED_BYTES
            if saving > best:
                best, cut = saving, start + BLOCK_SPANS
        if not cut:
            return
        base = self._base
        moved = {base + at: span_id for at, span_id in enumerate(ids[:cut]) if span_id is not None}
        if moved:
            if self._spilled is None:
                self._spilled = moved
            else:
                self._spilled.update(moved)
        self._ids = ids[cut:]  # a copy of the right size (``del`` may keep twice the room)
        self._base = base + cut

    def roll_tail(self, arrivals: int) -> None:
        """Move a full tail (``TAIL_SPANS`` arrivals or more) from the header into its
        blocks."""
        if arrivals + 1 - self.persisted_below >= TAIL_SPANS:
            first = self.persisted_below // BLOCK_SPANS
            self._dirty().update(range(first, arrivals // BLOCK_SPANS + 1))
            self.persisted_below = arrivals + 1

    def _dirty(self) -> set[int]:
        """The session's own set of dirty blocks, made at its first change."""
        blocks = self.dirty_blocks
        if not isinstance(blocks, set):
            blocks = self.dirty_blocks = set()
        return blocks

    def chunks_to_write(self) -> range:
        """The numbers of the chunks filled since the last drain (most often none)."""
        return range(self.drained_chunks, self.remembered // CHUNK_IDS)

    def written(self) -> None:
        """A drain wrote what changed."""
        self.dirty_blocks = _CLEAN
        self.drained_chunks = self.remembered // CHUNK_IDS
