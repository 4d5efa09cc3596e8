"""One session's spans as the harness sees them, and the contract events that describe them.

:class:`SpanTracker` is pure (no I/O): it assigns ``seq``, event ids, request
and rewrite ids, hashes text, extracts referents with the service's own
extractor, remembers the scores it reported, and turns a new message list into
a ``context.rewritten`` snapshot whose diff (modified / created / merged /
removed) it computes itself, so ``declared_modified`` and
``scores_invalidated`` are right.

Contract 1.2: it also knows each live span's tool calls (``tool_call_ids`` /
``tool_call_id``) and protection, decided when the span is added by the
session's :data:`~spanguard.streams.sdk.messages.Protect` policy, and finds, without the
engine, what a proposed snapshot would break (:meth:`SpanTracker.violations`:
a protected span rewritten or left out, a whole tool pair split), by the same
rules as the engine's ``PROTECTED_SPAN_REWRITTEN`` and ``TOOL_PAIR_SPLIT``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypedDict, Unpack

from spanguard.schemas import (
    ContextRewritten,
    EvictionPolicy,
    EvictionRequested,
    FaultKind,
    InputEvent,
    MentionIn,
    Referent,
    ScoreIn,
    ScoresComputed,
    SessionClosed,
    SnapshotEntry,
    SpanAdded,
    text_sha256,
)
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referents import extract
from spanguard.streams.sdk.messages import (
    DEFAULT_PROTECT,
    USER_ROLES,
    Message,
    Protect,
    TokenCounter,
    approximate_tokens,
    check_policy,
    is_protected,
)

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


def _label(word: str | None) -> str | None:
    """A ``strategy`` / ``trigger`` as the contract takes it: 1..128 characters."""
    return word.strip()[:128] or None if word else None


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class TrackedSpan:
    """A live span: its hash and token count (the text itself is not kept), and what
    its ``span.added`` said of it: the tool calls it makes, the call it answers,
    whether it is protected (a span a rewrite created has none of these)."""

    span_id: str
    sha256: str
    tokens: int
    role: str | None = None
    derived_from: tuple[str, ...] = ()
    tool_call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    protected: bool = False
    introduces: tuple[Referent, ...] = ()
    """The referents its last report sent (its ``span.added``, or the rewrite that
    created or modified it), to report it again after a renewal."""
    mentions: tuple[MentionIn, ...] = ()
    text: str | None = None
    """Its text, kept only with ``send_text`` (the text is on the wire anyway)."""


@dataclass(frozen=True, slots=True)
class KnownScore:
    """The latest score reported for a live span's current text (to report it again
    after a renewal)."""

    score_id: str
    scorer: str
    value: float
    text_sha256: str
    query_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Violation:
    """What a proposed snapshot would break, found by the tracker alone.

    ``kind`` is the fault the engine raises for it (``PROTECTED_SPAN_REWRITTEN``
    or ``TOOL_PAIR_SPLIT``); ``span_ids`` the protected span, or the half of the
    split pair that would stay, in context order (as the engine's fault names them);
    ``call_id`` the pair's call id (None for a protected span); ``detail`` says what
    happened, in words.
    """

    kind: FaultKind
    span_ids: tuple[str, ...]
    detail: str
    call_id: str | None = None


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
    protect: Protect = DEFAULT_PROTECT
    """Which messages are protected when they enter the context (see
    :data:`~spanguard.streams.sdk.messages.Protect`); a message's own ``protected`` wins."""
    live: dict[str, TrackedSpan] = field(default_factory=dict)
    """Live spans in context order."""
    known_types: set[str] = field(default_factory=set)
    book: NameBook[str] = field(default_factory=NameBook)
    """The session's name book, as the built-in extractor keeps it (raw: client side)."""
    bound: dict[str, tuple[str, str]] = field(default_factory=dict)
    """span id -> (score id, hash scored) of the latest score reported for its current text."""
    scores: dict[str, KnownScore] = field(default_factory=dict)
    """span id -> that latest score in full (what :meth:`rereport` sends again)."""
    seen_user: bool = False
    """A user message was added already (the next one is not the first)."""
    _next_position: int = 0
    _renewed: tuple[int, int | None] | None = None
    """After :meth:`renew`: (first ``seq`` of the current session id, ``seq`` of the last
    event that reported the context again, or None when there was nothing to report)."""
    _created: dict[str, SnapshotEntry] = field(default_factory=dict)
    """The entries with content of the last :meth:`rewritten` (for :meth:`commit_rewrite`)."""
    _uid: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _counter: int = 0

    def __post_init__(self) -> None:
        self.protect = check_policy(self.protect)

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
        is_user = message.role in USER_ROLES
        protected = is_protected(message, self.protect, first_user=is_user and not self.seen_user)
        calls = tuple(dict.fromkeys(message.tool_call_ids))
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
                "tool_call_ids": list(calls) or None,
                "tool_call_id": message.tool_call_id,
                "protected": protected,
            }
        )
        self._learn(referents)
        if self.send_text:
            self._learn_text(message.text)
        self._next_position += 1
        self.seen_user = self.seen_user or is_user
        self.live[message.id] = TrackedSpan(
            message.id,
            sha,
            tokens,
            message.role,
            message.derived_from,
            calls,
            message.tool_call_id,
            protected,
            tuple(referents.introduces or ()),
            tuple(referents.mentions or ()),
            message.text if self.send_text else None,
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
            self.scores[span_id] = KnownScore(score_id, scorer, value, span.sha256, query_sha)
        return ScoresComputed.model_validate(
            {**self._envelope("scores.computed"), "scorer": scorer, "scores": items}
        )

    def rewritten(
        self,
        messages: Sequence[Message],
        *,
        invalidate_scores: bool | Iterable[str] = True,
        base_seq: int | None = None,
        strategy: str | None = None,
        trigger: str | None = None,
    ) -> tuple[ContextRewritten, RewriteDiff]:
        """``context.rewritten`` whose snapshot is ``messages`` (the complete new context).

        Lineage is each message's ``derived_from``. ``invalidate_scores``: True
        invalidates the scores of every modified or merged span (the healthy
        default), False none (a harness that keeps its old scores: the service
        answers ``REWRITE_WITHOUT_INVALIDATION``), or the score ids to invalidate.
        ``base_seq`` defaults to the last event built before this one.
        ``strategy`` / ``trigger``: the compactor's name and why it ran (contract 1.2,
        echoed in ``context.compacted``). Does not change the tracker (see
        :meth:`commit_rewrite`).
        """
        diff, entries = self._diff(messages, invalidate_scores)
        self._created = {e.span_id: e for e in entries if e.introduces or e.mentions}
        base = self.rebase(base_seq if base_seq is not None else self.last_seq)
        event = ContextRewritten.model_validate(
            {
                **self._envelope("context.rewritten"),
                "rewrite_id": self.new_id("rw"),
                "context": entries,
                "declared_modified": list(diff.modified),
                "scores_invalidated": list(diff.invalidated),
                "base_seq": base,
                "strategy": _label(strategy),
                "trigger": _label(trigger),
            }
        )
        return event, diff

    def preview_rewrite(
        self, messages: Sequence[Message], *, invalidate_scores: bool | Iterable[str] = True
    ) -> tuple[ContextRewritten, RewriteDiff]:
        """The event :meth:`rewritten` would build, without using up a ``seq`` or an id."""
        saved = (self.next_seq, self._counter, set(self.known_types), self._created)
        try:
            return self.rewritten(messages, invalidate_scores=invalidate_scores)
        finally:
            self.next_seq, self._counter, self.known_types, self._created = saved

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
            entry = self._created.get(message.id)
            span = TrackedSpan(
                message.id,
                sha,
                self.tokens_of(message),
                message.role,
                message.derived_from,
                introduces=tuple(entry.introduces or ()) if entry is not None else (),
                mentions=tuple(entry.mentions or ()) if entry is not None else (),
                text=message.text if self.send_text else None,
            )
            if before is not None:  # modified: the span id keeps what span.added said
                span.tool_call_ids = before.tool_call_ids
                span.tool_call_id = before.tool_call_id
                span.protected = before.protected
            self.live[message.id] = span
        for span_id in (*diff.modified, *diff.merged, *diff.removed):
            self.bound.pop(span_id, None)
            self.scores.pop(span_id, None)
        self._created = {}
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
            self.scores.pop(span_id, None)

    # -- tool pairs and protection ------------------------------------------------

    def pairs(self) -> dict[str, tuple[list[str], list[str]]]:
        """call id -> (live spans making the call, live spans answering it), each in
        context order; call ids in the order they first appear."""
        result: dict[str, tuple[list[str], list[str]]] = {}
        for span in self.live.values():
            for call_id in span.tool_call_ids:
                result.setdefault(call_id, ([], []))[0].append(span.span_id)
            if span.tool_call_id is not None:
                result.setdefault(span.tool_call_id, ([], []))[1].append(span.span_id)
        return result

    def tool_groups(self) -> dict[str, tuple[str, ...]]:
        """span id -> its group: the live spans linked to it through shared call ids
        (itself included, in context order). Spans without tool calls are not listed;
        a call whose result has not arrived is a group of one."""
        parent: dict[str, str] = {}

        def root(span_id: str) -> str:
            while parent.setdefault(span_id, span_id) != span_id:
                parent[span_id] = parent[parent[span_id]]
                span_id = parent[span_id]
            return span_id

        for callers, answers in self.pairs().values():
            members = [*callers, *answers]
            for other in members[1:]:
                parent[root(other)] = root(members[0])
        by_root: dict[str, list[str]] = {}
        for span_id in self.live:
            if span_id in parent:
                by_root.setdefault(root(span_id), []).append(span_id)
        return {s: tuple(group) for group in by_root.values() for s in group}

    def protected_ids(self) -> list[str]:
        """Live protected spans, in context order."""
        return [s.span_id for s in self.live.values() if s.protected]

    def violations(self, messages: Sequence[Message]) -> list[Violation]:
        """What the snapshot ``messages`` would break, by the engine's rules (nothing is
        sent and nothing changes): every live protected span it modifies or leaves out
        (``PROTECTED_SPAN_REWRITTEN``), then every call id whose call and a result were
        live and that it leaves with calls but no result live, or results but no call
        (``TOOL_PAIR_SPLIT``).
        """
        after = {m.id: m for m in messages}
        successors: dict[str, str] = {}
        for message in messages:
            if message.id not in self.live:
                for parent in message.derived_from:
                    successors.setdefault(parent, message.id)
        found: list[Violation] = []
        for span in self.live.values():
            if not span.protected:
                continue
            kept = after.get(span.span_id)
            if kept is None:
                into = successors.get(span.span_id)
                how = f"merged into {into!r}" if into else "left out"
            elif text_sha256(kept.text) != span.sha256:
                how = "modified"
            else:
                continue
            detail = f"protected message {span.span_id!r} {how}"
            found.append(Violation(FaultKind.PROTECTED_SPAN_REWRITTEN, (span.span_id,), detail))
        order = list(self.live)
        for call_id, (callers, answers) in self.pairs().items():
            if not callers or not answers:
                continue  # not whole before
            call_live = any(s in after for s in callers)
            answer_live = any(s in after for s in answers)
            if call_live == answer_live:
                continue  # whole, or gone whole (a summary that replaced both halves)
            members = [*callers, *answers]
            live = tuple(sorted((s for s in members if s in after), key=order.index))
            gone = [s for s in members if s not in after]
            half = "call" if answer_live else "result"
            detail = (
                f"tool call {call_id!r} split: its {half} {', '.join(map(repr, gone))} "
                f"would leave without {', '.join(map(repr, live))}"
            )
            found.append(Violation(FaultKind.TOOL_PAIR_SPLIT, live, detail, call_id))
        return found

    # -- renewal (contract 1.2's idle expiry) -----------------------------------

    def renew(self, session_id: str) -> None:
        """Continue under ``session_id`` (the old id expired): ``seq`` goes on from where
        it was (a session's first event may have any ``seq``), so event ids stay unique
        and a ``base_seq`` of the old id can be told from one of the new (:meth:`rebase`).
        Follow with :meth:`rereport`."""
        self.session_id = session_id
        self._next_position = 0
        self._renewed = (self.next_seq, None)

    def rereport(
        self, *, skip_span: str | None = None, skip_scores: Collection[str] = ()
    ) -> list[InputEvent]:
        """The events that report the live context again under the current id: a
        ``span.added`` per live span in context order (its hash, tokens, role, referents,
        tool calls and protection as last reported; the text only with ``send_text``;
        ``derived_from`` only for parents reported before it), then a ``scores.computed``
        per scorer with the spans' latest scores (same score ids). ``skip_span`` /
        ``skip_scores``: what the refused event itself reports (it is re-sent after)."""
        events: list[InputEvent] = []
        reported: set[str] = set()
        for span in self.live.values():
            if span.span_id == skip_span:
                continue
            parents = [p for p in span.derived_from if p in reported]
            events.append(
                SpanAdded.model_validate(
                    {
                        **self._envelope("span.added"),
                        "span_id": span.span_id,
                        "position": self._next_position,
                        "tokens": span.tokens,
                        "role": span.role,
                        "text": span.text if self.send_text else None,
                        "text_sha256": span.sha256,
                        "derived_from": parents or None,
                        "introduces": list(span.introduces) or None,
                        "mentions": list(span.mentions) or None,
                        "tool_call_ids": list(span.tool_call_ids) or None,
                        "tool_call_id": span.tool_call_id,
                        "protected": span.protected,
                    }
                )
            )
            self._next_position += 1
            reported.add(span.span_id)
        by_scorer: dict[str, list[ScoreIn]] = {}
        for span_id, known in self.scores.items():
            scored = self.live.get(span_id)
            if scored is None or span_id not in reported or known.score_id in skip_scores:
                continue
            if known.text_sha256 != scored.sha256:
                continue  # bound to a text the span no longer has
            by_scorer.setdefault(known.scorer, []).append(
                ScoreIn(
                    score_id=known.score_id,
                    span_id=span_id,
                    score=known.value,
                    text_sha256=known.text_sha256,
                    query_sha256=known.query_sha256,
                )
            )
        for scorer, items in by_scorer.items():
            events.append(
                ScoresComputed.model_validate(
                    {**self._envelope("scores.computed"), "scorer": scorer, "scores": items}
                )
            )
        if self._renewed is not None:
            self._renewed = (self._renewed[0], events[-1].seq if events else None)
        return events

    def reenvelope(self, event: InputEvent) -> InputEvent:
        """``event`` (built for the old id) again under the current id, with the next
        ``seq``, a fresh event id and ``ts``; a ``span.added`` takes the next position, a
        ``context.rewritten``'s ``base_seq`` is rebased (:meth:`rebase`). Its other ids
        (span, score, rewrite, request) stay."""
        update = {
            k: v
            for k, v in self._envelope(event.type).items()
            if k not in ("type", "schema_version")
        }
        if isinstance(event, SpanAdded):
            update["position"] = self._next_position
            self._next_position += 1
        elif isinstance(event, ContextRewritten):
            update["base_seq"] = self.rebase(event.base_seq)
        return event.model_copy(update=update)

    def rebase(self, base_seq: int | None) -> int | None:
        """A ``base_seq`` as the current id knows it: one from before the last renewal
        becomes the last event that reported the context again (what the rewriter knew
        is what was reported); others are unchanged."""
        if self._renewed is None or base_seq is None or base_seq >= self._renewed[0]:
            return base_seq
        return self._renewed[1]

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
