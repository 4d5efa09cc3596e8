"""A session as plain dicts, and the contract's binding rules recomputed by scans.

Nothing here is incremental: every question (who binds a key, what an anaphor
refers to, what is adjacent) is answered by scanning the live spans again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from spanguard.streams.reference.extract import Mention, NameBook, Referents, copy_book

REWRITE_OF_REWRITE_AT = 2
"""The contract's default: a counter reaching 2 raises ``REWRITE_OF_REWRITE``."""
POISONED_AT = 3
"""The contract's default: a counter reaching 3 poisons the span (``drop``)."""
DEDUP_WINDOW = 10_000
"""The contract's default count window of accepted event ids."""


@dataclass(slots=True)
class Bound:
    """A score bound to a span's current text by a ``scores.computed`` pass."""

    score_id: str
    value: float
    query: str | None
    seq: int


@dataclass(slots=True)
class Span:
    """A live span: where it stands, its content hash, its counter, its score."""

    span_id: str
    position: int
    arrival: int
    text_hash: str
    tokens: int
    derived_from: tuple[str, ...]
    counter: int
    score: Bound | None
    referents: Referents
    added_seq: int
    role: str | None = None
    protected: bool = False
    """Contract 1.2: kept verbatim (set by ``span.added`` only)."""
    calls: tuple[str, ...] = ()
    """Contract 1.2: the tool call ids this span makes (set by ``span.added`` only)."""
    answers: str | None = None
    """Contract 1.2: the tool call id this span answers (set by ``span.added`` only)."""

    @property
    def call_ids(self) -> frozenset[str]:
        """Every call id that links this span to others, made or answered."""
        return frozenset(self.calls) | ({self.answers} if self.answers is not None else set())

    @property
    def order(self) -> tuple[int, int]:
        """Order in the context: position, ties by arrival."""
        return (self.position, self.arrival)


@dataclass(slots=True)
class Gone:
    """A span that left the live set: its last counter, the ``seq`` it left at and
    the keys it held then (contract 1.2: a later summary of it is measured on them)."""

    counter: int
    seq: int
    keys: frozenset[str] = frozenset()


@dataclass(slots=True)
class Session:
    """Everything the contract makes a session remember."""

    spans: dict[str, Span] = field(default_factory=dict)
    gone: dict[str, Gone] = field(default_factory=dict)
    known_types: set[str] = field(default_factory=set)
    names: NameBook[str] = field(default_factory=NameBook)
    """The name book (contract 1.2): every name the session's texts introduced, raw."""
    last_seq: int | None = None
    recent_ids: list[str] = field(default_factory=list)
    arrivals: int = 0
    drift_before: tuple[float | None, int] | None = None
    drift_run: int = 0
    freezes: int = 0
    thrash_run: int = 0
    """Thin rewrites in a row, each close to the one before (contract 1.2)."""
    last_rewrite_turn: int | None = None

    def clone(self) -> Session:
        """An independent copy (a planner tries events on a copy first)."""
        return Session(
            spans={span_id: replace(span) for span_id, span in self.spans.items()},
            gone=dict(self.gone),
            known_types=set(self.known_types),
            names=copy_book(self.names),
            last_seq=self.last_seq,
            recent_ids=list(self.recent_ids),
            arrivals=self.arrivals,
            drift_before=self.drift_before,
            drift_run=self.drift_run,
            freezes=self.freezes,
            thrash_run=self.thrash_run,
            last_rewrite_turn=self.last_rewrite_turn,
        )

    def ordered(self) -> list[Span]:
        """The live spans in context order."""
        return sorted(self.spans.values(), key=lambda span: span.order)

    def leave(self, span_id: str, seq: int) -> None:
        """Take ``span_id`` out of the live set, remembering its counter."""
        span = self.spans.pop(span_id)
        self.gone[span_id] = Gone(span.counter, seq, span.referents.keys)

    def group(self, span_id: str) -> list[Span]:
        """The live spans linked to ``span_id`` through shared tool call ids, itself
        included, in context order (contract 1.2: a tool pair group)."""
        found = {span_id}
        grown = True
        while grown:
            ids = {call for s in found for call in self.spans[s].call_ids}
            more = {s.span_id for s in self.spans.values() if s.call_ids & ids}
            grown = not more <= found
            found |= more
        return sorted((self.spans[s] for s in found), key=lambda span: span.order)

    def counter_of(self, span_id: str) -> int:
        """The counter of a live or departed span (0 for an unknown id)."""
        if span_id in self.spans:
            return self.spans[span_id].counter
        if span_id in self.gone:
            return self.gone[span_id].counter
        return 0

    def remember(self, event_id: str, window: int = DEDUP_WINDOW) -> None:
        """Put an accepted event id in the duplicate window of the last ``window`` ids."""
        self.recent_ids.append(event_id)
        if len(self.recent_ids) > window:
            del self.recent_ids[0]


def binder(mention: Mention, owner: Span, live: Iterable[Span]) -> Span | None:
    """The span that binds ``mention`` made by ``owner`` (None: unresolved, or
    ``owner`` binds it itself).

    A key: the earliest live span holding it. An anaphor: the latest live span
    strictly before ``owner`` holding an entity of its type.
    """
    spans = list(live)
    if mention.key is not None:
        holders = [span for span in spans if mention.key in span.referents.keys]
        first = min(holders, key=lambda span: span.order, default=None)
        return None if first is None or first is owner else first
    if mention.type is None:
        return None
    earlier = [
        span for span in spans if span.order < owner.order and mention.type in span.referents.types
    ]
    return max(earlier, key=lambda span: span.order, default=None)


def all_mentions(span: Span) -> list[Mention]:
    """The span's mentions: its own, and every key it holds (a span that holds a key
    an earlier span holds mentions it)."""
    implicit = [Mention(key, None) for key in sorted(span.referents.keys)]
    return list(span.referents.mentions) + implicit


def resolved(mention: Mention, owner: Span, live: Iterable[Span]) -> bool:
    """Whether ``mention`` has a live binding: for a key, some live span (``owner``
    included) holds it; for an anaphor, a live span before ``owner`` holds its type."""
    spans = list(live)
    if mention.key is not None:
        return any(mention.key in span.referents.keys for span in spans)
    return binder(mention, owner, spans) is not None
