"""Per-(tenant, session) domain state and the indexes that keep every operation cheap.

Nothing here holds span text: spans are known by content hash, referent keys
by keyed hash. :class:`SessionState` owns the spans and keeps, next to them,
running sums and sorted indexes so that the gate never rescans the session:

* ``order``: live spans by (position, arrival);
* ``scores``: ranked spans by (score, position, span id), one list per query;
* ``referents``: who holds which key and type, who mentions them (see
  :mod:`spanguard.streams.engine.referent_index`);
* running sums of live tokens and bound scores, and the set of stale spans.

What is not the session's domain lives apart: the duplicate window
(:mod:`~spanguard.streams.engine.dedup`), the changelog's bookkeeping
(:mod:`~spanguard.streams.engine.changes`, told of each changed span through
:class:`ChangeLog`) and the markers of ended sessions
(:mod:`~spanguard.streams.engine.markers`).
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Protocol

from spanguard.streams.engine.gone import GoneSpans
from spanguard.streams.engine.holdings import share_id, share_strings
from spanguard.streams.engine.keys import StoredKey
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referent_index import (
    Holds,
    Mention,
    ReferentIndex,
    comes_before,
    order_of,
)

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


_RAW = 1
"""A head's flag: its digest is the 32 raw bytes of a sha256 (else a text, see
:func:`pack_head`)."""
_BOUND = 2
"""A head's flag: a score is bound, its id follows the digest."""
_TEXT_LENGTH = 4
"""The bytes of a text digest's length in a head."""
_RAW_UNBOUND, _RAW_BOUND = bytes((_RAW,)), bytes((_RAW | _BOUND,))
_TEXT_UNBOUND, _TEXT_BOUND = bytes((0,)), bytes((_BOUND,))


def pack_head(digest: Digest, score_id: str | None) -> bytes:
    """A span's text digest and bound score id as one bytes object, its *head*.

    Every bound span keeps both, and as two objects they cost their headers twice
    (33 B a digest, 49 B a string): one object saves ~64 B a scored span. The layout:
    a flag byte (:data:`_RAW`, :data:`_BOUND`); the digest (its 32 bytes, or a text
    digest's UTF-8 after its length in 4 bytes); the score id's UTF-8 (lone surrogates
    kept, as JSON may carry them) when bound. :func:`head_digest` and
    :func:`head_score_id` give both back as they were."""
    if isinstance(digest, bytes):
        if len(digest) != 32:
            raise ValueError(f"a raw digest is 32 bytes, not {len(digest)}")
        if score_id is None:
            return _RAW_UNBOUND + digest
        return b"".join((_RAW_BOUND, digest, score_id.encode("utf-8", "surrogatepass")))
    text = digest.encode("utf-8", "surrogatepass")
    length = len(text).to_bytes(_TEXT_LENGTH, "little")
    if score_id is None:
        return b"".join((_TEXT_UNBOUND, length, text))
    return b"".join((_TEXT_BOUND, length, text, score_id.encode("utf-8", "surrogatepass")))


def _digest_end(head: bytes) -> int:
    if head[0] & _RAW:
        return 33
    return 1 + _TEXT_LENGTH + int.from_bytes(head[1 : 1 + _TEXT_LENGTH], "little")


def head_digest(head: bytes) -> Digest:
    """The text digest a :func:`pack_head` head holds."""
    if head[0] & _RAW:
        return head[1:33]
    return head[1 + _TEXT_LENGTH : _digest_end(head)].decode("utf-8", "surrogatepass")


def head_score_id(head: bytes) -> str | None:
    """The bound score id a :func:`pack_head` head holds (None: none bound)."""
    if not head[0] & _BOUND:
        return None
    return head[_digest_end(head) :].decode("utf-8", "surrogatepass")


SHARED_INTS = 16_384
"""Ints below this are held as one shared object each (:func:`shared_int`)."""

_SHARED_INTS = tuple(range(SHARED_INTS))


def shared_int(value: int) -> int:
    """``value``, as the one object every span holding it shares when it is small.

    CPython shares only -5..256: every other int a span keeps (its position, arrival,
    ``seq``, tokens) is an object of its own, 28-32 B, decoded from its event. Sessions
    number their spans and events from the start, so their small numbers repeat from
    session to session: ~90 B a span less. A pure memory measure (an equal int)."""
    return _SHARED_INTS[value] if 0 <= value < SHARED_INTS else value


