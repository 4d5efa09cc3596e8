"""One session's spans as the harness sees them, and the contract events that describe them.

:class:`SpanTracker` is pure (no I/O): it assigns ``seq``, event ids, request
and rewrite ids, hashes text, extracts referents with the service's own
extractor, remembers the scores it reported, and turns a new message list into
a ``context.rewritten`` snapshot whose diff (modified / created / merged /
removed) it computes itself, so ``declared_modified`` and
``scores_invalidated`` are right.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypedDict, Unpack

from schemas import (
    ContextRewritten,
    EvictionPolicy,
    EvictionRequested,
    MentionIn,
    Referent,
    ScoreIn,
    ScoresComputed,
    SessionClosed,
    SnapshotEntry,
    SpanAdded,
    text_sha256,
)
from streams.engine.names import NameBook
from streams.engine.referents import extract
from streams.sdk.messages import Message, TokenCounter, approximate_tokens

Basis = Literal["score", "recency"]
Clock = Callable[[], datetime]


class EvictionOptions(TypedDict, total=False):
    """The keyword options of an eviction request (``eviction.requested``).

    ``threshold`` / ``keep_top_k``: a policy instead of explicit candidates;
    ``basis``: rank by ``"score"`` (the default) or ``"recency"``; ``query``:
    the text the scores were computed for (only its hash is sent).
    """

    threshold: float | None
    keep_top_k: int | None
    basis: Basis
    query: str | None


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class TrackedSpan:
    """A live span: its hash and token count (the text itself is not kept)."""

    span_id: str
    sha256: str
    tokens: int
    role: str | None = None
    derived_from: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RewriteDiff:
    """What a rewrite did, computed by comparing hashes with the live spans."""

    unchanged: tuple[str, ...]
    modified: tuple[str, ...]
    created: tuple[str, ...]
    merged: tuple[str, ...]
    """Removed, and named in a created span's ``derived_from``."""
    removed: tuple[str, ...]
    """Removed with no successor: the service reports these as ``UNGATED_EVICTION``
    unless an eviction decision committed them first."""
    invalidated: tuple[str, ...]
    """Score ids the snapshot declares invalid."""
    kept_scores: tuple[str, ...]
    """Score ids of modified or merged spans that were NOT invalidated (stale)."""


@dataclass(slots=True)
class _Referents:
    introduces: list[Referent] | None
    mentions: list[MentionIn] | None


@dataclass(frozen=True, slots=True)
class FoundReferents:
    """What a harness's own extractor found in one text (for instance its NER model):
    entities the text introduces or repeats, and what it refers to (a key, or a type
    for an anaphor)."""

    introduces: Sequence[Referent] = ()
    mentions: Sequence[MentionIn] = ()


Extractor = Callable[[str], FoundReferents]
"""A harness's own referent extractor: a message's text in, :class:`FoundReferents`
out. Its findings are sent with every message, beside the built-in extractor's (or
the service's, when the text is sent)."""


