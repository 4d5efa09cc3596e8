"""What persistence tracks of one session between two drains of the changelog.

A session's state records (:mod:`spanguard.streams.engine.persist`) are its header,
blocks of spans by arrival number and chunks of duplicate-window ids. This module
keeps, per session and only when the engine keeps a changelog, which of them changed
since the last drain: the domain state reports each span it changes by arrival number
(:class:`~spanguard.streams.engine.state.SessionState` calls :meth:`SessionChanges.touch`),
and knows nothing of blocks or chunks.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet

BLOCK_SPANS = 8
"""Spans per state block: spans are persisted in blocks of consecutive arrivals."""
TAIL_SPANS = 4
"""Newest spans kept in the session header until this many gather (then a block write)."""
CHUNK_IDS = 16
"""Duplicate-window ids per chunk record; the open chunk travels in the header."""

_CLEAN: frozenset[int] = frozenset()
"""``dirty_blocks`` of a session with no block to write: most sessions, between two
drains (an empty set costs 216 B a session, the placeholder nothing)."""


class SessionChanges:
    """One session's change tracking: which blocks and chunks a drain must write."""

    __slots__ = (
        "by_arrival",
        "dirty_blocks",
        "done_chunks",
        "open_chunk",
        "persisted_below",
        "remembered",
    )

    def __init__(self) -> None:
        self.by_arrival: dict[int, str] = {}
        """Arrival number -> span id, for live and gone spans (what each block holds)."""
        self.persisted_below = 0
        """Arrivals below this live in block records; newer ones in the header's tail."""
        self.dirty_blocks: AbstractSet[int] = _CLEAN
        """Blocks changed since the last drain."""
        self.remembered = 0
        """Event ids accepted into the duplicate window, ever (numbers the chunks)."""
        self.open_chunk: list[str] = []
        """Accepted ids since the last full chunk (``remembered % CHUNK_IDS`` of them)."""
        self.done_chunks: dict[int, list[str]] = {}
        """Chunks filled since the last drain, by chunk number (to be written)."""

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

    def place(self, arrival: int, span_id: str) -> None:
        """A span took ``arrival`` (a new span, or one restored)."""
        self.by_arrival[arrival] = span_id
        self.touch(arrival)

    def vacate(self, arrival: int) -> None:
        """The span of ``arrival`` is forgotten or came back under a new arrival."""
        self.by_arrival.pop(arrival, None)
        self.touch(arrival)

    def remember(self, event_id: str) -> None:
        """An event id entered the duplicate window (chunks are written as they fill)."""
        self.remembered += 1
        self.open_chunk.append(event_id)
        if len(self.open_chunk) == CHUNK_IDS:
            self.done_chunks[self.remembered // CHUNK_IDS - 1] = self.open_chunk
            self.open_chunk = []

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

    def written(self) -> None:
        """A drain wrote what changed."""
        self.dirty_blocks = _CLEAN
        self.done_chunks.clear()