def to_hex(digest: Digest) -> str:
    """The hex string a :data:`Digest` was made from (what outputs and the changelog say)."""
    return digest.hex() if isinstance(digest, bytes) else digest


Links = str | tuple[str, ...]
"""The members of a one-to-few index entry: the one member itself (most parents have one
child, and a call is made before it is answered), else a tuple of them (not a set or a
list: a tuple of two costs 56 B where a list costs 72 and a set 216; a link or an unlink
makes a new one, of a few items). :func:`members` reads either as a tuple."""


def members(links: Links | None) -> tuple[str, ...]:
    """The members of an index entry (none for None)."""
    if links is None:
        return ()
    return (links,) if isinstance(links, str) else links


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
class SpanExtra:
    """What few spans have: a span without any of it keeps none (72 B less)."""

    derived_from: tuple[str, ...] = ()
    surfaces: tuple[tuple[StoredKey, str], ...] = ()
    protected: bool = False
    poisoned: bool = False
    bound_query: str | None = None
    """The ``query_sha256`` of the span's bound score: most scores are of no query."""


_NO_EXTRA = SpanExtra()
"""What a span without an extra reads (never written: a span writes its own)."""


class SpanState:
    """What the engine knows of one live span (hashes only, never text).

    The indexes that order spans hold the span itself and read its place live
    (:data:`~spanguard.streams.engine.referent_index.order_of`), its bound score is four
    of its fields (:attr:`bound` reads them as a :class:`BoundScore`), and the fields
    few spans have (lineage, surfaces, the two flags, the bound score's query) are in one
    optional :class:`SpanExtra`, and the text digest and bound score id are one bytes
    object (:func:`pack_head`): a span is 15 slots, 152 B, where a slot per field and a
    bound score object cost 184 + 72. Changed only through :class:`SessionState`, which
    keeps the indexes in step.
    """

    __slots__ = (
        "added_seq",
        "answers",
        "arrival",
        "bound_score",
        "bound_seq",
        "extra",
        "head",
        "holds",
        "made",
        "mentions",
        "position",
        "role",
        "span_id",
        "stale_rewrites",
        "tokens",
    )

    def __init__(
        self,
        span_id: str,
        text_digest: Digest,
        tokens: int,
        position: int,
        arrival: int,
        added_seq: int,
        derived_from: tuple[str, ...] = (),
        stale_rewrites: int = 0,
        poisoned: bool = False,
        bound: BoundScore | None = None,
        holds: Holds = (),
        mentions: tuple[Mention, ...] = (),
        surfaces: tuple[tuple[StoredKey, str], ...] = (),
        role: str | None = None,
        protected: bool = False,
        calls: tuple[str, ...] = (),
        answers: str | None = None,
    ) -> None:
        self.span_id = share_id(span_id)
        self.head = pack_head(text_digest, None)
        """The span's text digest and its bound score's id, one object
        (:func:`pack_head`; read them as :attr:`text_digest` and :attr:`bound_id`)."""
        self.tokens = shared_int(tokens)
        self.position = shared_int(position)
        """The span's place in the context, as the harness numbered it (written in place
        by a rewrite that keeps the order: see :meth:`SessionState.reshape`)."""
        self.arrival = shared_int(arrival)
        """The span's arrival number in its session: unique among them, it breaks ties of
        position in the context order, and names where its state record lives."""
        self.added_seq = shared_int(added_seq)
        self.stale_rewrites = stale_rewrites
        self.bound_score = 0.0
        self.bound_seq = 0
        self.extra: SpanExtra | None = None
        self.bound = bound
        self.holds = holds
        """The entities this span holds, flat: ``(key hash, type, key hash, type, ...)``
        (:data:`~spanguard.streams.engine.referent_index.Holds`)."""
        self.mentions = mentions
        """What the span refers to without holding it."""
        # A handful of roles, each decoded into a string of its own: one object each.
        self.role = None if role is None else sys.intern(role)
        self.made: Links = calls[0] if len(calls) == 1 else calls
        """Contract 1.2: the tool call ids this span makes (set by ``span.added`` only;
        one is kept as itself, :data:`Links`: read them as :attr:`calls`)."""
        self.answers = answers
        """Contract 1.2: the tool call id this span answers. Spans sharing a call id, as
        its maker or an answer, are one tool pair group."""
        extra = SpanExtra(derived_from, surfaces, protected, poisoned, self.bound_query)
        self.extra = None if extra == _NO_EXTRA else extra

    def _fields(self) -> tuple[object, ...]:
        extra = self.extra
        return (
            self.span_id,
            self.text_digest,
            self.tokens,
            self.position,
            self.arrival,
            self.added_seq,
            self.stale_rewrites,
            self.bound_id,
            self.bound_score,
            self.bound_seq,
            self.holds,
            self.mentions,
            self.role,
            self.calls,
            self.answers,
            _NO_EXTRA if extra is None else extra,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SpanState):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __repr__(self) -> str:
        return f"SpanState{self._fields()!r}"

    @property
    def text_digest(self) -> Digest:
        """The sha256 of the span's text as 32 bytes (:func:`to_digest`; hex:
        :attr:`text_sha256`). Setting it keeps the bound score's id: a caller that
        gives a span a new text unbinds it."""
        head = self.head
        return head[1:33] if head[0] & _RAW else head_digest(head)

    @text_digest.setter
    def text_digest(self, digest: Digest) -> None:
        self.head = pack_head(digest, self.bound_id)

    @property
    def text_sha256(self) -> str:
        """The sha256 of the span's text, in hex."""
        head = self.head
        return head[1:33].hex() if head[0] & _RAW else to_hex(head_digest(head))

    @property
    def scored(self) -> bool:
        """Whether a score is bound to the span (cheaper than reading :attr:`bound_id`)."""
        return bool(self.head[0] & _BOUND)

    @property
    def bound_id(self) -> str | None:
        """The bound score's ``score_id`` (None: no score bound)."""
        return head_score_id(self.head)

    @property
    def bound(self) -> BoundScore | None:
        """The score bound to the span's current text, if any (made on each read: the
        span keeps its fields, 72 B less than an object of them)."""
        score_id = head_score_id(self.head)
        if score_id is None:
            return None
        return BoundScore(
            score_id, self.bound_score, self.bound_query, self.text_digest, self.bound_seq
        )

    @bound.setter
    def bound(self, bound: BoundScore | None) -> None:
        # A bound score is always of the span's current text (a new text unbinds it):
        # its digest is the span's own.
        if bound is not None:
            self.bind_score(bound.score_id, bound.score, bound.query_sha256, bound.bound_seq)
            return
        if self.head[0] & _BOUND:
            self.head = pack_head(head_digest(self.head), None)
        self.bound_score, self.bound_seq = 0.0, 0
        if self.extra is not None:
            self.extra.bound_query = None

    def bind_score(self, score_id: str, score: float, query: str | None, seq: int) -> None:
        """Bind a score to the span's current text (:attr:`bound` without the object)."""
        head = self.head
        if head[0] & _RAW:
            sid = score_id.encode("utf-8", "surrogatepass")
            self.head = b"".join((_RAW_BOUND, head[1:33], sid))
        else:
            self.head = pack_head(head_digest(head), score_id)
        self.bound_score = score
        self.bound_seq = shared_int(seq)
        if query is not None:
            self._extra().bound_query = query
        elif self.extra is not None:
            self.extra.bound_query = None

    @property
    def bound_query(self) -> str | None:
        """The ``query_sha256`` of the bound score (None: no score, or of no query)."""
        extra = self.extra
        return None if extra is None else extra.bound_query

    @property
    def derived_from(self) -> tuple[str, ...]:
        """The spans this one was written from."""
        extra = self.extra
        return () if extra is None else extra.derived_from

    @property
    def surfaces(self) -> tuple[tuple[StoredKey, str], ...]:
        """(key hash, surface) of what it holds, only with ``emit_surfaces``."""
        extra = self.extra
        return () if extra is None else extra.surfaces

    @property
    def protected(self) -> bool:
        """Contract 1.2: never evicted, never rewritten (set by ``span.added`` only)."""
        extra = self.extra
        return extra is not None and extra.protected

    @property
    def poisoned(self) -> bool:
        """Rewritten ``poisoned_at`` times without a new score (``POISONED_SPAN``)."""
        extra = self.extra
        return extra is not None and extra.poisoned

    @property
    def calls(self) -> tuple[str, ...]:
        """Contract 1.2: the tool call ids this span makes."""
        made = self.made
        return (made,) if isinstance(made, str) else made

    @property
    def call_ids(self) -> tuple[str, ...]:
        """Every call id that links this span to others: made or answered."""
        made, answers = self.made, self.answers
        if isinstance(made, str):
            return (made,) if answers is None else (made, answers)
        return made if answers is None else (*made, answers)

    def _extra(self) -> SpanExtra:
        """The span's own extra, made when it needs one."""
        extra = self.extra
        if extra is None:
            extra = self.extra = SpanExtra()
        return extra


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
"""A ranked span's place in its ranking: ``(bound score, position, span id)``."""


