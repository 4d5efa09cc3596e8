"""Per-(tenant, session) state and the indexes that keep every operation cheap.

Nothing here holds span text: spans are known by content hash, referent keys
by keyed hash. :class:`SessionState` owns the spans and keeps, next to them,
running sums and sorted indexes so that the gate never rescans the session:

* ``order``: live spans by (position, arrival);
* ``scores``: bound scores by (score, position, span id), one list per query;
* ``referents``: who holds which key and type, who mentions them (see
  :mod:`spanguard.streams.engine.referent_index`);
* running sums of live tokens and bound scores, and the set of stale spans.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime

from sortedcontainers import SortedList

from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referent_index import Mention, OrderKey, ReferentIndex

Digest = bytes | str
"""A text's sha256 as held in state: its 32 raw bytes (65 B an object where the 64-char
hex string costs 113), or, for a hash that is not lower-case hex (never one that passed
validation), the string as given."""


def to_digest(sha256_hex: str) -> Digest:
    """The :data:`Digest` of a sha256 in hex; :func:`to_hex` gives the same string back."""
    if len(sha256_hex) == 64:
        try:
            raw = bytes.fromhex(sha256_hex)
        except ValueError:
            return sha256_hex
        if raw.hex() == sha256_hex:
            return raw
    return sha256_hex


def to_hex(digest: Digest) -> str:
    """The hex string a :data:`Digest` was made from (what outputs and the changelog say)."""
    return digest.hex() if isinstance(digest, bytes) else digest


@dataclass(slots=True)
class BoundScore:
    """The one score bound to a span's current text (from a ``scores.computed``)."""

    score_id: str
    score: float
    query_sha256: str | None
    text_digest: Digest
    """The sha256 of the text scored (the span's own digest object, see :func:`to_digest`)."""
    bound_seq: int

    @property
    def text_sha256(self) -> str:
        """The sha256 of the text scored, in hex."""
        return to_hex(self.text_digest)


@dataclass(slots=True)
class SpanState:
    """What the engine knows of one live span (hashes only, never text)."""

    span_id: str
    text_digest: Digest
    """The sha256 of the span's text as 32 bytes (:func:`to_digest`; hex:
    :attr:`text_sha256`)."""
    tokens: int
    position: int
    arrival: int
    added_seq: int
    derived_from: tuple[str, ...] = ()
    stale_rewrites: int = 0
    poisoned: bool = False
    bound: BoundScore | None = None
    holds: tuple[tuple[str, str], ...] = ()
    """(key hash, type) pairs of the entities this span holds."""
    mentions: tuple[Mention, ...] = ()
    surfaces: tuple[tuple[str, str], ...] = ()
    """(key hash, surface) of what it holds, only with ``emit_surfaces``."""
    role: str | None = None
    protected: bool = False
    """Contract 1.2: never evicted, never rewritten (set by ``span.added`` only)."""
    calls: tuple[str, ...] = ()
    """Contract 1.2: the tool call ids this span makes (set by ``span.added`` only)."""
    answers: str | None = None
    """Contract 1.2: the tool call id this span answers. Spans sharing a call id, as
    its maker or an answer, are one tool pair group."""

    @property
    def text_sha256(self) -> str:
        """The sha256 of the span's text, in hex."""
        return to_hex(self.text_digest)

    @text_sha256.setter
    def text_sha256(self, sha256_hex: str) -> None:
        self.text_digest = to_digest(sha256_hex)

    @property
    def call_ids(self) -> tuple[str, ...]:
        """Every call id that links this span to others: made or answered."""
        if self.answers is None:
            return self.calls
        return (*self.calls, self.answers)

    order_key: OrderKey = field(init=False, repr=False, compare=False)
    """This span's place in the context order: ``[position, arrival, span id]``, one
    list shared by every index (see :data:`~spanguard.streams.engine.referent_index.OrderKey`)."""

    def __post_init__(self) -> None:
        self.order_key = [self.position, self.arrival, self.span_id]


@dataclass(slots=True)
class GoneSpan:
    """A span that left the live set: when, and its counter (lineage still counts it)."""

    seq: int
    stale_rewrites: int
    arrival: int
    """The arrival number it had while live: where its state record lives."""
    keys: tuple[str, ...] = ()
    """The referent keys it held (a later summary of it is checked against them:
    ``SUMMARY_LOST_KEYS``)."""