@dataclass(slots=True)
class SpanTracker:
    """The harness-side state of one (tenant, session)."""

    tenant: str
    session_id: str
    token_counter: TokenCounter = approximate_tokens
    send_text: bool = False
    extract_referents: bool = True
    extractor: Extractor | None = None
    """The harness's own extractor (see :data:`Extractor`), used with the built-in one."""
    next_seq: int = 0
    clock: Clock = _utc_now
    turn: int = 0
    live: dict[str, TrackedSpan] = field(default_factory=dict)
    """Live spans in context order."""
    known_types: set[str] = field(default_factory=set)
    book: NameBook = field(default_factory=NameBook)
    """The session's name book, as the built-in extractor keeps it (raw: client side)."""
    bound: dict[str, tuple[str, str]] = field(default_factory=dict)
    """span id -> (score id, hash scored) of the latest score reported for its current text."""
    _next_position: int = 0
    _uid: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _counter: int = 0

    # -- ids and envelope -------------------------------------------------

    @property
    def last_seq(self) -> int | None:
        """The ``seq`` of the last event built, or None before the first."""
        return self.next_seq - 1 if self.next_seq > 0 else None

    def new_id(self, kind: str) -> str:
        """A fresh id, unique across processes (a session resumed elsewhere gets new ones)."""
        self._counter += 1
        return f"{kind}-{self._uid}-{self._counter}"

    def _envelope(self, type_: str) -> dict[str, object]:
        seq = self.next_seq
        self.next_seq += 1
        return {
            "type": type_,
            "schema_version": 1,
            "event_id": f"ev-{self._uid}-{seq}",
            "session_id": self.session_id,
            "tenant": self.tenant,
            "seq": seq,
            "turn": self.turn,
            "ts": self.clock(),
        }

    # -- referents --------------------------------------------------------

    def _referents(self, text: str) -> _Referents:
        introduces: dict[tuple[str, str], None] = {}
        mentions: dict[tuple[str | None, str | None], MentionIn] = {}
        if self.extractor is not None:
            own = self.extractor(text)
            introduces.update(((r.key, r.type), None) for r in own.introduces)
            mentions.update(((m.key, m.type), m) for m in own.mentions)
        if self.extract_referents and not self.send_text:
            # Without text the service cannot extract: the built-in extractor runs here,
            # with the session's name book, exactly as the service would run it.
            found = extract(text, self.known_types, self.book)
            introduces.update(((i.key, i.type), None) for i in found.identifiers)
            introduces.update(((n.key, n.type), None) for n in found.names)
            for anaphor in found.anaphors:
                mentions.setdefault((None, anaphor.type), MentionIn(type=anaphor.type))
        return _Referents(
            [Referent(key=k, type=t) for k, t in introduces] or None,
            list(mentions.values()) or None,
        )

    def _learn(self, referents: _Referents) -> None:
        self.known_types.update(r.type for r in referents.introduces or ())

    def _learn_text(self, text: str) -> None:
        # With send_text the service extracts; the tracker still learns the types and
        # names so that what it sends later without text would agree.
        found = extract(text, self.known_types, self.book)
        self.known_types.update(i.type for i in found.identifiers)
        self.known_types.update(n.type for n in found.names)

    def tokens_of(self, message: Message) -> int:
        """The message's own count, else the session's token counter on its text."""
        return message.tokens if message.tokens is not None else self.token_counter(message.text)

    # -- events -----------------------------------------------------------

    def added(self, message: Message) -> SpanAdded:
        """``span.added`` for a message entering the context (after the live ones).

        Raises:
            ValueError: When the message's id is already live.
        """
        if message.id in self.live:
            raise ValueError(f"span {message.id!r} is already live; a change is a rewrite")
        sha = text_sha256(message.text)
        tokens = self.tokens_of(message)
        referents = self._referents(message.text)
        event = SpanAdded.model_validate(
            {
                **self._envelope("span.added"),
                "span_id": message.id,
                "position": self._next_position,
                "tokens": tokens,
                "role": message.role,
                "text": message.text if self.send_text else None,
                "text_sha256": sha,
                "derived_from": list(message.derived_from) or None,
                "introduces": referents.introduces,
                "mentions": referents.mentions,
            }
        )
        self._learn(referents)
        if self.send_text:
            self._learn_text(message.text)
        self._next_position += 1
        self.live[message.id] = TrackedSpan(
            message.id, sha, tokens, message.role, message.derived_from
        )
        return event

    def scored(
        self, scores: Mapping[str, float], scorer: str, query: str | None = None
    ) -> ScoresComputed:
        """``scores.computed`` for live spans (span id -> score), each bound to the
        hash of the span's current text.

        Raises:
            ValueError: For a span that is not live (a score needs the text it scored).
        """
        query_sha = text_sha256(query) if query is not None else None
        items: list[ScoreIn] = []
        for span_id, value in scores.items():
            span = self.live.get(span_id)
            if span is None:
                raise ValueError(f"span {span_id!r} is not live: nothing to score")
            score_id = self.new_id("score")
            items.append(
                ScoreIn(
                    score_id=score_id,
                    span_id=span_id,
                    score=value,
                    text_sha256=span.sha256,
                    query_sha256=query_sha,
                )
            )
            self.bound[span_id] = (score_id, span.sha256)
        return ScoresComputed.model_validate(
            {**self._envelope("scores.computed"), "scorer": scorer, "scores": items}
        )

    def rewritten(
        self,
        messages: Sequence[Message],
        *,
        invalidate_scores: bool | Iterable[str] = True,
        base_seq: int | None = None,
    ) -> tuple[ContextRewritten, RewriteDiff]:
        """``context.rewritten`` whose snapshot is ``messages`` (the complete new context).

        Lineage is each message's ``derived_from``. ``invalidate_scores``: True
        invalidates the scores of every modified or merged span (the healthy
        default), False none (a harness that keeps its old scores: the service
        answers ``REWRITE_WITHOUT_INVALIDATION``), or the score ids to invalidate.
        ``base_seq`` defaults to the last event built before this one.
        Does not change the tracker (see :meth:`commit_rewrite`).
        """
        diff, entries = self._diff(messages, invalidate_scores)
        base = base_seq if base_seq is not None else self.last_seq
        event = ContextRewritten.model_validate(
            {
                **self._envelope("context.rewritten"),
                "rewrite_id": self.new_id("rw"),
                "context": entries,
                "declared_modified": list(diff.modified),
                "scores_invalidated": list(diff.invalidated),
                "base_seq": base,
            }
        )
        return event, diff

    def preview_rewrite(
        self, messages: Sequence[Message], *, invalidate_scores: bool | Iterable[str] = True
    ) -> tuple[ContextRewritten, RewriteDiff]:
        """The event :meth:`rewritten` would build, without using up a ``seq`` or an id."""
        saved = (self.next_seq, self._counter, set(self.known_types))
        try:
            return self.rewritten(messages, invalidate_scores=invalidate_scores)
        finally:
            self.next_seq, self._counter, self.known_types = saved

    def commit_rewrite(self, messages: Sequence[Message], diff: RewriteDiff) -> None:
        """Make ``messages`` the live context after :meth:`rewritten`'s event was sent."""
        old = self.live
        self.live = {}
        for message in messages:
            before = old.get(message.id)
            sha = text_sha256(message.text)
            if before is not None and before.sha256 == sha:
                self.live[message.id] = before
                continue
            self.live[message.id] = TrackedSpan(
                message.id, sha, self.tokens_of(message), message.role, message.derived_from
            )
        for span_id in (*diff.modified, *diff.merged, *diff.removed):
            self.bound.pop(span_id, None)
        self._next_position = max(self._next_position, len(messages))

    def eviction(
        self, candidates: Sequence[str] | None = None, **options: Unpack[EvictionOptions]
    ) -> EvictionRequested:
        """``eviction.requested`` for ``candidates`` or a policy (exactly one).

        Raises:
            ValueError: When neither or both are given (the contract's rule).
            TypeError: For an option :class:`EvictionOptions` does not name.
        """
        unknown = options.keys() - EvictionOptions.__optional_keys__
        if unknown:  # as a misspelt keyword argument would
            raise TypeError(f"unexpected options: {', '.join(sorted(unknown))}")
        threshold = options.get("threshold")
        keep_top_k = options.get("keep_top_k")
        query = options.get("query")
        policy = None
        if threshold is not None or keep_top_k is not None:
            policy = EvictionPolicy(threshold=threshold, keep_top_k=keep_top_k)
        return EvictionRequested.model_validate(
            {
                **self._envelope("eviction.requested"),
                "request_id": self.new_id("req"),
                "candidates": list(candidates) if candidates is not None else None,
                "policy": policy,
                "basis": options.get("basis", "score"),
                "query_sha256": text_sha256(query) if query is not None else None,
            }
        )

    def evicted(self, span_ids: Iterable[str]) -> None:
        """Forget spans a decision committed or dropped."""
        for span_id in span_ids:
            self.live.pop(span_id, None)
            self.bound.pop(span_id, None)

    def closed(self) -> SessionClosed:
        """``session.closed``."""
        return SessionClosed.model_validate(self._envelope("session.closed"))

    # -- the diff -----------------------------------------------------------

    def _diff(
        self, messages: Sequence[Message], invalidate_scores: bool | Iterable[str]
    ) -> tuple[RewriteDiff, list[SnapshotEntry]]:
        seen: set[str] = set()
        unchanged: list[str] = []
        modified: list[str] = []
        created: list[str] = []
        successors: set[str] = set()
        entries: list[SnapshotEntry] = []
        for message in messages:
            if message.id in seen:
                raise ValueError(f"message id {message.id!r} appears twice in the new context")
            seen.add(message.id)
            sha = text_sha256(message.text)
            before = self.live.get(message.id)
            changed = before is None or before.sha256 != sha
            if before is None:
                created.append(message.id)
                successors.update(message.derived_from)
            elif changed:
                modified.append(message.id)
            else:
                unchanged.append(message.id)
            entries.append(self._entry(message, sha, with_content=changed))
        gone = [span_id for span_id in self.live if span_id not in seen]
        merged = tuple(s for s in gone if s in successors)
        removed = tuple(s for s in gone if s not in successors)
        broken = [s for s in (*modified, *merged) if s in self.bound]
        if invalidate_scores is True:
            invalidated = [self.bound[s][0] for s in broken]
        elif invalidate_scores is False:
            invalidated = []
        else:
            invalidated = list(invalidate_scores)
        kept = tuple(self.bound[s][0] for s in broken if self.bound[s][0] not in invalidated)
        diff = RewriteDiff(
            unchanged=tuple(unchanged),
            modified=tuple(modified),
            created=tuple(created),
            merged=merged,
            removed=removed,
            invalidated=tuple(invalidated),
            kept_scores=kept,
        )
        return diff, entries

    def _entry(self, message: Message, sha: str, *, with_content: bool) -> SnapshotEntry:
        tokens = self.tokens_of(message)
        if not with_content:
            return SnapshotEntry(span_id=message.id, tokens=tokens, text_sha256=sha)
        referents = self._referents(message.text)
        self._learn(referents)
        return SnapshotEntry(
            span_id=message.id,
            tokens=tokens,
            text=message.text if self.send_text else None,
            text_sha256=sha,
            derived_from=list(message.derived_from) or None,
            introduces=referents.introduces,
            mentions=referents.mentions,
        )