def rank_key(span: SpanState) -> ScoreKey:
    """Where ``span`` ranks among its query's bound scores (lowest first): a ranking
    holds the spans themselves, sorted by this key, and not a tuple of it a span (64 B
    a ranked span). Read live: a ranking is rebuilt whenever positions move
    (:meth:`SessionState.reindex`), and a span leaves its ranking before its score
    changes."""
    return (span.bound_score, span.position, span.span_id)


bound_score = attrgetter("bound_score")
"""A ranked span's score (a C-level key: bisecting on it costs no Python call a step)."""


def rank_place(ranked: list[SpanState], span: SpanState) -> int:
    """Where ``span`` goes in (or is in) ``ranked``: ``bisect_left`` by :func:`rank_key`.

    Bisected on the score first, which is C-level; :func:`rank_key` (a Python call a
    step) decides only among equal scores, which real scores seldom are."""
    score = span.bound_score
    at = bisect_left(ranked, score, key=bound_score)
    if at == len(ranked) or ranked[at].bound_score != score:
        return at
    ties = bisect_right(ranked, score, at, key=bound_score)
    return bisect_left(ranked, rank_key(span), at, ties, key=rank_key)


class ChangeLog(Protocol):
    """Who is told which spans changed, by arrival number (persistence's change
    tracking, :class:`~spanguard.streams.engine.changes.SessionChanges`, when the engine
    keeps a changelog)."""

    def touch(self, arrival: int) -> None:
        """The span of ``arrival`` changed."""

    def touch_many(self, arrivals: Iterable[int]) -> None:
        """The spans of ``arrivals`` changed."""

    def place(self, arrival: int, span_id: str) -> None:
        """A span took ``arrival``."""

    def vacate(self, arrival: int) -> None:
        """The span of ``arrival`` is forgotten or came back under a new arrival."""