BLOCK_SPANS = 8
"""Spans per state block: spans are persisted in blocks of consecutive arrivals."""
TAIL_SPANS = 4
"""Newest spans kept in the session header until this many gather (then a block write)."""
CHUNK_IDS = 16
"""Duplicate-window ids per chunk record; the open chunk travels in the header."""
BULK_SHARE = 5
"""Work on more than 1/BULK_SHARE of a session's live spans is done in one pass over
the session (as a rescan would) instead of one indexed step per span: measured on a
10,000-span session, a step costs about 8 us per span it touches and a pass about
2 us per live span, so they cross near one fifth."""
GONE_SLACK = 8
"""Gone spans may exceed their bound by 1/GONE_SLACK before the oldest are forgotten
(down to the bound): one sort per that many evictions, not one scan per eviction."""
GATE_BULK_SHARE = 8
"""The same crossover for the gate's two bulk paths: its pinned set (by candidates)
and the removal of the spans it lets go (by spans removed). Measured on a
10,000-span session, each bulk path costs about as much as the indexed one at one
eighth of the live spans, and less from there on (at a third, the bulk removal
saves about a sixth of the whole gate)."""


@dataclass(slots=True)
class DriftWindow:
    """The open before/after window of the latest rewrite (see ``drift.py``)."""

    rewrite_id: str
    mean_before: float | None
    tokens_before: int
    clean: bool
    """No spans lost without a successor, no referent dropped, every broken score invalidated."""


@dataclass(slots=True)
class DriftPoint:
    """One closed drift measurement, as it appears in ``MONOTONIC_DRIFT`` evidence."""

    rewrite_id: str
    mean_before: float | None
    mean_after: float | None
    tokens_before: int
    tokens_after: int


ScoreKey = tuple[float, int, str]


class RecentIds:
    """The duplicate window: the last accepted event ids of a session, kept as 64-bit
    digests (8 bytes each, in two flat arrays) instead of the strings.

    ``ring`` holds the digests in the order they were accepted (a circular buffer
    once the window is full, the oldest at ``head``), ``ordered`` the same digests
    sorted, for a binary search. The digest is Python's own ``hash()`` of the id
    (SipHash, seeded per process): free, because a string caches its hash, and never
    persisted, since the changelog keeps the ids themselves and a restore digests them
    again. Two different ids of one window share a digest with a probability of about
    ``window / 2**64`` per event (5e-16 for 10,000): such an id would be taken for a
    duplicate. Costs 16 bytes per id where the strings and their set cost ~120.
    """

    __slots__ = ("head", "ordered", "ring")

    def __init__(self) -> None:
        self.ring = array("q")
        self.ordered = array("q")
        self.head = 0

    def __contains__(self, event_id: str) -> bool:
        digest = hash(event_id)
        ordered = self.ordered
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
        else:
            head = self.head
            del ordered[bisect_left(ordered, ring[head])]
            ring[head] = digest
            self.head = (head + 1) % window
        insort(ordered, digest)