class Held(Protocol):
    """A span's new holdings (``holdings.Holdings``)."""

    @property
    def holds(self) -> Holds: ...
    @property
    def mentions(self) -> tuple[Mention, ...]: ...
    @property
    def surfaces(self) -> tuple[tuple[StoredKey, str], ...]: ...


@dataclass(slots=True)
class Reshape:
    """What a ``context.rewritten`` changes in the live set, as ``rewrite.py`` found it;
    :meth:`SessionState.reshape` applies it."""

    seq: int
    removed: list[str]
    """Spans merged or evicted without a successor, in order."""
    retexted: list[tuple[SpanState, str]]
    """Spans with a new text (its sha256, hex): their bound scores no longer hold."""
    shaped: list[tuple[SpanState, int, tuple[str, ...]]]
    """Every span kept, with its tokens and ``derived_from`` after the rewrite."""
    created: list[SpanState]
    placed: list[tuple[int, SpanState]]
    """Each span live before and after, with its new position, in the new order."""
    holdings: Mapping[str, Held]
    """New holdings, by span id (only spans whose holdings may change)."""
    in_order: bool
    """The spans kept keep their relative order (see :meth:`SessionState.reindex`)."""


_NONE: frozenset[str] = frozenset()
"""The value of a span-id set while it is empty (an empty set costs 216 B a session,
and most sessions never have a stale, poisoned or protected span)."""


@dataclass(slots=True)
class SessionState:
    """The domain state of one (tenant, session) and the indexes over it.

    The duplicate window (:mod:`spanguard.streams.engine.dedup`), the change tracking of
    persistence (:mod:`spanguard.streams.engine.changes`) and the markers of ended
    sessions (:mod:`spanguard.streams.engine.markers`) are kept apart; what changes here
    is told to :attr:`changes`, when a changelog is kept. Spans and indexes change only
    through the methods below.
    """

    tenant: str
    session_id: str
    last_seq: int | None = None
    accepted: int = 0
    arrivals: int = 0
    freeze_streak: int = 0
    spans: dict[str, SpanState] = field(default_factory=dict)
    gone: GoneSpans = field(default_factory=GoneSpans)
    """Spans that left the live set, by id (one packed int each, see
    :mod:`~spanguard.streams.engine.gone`)."""
    known_types: frozenset[str] = frozenset()
    """The entity types introduced in the session (shared with other sessions that
    know the same: :func:`~spanguard.streams.engine.holdings.share_strings`)."""
    names: NameBook[StoredKey] = field(default_factory=NameBook)
    """The session's name book, in keyed-hash form (contract 1.2, "Referents")."""
    drift_window: DriftWindow | None = None
    drift_streak: tuple[DriftPoint, ...] = ()
    """The last ``drift_series_points`` points of the current drift streak (a tuple: most
    sessions never drift, and an empty list would cost each 56 B)."""
    drift_consecutive: int = 0
    """Drifting rewrites in a row (the whole streak, however long)."""
    order: list[SpanState] = field(default_factory=list)
    """Live spans in context order (:func:`order_of`; a plain list: a new span mostly
    comes last, and a removal from the middle is one C ``memmove``; a sorted-list object
    costs ~300 B a session even when small)."""
    scores: dict[str | None, list[SpanState]] = field(default_factory=dict)
    """Per query, the ranked spans, sorted by :func:`rank_key` (plain lists too)."""
    stale: AbstractSet[str] = _NONE
    """Live spans with ``stale_rewrites > 0`` that gate (not dropped poisoned ones)."""
    poisoned_pending: AbstractSet[str] = _NONE
    """Poisoned spans waiting to be dropped (``poisoned: drop``)."""
    children: dict[str, Links] = field(default_factory=dict)
    """Span id -> the live spans citing it in ``derived_from`` (:data:`Links`; read it
    with :meth:`children_of`)."""
    referents: ReferentIndex = field(default_factory=ReferentIndex)
    live_tokens: int = 0
    bound_sum: float = 0.0
    bound_count: int = 0
    call_spans: dict[str, Links] = field(default_factory=dict)
    """Tool call id -> the live spans that make or answer it (contract 1.2;
    :data:`Links`, read with :meth:`linked_by`)."""
    protected: frozenset[str] = _NONE
    """Live protected spans (a set shared with the sessions that protect spans of the
    same ids, :func:`~spanguard.streams.engine.holdings.share_strings`; a protected span
    is added and leaves rarely, each time a new set)."""
    newest_ts: datetime | None = None
    """The ``ts`` of the newest event processed (idle expiry, contract 1.2)."""
    thrash_streak: int = 0
    """Thin rewrites in a row, each close to the one before (``COMPACTION_THRASHING``)."""
    last_rewrite_turn: int | None = None
    changes: ChangeLog | None = field(default=None, repr=False, compare=False)
    """Told of every span that changes (None: no changelog is kept)."""

    # -- change tracking ---------------------------------------------------

    def _touch(self, arrival: int) -> None:
        changes = self.changes
        if changes is not None:
            changes.touch(arrival)

    def _touch_all(self, spans: Iterable[SpanState]) -> None:
        changes = self.changes
        if changes is not None:
            changes.touch_many(span.arrival for span in spans)

    # -- span membership -------------------------------------------------

    def next_arrival(self) -> int:
        """The arrival number of a span about to be added or created."""
        self.arrivals += 1
        return self.arrivals

    def add_span(self, span: SpanState) -> None:
        """Make ``span`` live and enter it in every index."""
        self._admit(span)
        self._enter(span)

    def _admit(self, span: SpanState) -> None:
        # Live, by id (the indexes are the caller's): a span that left before and comes
        # back under a new arrival is no longer gone.
        left = self.gone.discard(span.span_id)
        changes = self.changes
        if changes is not None:
            if left is not None:
                changes.vacate(left)
            changes.place(span.arrival, span.span_id)
        self.spans[span.span_id] = span

    def _enter(self, span: SpanState) -> None:
        order = self.order
        if not order or comes_before(order[-1], span):
            order.append(span)  # the common case: a new span comes last
        else:
            insort(order, span, key=order_of)
        self.live_tokens += span.tokens
        extra = span.extra
        if extra is not None:
            for parent in extra.derived_from:
                _link(self.children, parent, span.span_id)
            if extra.protected:
                self.protected = share_strings(self.protected | {span.span_id})
        for call in span.call_ids:
            _link(self.call_spans, call, span.span_id)
        self.referents.add(span)
        self._index_score(span)
        self._track_stale(span)

    def _unlink_calls(self, span: SpanState) -> None:
        for call in span.call_ids:
            _unlink(self.call_spans, call, span.span_id)
        if span.protected:
            remaining = self.protected - {span.span_id}
            self.protected = share_strings(remaining) if remaining else _NONE

    def lineage(self, parents: Iterable[str] | None) -> tuple[str, ...]:
        """``parents`` as a span's ``derived_from``: each id of a live span as that
        span's own string. An event decodes every id into a string of its own, and a
        summary's parents (merged into it, then gone) would otherwise keep a second
        copy of each id for the summary's life (~300 B a simulated session)."""
        if not parents:
            return ()
        spans = self.spans
        return tuple(
            span.span_id if (span := spans.get(p)) is not None else share_id(p) for p in parents
        )

    def call_id(self, call: str) -> str:
        """``call`` as the live spans of its tool pair already hold it (the same string
        object: a result's id would otherwise be a copy of its call's, ~230 B a
        simulated session), or ``call`` itself when none does."""
        linked = self.linked_by(call)
        if not linked:
            return share_id(call)
        return next(held for held in self.spans[linked[0]].call_ids if held == call)

    def children_of(self, span_id: str) -> tuple[str, ...]:
        """The live spans citing ``span_id`` in their ``derived_from``."""
        return members(self.children.get(span_id))

    def linked_by(self, call: str) -> tuple[str, ...]:
        """The live spans that make or answer tool call ``call``."""
        return members(self.call_spans.get(call))

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
                for other in self.linked_by(call):
                    if other not in found:
                        found.add(other)
                        queue.append(self.spans[other])
        return self.in_order(found)

    def in_order(self, span_ids: Iterable[str]) -> list[str]:
        """The live spans of ``span_ids``, in context order (sorted by a C-level key,
        no Python call a span)."""
        spans = self.spans
        ordered = sorted([spans[span_id] for span_id in span_ids], key=order_of)
        return [span.span_id for span in ordered]

    def remove_span(self, span_id: str, seq: int) -> SpanState:
        """Take a live span out of every index and remember it as gone at ``seq``."""
        span = self.spans.pop(span_id)
        _remove(self.order, span)
        self.referents.remove(span)
        self._unindex_score(span)
        self._leave(span, seq)
        return span

    def _leave(self, span: SpanState, seq: int) -> None:
        # What every removal does besides the sorted indexes (and the score sums, which
        # need the poisoned set as it was: callers settle them first).
        span_id = span.span_id
        arrival = span.arrival
        self.live_tokens -= span.tokens
        self._unlink_child(span)
        leaving = (span_id,)
        self.stale = _without(self.stale, leaving)
        self.poisoned_pending = _without(self.poisoned_pending, leaving)
        self.gone.leave(span_id, seq, span.stale_rewrites, arrival, _keys(span))
        self._unlink_calls(span)
        self._touch(arrival)

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
        spans, pending = self.spans, self.poisoned_pending
        departed: list[tuple[str, int, int, tuple[StoredKey, ...]]] = []
        left: list[SpanState] = []
        bound_sum, bound_count, live_tokens = self.bound_sum, self.bound_count, self.live_tokens
        for span_id in span_ids:
            span = spans.pop(span_id)
            left.append(span)
            # In the order of one-by-one removal: the float sum comes out bit-identical.
            if span.head[0] & _BOUND and span_id not in pending:
                bound_sum -= span.bound_score
                bound_count -= 1
            live_tokens -= span.tokens
            if span.extra is not None or span.made or span.answers is not None:
                self._unlink_child(span)
                self._unlink_calls(span)
            # The arrival straight from the order key: the property costs a call a span.
            departed.append((span_id, span.stale_rewrites, span.arrival, _keys(span)))
        self.gone.leave_many(seq, departed)
        changes = self.changes
        if changes is not None:
            changes.touch_many([entry[2] for entry in departed])
        self.bound_sum, self.bound_count, self.live_tokens = bound_sum, bound_count, live_tokens
        leaving = set(span_ids)
        self.stale = _without(self.stale, leaving)
        self.poisoned_pending = _without(pending, leaving)
        self.order = [span for span in self.order if span.span_id not in leaving]
        for query, ranked in list(self.scores.items()):
            kept = [span for span in ranked if span.span_id not in leaving]
            if len(kept) == len(ranked):
                continue
            if kept:
                self.scores[query] = kept
            else:
                del self.scores[query]
        self.referents.remove_many(leaving, left)

    def forget_gone(self, limit: int) -> None:
        """Bound the gone spans: past ``limit`` + ``limit // GONE_SLACK`` of them, forget
        the oldest (by the ``seq`` they left at, then arrival) until ``limit`` remain, and
        mark their records changed. The order is a function of what the changelog holds,
        so a restored session forgets the same spans at the same event. 0: no bound."""
        gone = self.gone
        if not limit or len(gone) <= limit + limit // GONE_SLACK:
            return
        oldest = sorted(gone.items(), key=lambda item: (item[1].seq, item[1].arrival))
        changes = self.changes
        for span_id, left in oldest[: len(gone) - limit]:
            del gone[span_id]
            if changes is not None:
                changes.vacate(left.arrival)

    # -- rewrites --------------------------------------------------------

    def reshape(self, change: Reshape) -> None:
        """Apply what a rewrite changes, then bring every index up to date."""
        for span_id in change.removed:
            self.remove_span(span_id, change.seq)
        spans = self.spans
        index = self.referents
        reheld: list[SpanState] = []
        if change.in_order:
            # Spans whose holdings change leave the referent index at their old place;
            # they come back, at their new one, with their new holdings below.
            for span_id, new in change.holdings.items():
                old = spans.get(span_id)
                if old is not None and (old.holds, old.mentions) != (new.holds, new.mentions):
                    index.remove(old)
                    reheld.append(old)
        touched: list[SpanState] = []
        for span, sha256_hex in change.retexted:
            span.bound = None  # the rankings are rebuilt below
            span.text_digest = to_digest(sha256_hex)  # unbound first: no score id to keep
            touched.append(span)
        for span, tokens, parents in change.shaped:
            if span.tokens != tokens or span.derived_from != parents:
                span.tokens = shared_int(tokens)
                if span.derived_from != parents:
                    span._extra().derived_from = parents
                touched.append(span)
        for span in change.created:
            self._admit(span)
        for position, span in change.placed:
            if span.position != position:
                # Written in place: every index holds the span and reads its place live,
                # and with the order kept each of them stays sorted.
                span.position = shared_int(position)
                touched.append(span)
        for span_id, held in change.holdings.items():
            span = spans[span_id]
            if (span.holds, span.mentions, span.surfaces) != (
                held.holds,
                held.mentions,
                held.surfaces,
            ):
                span.holds, span.mentions = held.holds, held.mentions
                if span.surfaces != held.surfaces:
                    span._extra().surfaces = held.surfaces
                touched.append(span)
        # Only what changed goes to the changelog (a block per changed span).
        self._touch_all(touched)
        if change.in_order:
            for span in change.created:
                insort(self.order, span, key=order_of)
            for span in [*reheld, *change.created]:
                index.add(span)
        self.reindex(in_order=change.in_order)

    # -- scores ----------------------------------------------------------

    def bind(
        self, span: SpanState, score_id: str, score: float, query: str | None, seq: int
    ) -> None:
        """Bind a score to ``span``'s current text (:meth:`SpanState.bind_score`), keeping
        sums and indexes."""
        self._unindex_score(span)
        span.bind_score(score_id, score, query, seq)
        self._index_score(span)
        self._touch(span.arrival)

    def set_counter(self, span: SpanState, value: int) -> None:
        """Set a span's rewrite counter and keep the stale set in step."""
        span.stale_rewrites = value
        self._track_stale(span)
        self._touch(span.arrival)

    def mark_poisoned(self, span: SpanState, drop: bool) -> None:
        """Poison a span; with ``drop`` it stops holding the gate and waits to be dropped."""
        span._extra().poisoned = True
        self._touch(span.arrival)
        if drop:
            self._unindex_score(span)
            self.poisoned_pending = _added(self.poisoned_pending, span.span_id)
            self._track_stale(span)
            self._index_score(span)

    def _gates(self, span: SpanState) -> bool:
        return span.stale_rewrites > 0 and span.span_id not in self.poisoned_pending

    def _track_stale(self, span: SpanState) -> None:
        if self._gates(span):
            self.stale = _added(self.stale, span.span_id)
        elif span.span_id in self.stale:
            self.stale = _without(self.stale, (span.span_id,))

    def _ranked(self, span: SpanState) -> bool:
        return bool(span.head[0] & _BOUND) and span.span_id not in self.poisoned_pending

    def _index_score(self, span: SpanState) -> None:
        if not self._ranked(span):
            return
        ranked = self.scores.get(span.bound_query)
        if ranked is None:
            self.scores[span.bound_query] = [span]
        else:
            ranked.insert(rank_place(ranked, span), span)
        self.bound_sum += span.bound_score
        self.bound_count += 1

    def _unindex_score(self, span: SpanState) -> None:
        if not self._ranked(span):
            return
        ranked = self.scores[span.bound_query]
        at = rank_place(ranked, span)
        if at == len(ranked) or ranked[at] is not span:
            raise ValueError(f"{span.span_id!r} is not in its ranking")
        del ranked[at]
        if not ranked:
            del self.scores[span.bound_query]
        self.bound_sum -= span.bound_score
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
        at = bisect_left(order, order_of(span), key=order_of)
        before = at - 1
        while before >= 0 and order[before].span_id in leaving:
            before -= 1
        if before >= 0:
            found.append(order[before].span_id)
        after = at + 1
        while after < len(order) and order[after].span_id in leaving:
            after += 1
        if after < len(order):
            found.append(order[after].span_id)
        found.extend(p for p in span.derived_from if p in self.spans and p not in leaving)
        found.extend(c for c in self.children_of(span.span_id) if c not in leaving)
        return found

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
        ranked: dict[str | None, list[SpanState]] = {}
        stale: set[str] = set()
        children: dict[str, Links] = {}
        call_spans: dict[str, Links] = {}
        protected: set[str] = set()
        live_tokens = 0
        bound_sum = 0.0
        bound_count = 0
        for span in spans:
            live_tokens += span.tokens
            span_id = span.span_id
            extra = span.extra
            if extra is not None:
                for parent in extra.derived_from:
                    _link(children, parent, span_id)
                if extra.protected:
                    protected.add(span_id)
            if span.head[0] & _BOUND and span_id not in pending:
                ranked.setdefault(span.bound_query, []).append(span)
                bound_sum += span.bound_score
                bound_count += 1
            if span.stale_rewrites > 0 and span_id not in pending:
                stale.add(span_id)
        for span in spans:
            for call in span.call_ids:
                _link(call_spans, call, span.span_id)
        if not in_order:
            self.order = sorted(spans, key=order_of)
            self.referents = ReferentIndex.build(spans)
        self.scores = {query: sorted(spans, key=rank_key) for query, spans in ranked.items()}
        self.stale = stale or _NONE
        self.children = children
        self.call_spans = call_spans
        self.protected = share_strings(frozenset(protected)) if protected else _NONE
        self.live_tokens = live_tokens
        self.bound_sum = bound_sum
        self.bound_count = bound_count