@dataclass(slots=True)
class SessionState:
    """All state of one (tenant, session)."""

    tenant: str
    session_id: str
    last_seq: int | None = None
    accepted: int = 0
    arrivals: int = 0
    freeze_streak: int = 0
    spans: dict[str, SpanState] = field(default_factory=dict)
    gone: dict[str, GoneSpan] = field(default_factory=dict)
    known_types: set[str] = field(default_factory=set)
    names: NameBook = field(default_factory=NameBook)
    """The session's name book, in keyed-hash form (contract 1.2, "Referents")."""
    recent: RecentIds = field(default_factory=RecentIds)
    """The duplicate window (digests of the last accepted ids)."""
    remembered: int = 0
    open_chunk: list[str] = field(default_factory=list)
    """Accepted ids since the last full chunk (``remembered % CHUNK_IDS`` of them)."""
    done_chunks: dict[int, list[str]] = field(default_factory=dict)
    """Chunks filled since the last drain, by chunk number (to be written)."""
    by_arrival: dict[int, str] = field(default_factory=dict)
    """Arrival number -> span id, for live and gone spans (what each block holds)."""
    persisted_below: int = 0
    """Arrivals below this live in block records; newer ones in the header's tail."""
    dirty_blocks: set[int] = field(default_factory=set)
    """Blocks changed since the last drain."""
    drift_window: DriftWindow | None = None
    drift_streak: list[DriftPoint] = field(default_factory=list)
    """The last ``drift_series_points`` points of the current drift streak."""
    drift_consecutive: int = 0
    """Drifting rewrites in a row (the whole streak, however long)."""
    order: SortedList = field(default_factory=SortedList)
    scores: dict[str | None, SortedList] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    poisoned_pending: set[str] = field(default_factory=set)
    children: dict[str, list[str]] = field(default_factory=dict)
    """Span id -> the live spans citing it in ``derived_from`` (lists, not sets: a span
    has a child or two, and a one-item list costs a quarter of a set)."""
    referents: ReferentIndex = field(default_factory=ReferentIndex)
    live_tokens: int = 0
    bound_sum: float = 0.0
    bound_count: int = 0
    call_spans: dict[str, list[str]] = field(default_factory=dict)
    """Tool call id -> the live spans that make or answer it (contract 1.2)."""
    protected: set[str] = field(default_factory=set)
    """Live protected spans."""
    newest_ts: datetime | None = None
    """The ``ts`` of the newest event processed (idle expiry, contract 1.2)."""
    thrash_streak: int = 0
    """Thin rewrites in a row, each close to the one before (``COMPACTION_THRASHING``)."""
    last_rewrite_turn: int | None = None

    # -- span membership -------------------------------------------------

    def touch(self, arrival: int) -> None:
        """Mark the state record holding the span of ``arrival`` as changed (spans in
        the header's tail need nothing: the header is written with every change)."""
        if arrival < self.persisted_below:
            self.dirty_blocks.add(arrival // BLOCK_SPANS)

    def touch_all(self, spans: Iterable[SpanState]) -> None:
        """:meth:`touch` for each of ``spans`` (a rewrite may move every span)."""
        below = self.persisted_below
        self.dirty_blocks.update(
            {span.arrival // BLOCK_SPANS for span in spans if span.arrival < below}
        )

    def add_span(self, span: SpanState) -> None:
        """Make ``span`` live and enter it in every index."""
        gone = self.gone.pop(span.span_id, None)
        if gone is not None:
            self.by_arrival.pop(gone.arrival, None)
            self.touch(gone.arrival)
        self.by_arrival[span.arrival] = span.span_id
        self.touch(span.arrival)
        self._enter(span)

    def _enter(self, span: SpanState) -> None:
        self.spans[span.span_id] = span
        self.order.add(span.order_key)
        self.live_tokens += span.tokens
        for parent in span.derived_from:
            _link(self.children, parent, span.span_id)
        self.referents.add(span.span_id, span.order_key, span.holds, span.mentions)
        self._index_score(span)
        self._track_stale(span)
        for call in span.call_ids:
            _link(self.call_spans, call, span.span_id)
        if span.protected:
            self.protected.add(span.span_id)

    def _unlink_calls(self, span: SpanState) -> None:
        for call in span.call_ids:
            _unlink(self.call_spans, call, span.span_id)
        self.protected.discard(span.span_id)

    def group(self, span_id: str) -> list[str]:
        """The live spans of ``span_id``'s tool pair group (linked through shared call
        ids), itself included, in context order; just itself outside any pair."""
        span = self.spans[span_id]
        if not span.call_ids:
            return [span_id]
        found = {span_id}
        queue = [span]
        while queue:
            for call in queue.pop().call_ids:
                for other in self.call_spans.get(call, ()):
                    if other not in found:
                        found.add(other)
                        queue.append(self.spans[other])
        return sorted(found, key=lambda s: self.spans[s].order_key)

    def remove_span(self, span_id: str, seq: int) -> SpanState:
        """Take a live span out of every index and remember it as gone at ``seq``."""
        span = self.spans.pop(span_id)
        self.order.remove(span.order_key)
        self.referents.remove(span.span_id, span.order_key, span.holds, span.mentions)
        self._unindex_score(span)
        self._leave(span, seq)
        return span

    def _leave(self, span: SpanState, seq: int) -> None:
        # What every removal does besides the sorted indexes (and the score sums, which
        # need the poisoned set as it was: callers settle them first).
        span_id = span.span_id
        self.live_tokens -= span.tokens
        self._unlink_child(span)
        self.stale.discard(span_id)
        self.poisoned_pending.discard(span_id)
        self.gone[span_id] = GoneSpan(seq, span.stale_rewrites, span.arrival, _keys(span))
        self._unlink_calls(span)
        self.touch(span.arrival)

    def _unlink_child(self, span: SpanState) -> None:
        # A parent no live span cites any more leaves ``children``.
        for parent in span.derived_from:
            _unlink(self.children, parent, span.span_id)

    def remove_spans(self, span_ids: list[str], seq: int, bulk: bool | None = None) -> None:
        """:meth:`remove_span` for each of ``span_ids``, in order, with the same result.

        A large share of the session (or ``bulk=True``) leaves in bulk: each big
        index is filtered in one pass instead of losing one entry per span,
        the per-span bookkeeping is done inline, and the running sums are kept
        exactly as one-by-one removal leaves them.
        """
        if bulk is None:
            bulk = len(span_ids) * GATE_BULK_SHARE > len(self.spans)
        if not bulk:
            for span_id in span_ids:
                self.remove_span(span_id, seq)
            return
        spans, gone, pending = self.spans, self.gone, self.poisoned_pending
        removed: list[SpanState] = []
        bound_sum, bound_count, live_tokens = self.bound_sum, self.bound_count, self.live_tokens
        for span_id in span_ids:
            span = spans.pop(span_id)
            removed.append(span)
            bound = span.bound
            # In the order of one-by-one removal: the float sum comes out bit-identical.
            if bound is not None and span_id not in pending:
                bound_sum -= bound.score
                bound_count -= 1
            live_tokens -= span.tokens
            if span.derived_from:
                self._unlink_child(span)
            if span.call_ids or span.protected:
                self._unlink_calls(span)
            gone[span_id] = GoneSpan(seq, span.stale_rewrites, span.arrival, _keys(span))
        self.touch_all(removed)
        self.bound_sum, self.bound_count, self.live_tokens = bound_sum, bound_count, live_tokens
        leaving = set(span_ids)
        self.stale.difference_update(leaving)
        pending.difference_update(leaving)
        self.order = SortedList([key for key in self.order if key[2] not in leaving])
        for query, ranked in list(self.scores.items()):
            kept = [key for key in ranked if key[2] not in leaving]
            if len(kept) == len(ranked):
                continue
            if kept:
                self.scores[query] = SortedList(kept)
            else:
                del self.scores[query]
        self.referents.remove_many(removed)

    def forget_gone(self, limit: int) -> None:
        """Bound the gone spans: past ``limit`` + ``limit // GONE_SLACK`` of them, forget
        the oldest (by the ``seq`` they left at, then arrival) until ``limit`` remain, and
        mark their records changed. The order is a function of what the changelog holds,
        so a restored session forgets the same spans at the same event. 0: no bound."""
        gone = self.gone
        if not limit or len(gone) <= limit + limit // GONE_SLACK:
            return
        oldest = sorted(gone.items(), key=lambda item: (item[1].seq, item[1].arrival))
        for span_id, left in oldest[: len(gone) - limit]:
            del gone[span_id]
            self.by_arrival.pop(left.arrival, None)
            self.touch(left.arrival)

    # -- scores ----------------------------------------------------------

    def bind(self, span: SpanState, bound: BoundScore | None) -> None:
        """Bind ``bound`` to ``span`` (or unbind with None), keeping sums and indexes."""
        self._unindex_score(span)
        span.bound = bound
        self._index_score(span)
        self.touch(span.arrival)

    def set_counter(self, span: SpanState, value: int) -> None:
        """Set a span's rewrite counter and keep the stale set in step."""
        span.stale_rewrites = value
        self._track_stale(span)
        self.touch(span.arrival)

    def mark_poisoned(self, span: SpanState, drop: bool) -> None:
        """Poison a span; with ``drop`` it stops holding the gate and waits to be dropped."""
        span.poisoned = True
        self.touch(span.arrival)
        if drop:
            self._unindex_score(span)
            self.poisoned_pending.add(span.span_id)
            self._track_stale(span)
            self._index_score(span)

    def _gates(self, span: SpanState) -> bool:
        return span.stale_rewrites > 0 and span.span_id not in self.poisoned_pending

    def _track_stale(self, span: SpanState) -> None:
        if self._gates(span):
            self.stale.add(span.span_id)
        else:
            self.stale.discard(span.span_id)

    def _ranked(self, span: SpanState) -> bool:
        return span.bound is not None and span.span_id not in self.poisoned_pending

    def _index_score(self, span: SpanState) -> None:
        if not self._ranked(span):
            return
        bound = span.bound
        assert bound is not None
        self.scores.setdefault(bound.query_sha256, SortedList()).add(
            (bound.score, span.position, span.span_id)
        )
        self.bound_sum += bound.score
        self.bound_count += 1

    def _unindex_score(self, span: SpanState) -> None:
        if not self._ranked(span):
            return
        bound = span.bound
        assert bound is not None
        ranked = self.scores[bound.query_sha256]
        ranked.remove((bound.score, span.position, span.span_id))
        if not ranked:
            del self.scores[bound.query_sha256]
        self.bound_sum -= bound.score
        self.bound_count -= 1

    # -- queries ---------------------------------------------------------

    def mean_bound(self) -> float | None:
        """Mean bound score of the live set, or None when nothing is scored."""
        return self.bound_sum / self.bound_count if self.bound_count else None

    def neighbours(self, span: SpanState, leaving: AbstractSet[str] = frozenset()) -> list[str]:
        """Live spans adjacent by position, plus live ``derived_from`` parents and
        children, none of them in ``leaving`` (spans that leave the live set with
        the same decision: adjacency skips over them)."""
        found: list[str] = []
        order = self.order
        at = self.order.index(span.order_key)
        before = at - 1
        while before >= 0 and order[before][2] in leaving:
            before -= 1
        if before >= 0:
            found.append(order[before][2])
        after = at + 1
        while after < len(order) and order[after][2] in leaving:
            after += 1
        if after < len(order):
            found.append(order[after][2])
        found.extend(p for p in span.derived_from if p in self.spans and p not in leaving)
        found.extend(c for c in self.children.get(span.span_id, ()) if c not in leaving)
        return found

    # -- duplicate window ------------------------------------------------

    def remember(self, event_id: str, window: int) -> None:
        """Enter an accepted event id in the bounded duplicate window."""
        if window <= 0:
            return
        self.remembered += 1
        self.open_chunk.append(event_id)
        if len(self.open_chunk) == CHUNK_IDS:
            self.done_chunks[self.remembered // CHUNK_IDS - 1] = self.open_chunk
            self.open_chunk = []
        self.recent.add(event_id, window)

    def forget_changes(self) -> None:
        """Drop the marks of what changed (when no changelog is kept)."""
        self.dirty_blocks.clear()
        self.done_chunks.clear()

    def reindex(self, *, in_order: bool = False) -> None:
        """Rebuild every index from ``spans`` (after a rewrite re-positions spans,
        or after a restore). With ``in_order`` the caller brought the context order
        and the referent index up to date (a rewrite that kept the spans' relative
        order moves their shared order keys in place): only the indexes keyed by
        position or holding derived sums are rebuilt. Marks nothing changed: the
        caller knows what did.

        Built in bulk (each sorted index from one sort, not one insert per span):
        the same contents as entering every span one by one, at a fraction of
        the cost. Spans are visited in ``spans`` order, so running sums add up
        in the same order as before (bit-identical floats).
        """
        spans = list(self.spans.values())
        pending = self.poisoned_pending
        ranked: dict[str | None, list[ScoreKey]] = {}
        stale: set[str] = set()
        children: dict[str, list[str]] = {}
        live_tokens = 0
        bound_sum = 0.0
        bound_count = 0
        for span in spans:
            live_tokens += span.tokens
            span_id = span.span_id
            for parent in span.derived_from:
                _link(children, parent, span_id)
            bound = span.bound
            if bound is not None and span_id not in pending:
                ranked.setdefault(bound.query_sha256, []).append(
                    (bound.score, span.position, span_id)
                )
                bound_sum += bound.score
                bound_count += 1
            if span.stale_rewrites > 0 and span_id not in pending:
                stale.add(span_id)
        if not in_order:
            self.order = SortedList([span.order_key for span in spans])
            self.referents = ReferentIndex.build(spans)
        self.scores = {query: SortedList(keys) for query, keys in ranked.items()}
        self.stale = stale
        self.children = children
        call_spans: dict[str, list[str]] = {}
        for span in spans:
            for call in span.call_ids:
                _link(call_spans, call, span.span_id)
        self.call_spans = call_spans
        self.protected = {span.span_id for span in spans if span.protected}
        self.live_tokens = live_tokens
        self.bound_sum = bound_sum
        self.bound_count = bound_count


def _link(index: dict[str, list[str]], name: str, member: str) -> None:
    """Enter ``member`` under ``name`` in a one-to-few index (once)."""
    members = index.get(name)
    if members is None:
        index[name] = [member]
    elif member not in members:
        members.append(member)


def _unlink(index: dict[str, list[str]], name: str, member: str) -> None:
    """Take ``member`` out from under ``name``; a name with no member left leaves."""
    members = index.get(name)
    if members is not None and member in members:
        members.remove(member)
        if not members:
            del index[name]


def _keys(span: SpanState) -> tuple[str, ...]:
    """The distinct keys a span holds, in order."""
    return tuple(dict.fromkeys(key for key, _ in span.holds))