def _added(members: AbstractSet[str], member: str) -> AbstractSet[str]:
    """``members`` with ``member`` in it: the set itself, or a new one for the empty
    placeholder."""
    if isinstance(members, set):
        members.add(member)
        return members
    return {member}


def _without(members: AbstractSet[str], leaving: Iterable[str]) -> AbstractSet[str]:
    """``members`` without ``leaving``: the set itself, changed, or the empty placeholder
    once nothing is left (an emptied set keeps its 216 B)."""
    if isinstance(members, set):
        members.difference_update(leaving)
        if not members:
            return _NONE
    return members


def _remove(order: list[SpanState], span: SpanState) -> None:
    """Take ``span`` out of the context order, which holds it."""
    at = bisect_left(order, order_of(span), key=order_of)
    if at == len(order) or order[at] is not span:
        raise ValueError(f"{span.span_id!r} is not in the context order")
    del order[at]


def _link(index: dict[str, Links], name: str, member: str) -> None:
    """Enter ``member`` under ``name`` in a one-to-few index (once)."""
    links = index.get(name)
    if links is None:
        index[name] = member
    elif isinstance(links, str):
        if links != member:
            index[name] = (links, member)
    elif member not in links:
        index[name] = (*links, member)


def _unlink(index: dict[str, Links], name: str, member: str) -> None:
    """Take ``member`` out from under ``name``; a name with no member left leaves."""
    found = members(index.get(name))
    if member in found:
        kept = tuple(m for m in found if m != member)
        if not kept:
            del index[name]
        else:
            index[name] = kept[0] if len(kept) == 1 else kept


def _keys(span: SpanState) -> tuple[StoredKey, ...]:
    """The distinct keys a span holds, in order."""
    holds = span.holds
    # Most spans hold nothing or one key: no slice, no dict (run on every removal).
    if len(holds) <= 2:
        return (holds[0],) if holds else ()
    return tuple(dict.fromkeys(holds[::2]))
