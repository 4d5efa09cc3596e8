"""The reference model: raw input lines in, the outcomes the contract requires out.

Usage::

    model = ReferenceModel()
    for line in lines:
        outcomes = model.process(line)   # list of Outcome for that input

It follows ``../shared/CONTRACT.md`` with the contract's default configuration
(``poisoned: drop``, no lineage protection, 5% drift tolerance...). Where the
contract leaves a choice, the reading is the one written in
``docs/contract-notes.md``. Taken from those notes before any comparison: the
``seq`` baseline is the highest seen; closed sessions ignore re-deliveries at or
below their last ``seq``; scores bound after ``base_seq`` are not counted in
``REWRITE_WITHOUT_INVALIDATION``; one counter fault per span, the higher one;
a created hash-only entry inherits its live parents' referents; the sources of
a modified span for ballooning include the spans merged into it, and parents
gone before the rewrite are not counted; refusals under ``FREEZE`` are
``STALE_SCORE`` / ``FROZEN`` / ``PINNED``; poisoned candidates are dropped, not
refused; known types include those of evicted spans; a span holding a key an
earlier span holds depends on it. The section "Readings found by the
differential test" lists those the comparison with the engine brought up.

Contract 1.2 readings, where its text leaves room: a call id is split when only
one side of it (its callers, its results) is live after a rewrite that found both
live (a call answered twice keeps its pair while one answer lives); "within N
turns of the rewrite before it" is ``turn - previous turn <= N``; a poisoned span
kept because it is protected or its group stays is refused (``PROTECTED``,
``TOOL_PAIR``) like a pinned one, requested or not; a span held back by its group
is not retained for pins (step 1 counts only protected candidates as retained);
a record's ``faults`` are every fault of its event, sequence and drift included.
"""

from __future__ import annotations

from spanguard.schemas import (
    ContextRewritten,
    EvictionRequested,
    InputEvent,
    ScoresComputed,
    SessionClosed,
    SpanAdded,
)
from spanguard.streams.reference.decode import Refused, read_line
from spanguard.streams.reference.extract import from_harness, from_text
from spanguard.streams.reference.gate import decide
from spanguard.streams.reference.outcome import Fault, Outcome, Rejected
from spanguard.streams.reference.rewrite import counter_faults, list_faults, rewrite
from spanguard.streams.reference.state import DEDUP_WINDOW, POISONED_AT, Bound, Session, Span

DRIFT_TOLERANCE = 0.05
"""The contract's default drift tolerance (relative rise of mean relevance)."""

SessionKey = tuple[str, str]


class ReferenceModel:
    """Every session of a stream, as plain dicts, and the contract's rules."""

    def __init__(self, dedup_window: int = DEDUP_WINDOW) -> None:
        self.dedup_window = dedup_window
        """How many accepted event ids a session remembers (the contract's 10,000)."""
        self.sessions: dict[SessionKey, Session] = {}
        self.closed: dict[SessionKey, int] = {}
        """Closed sessions and the highest ``seq`` they had seen."""

    def clone(self) -> ReferenceModel:
        """An independent copy of every session (events can be tried on it first)."""
        copy = ReferenceModel(self.dedup_window)
        copy.sessions = {key: session.clone() for key, session in self.sessions.items()}
        copy.closed = dict(self.closed)
        return copy

    def process(self, raw: bytes) -> list[Outcome]:
        """The outcomes the contract requires for one input line."""
        event = read_line(raw)
        if isinstance(event, Refused):
            self._advance(event.tenant, event.session_id, event.seq)
            return [Rejected(event.reason)]
        key = (event.tenant, event.session_id)
        if key in self.closed:
            if event.seq <= self.closed[key]:
                return []  # a re-delivery of an event from before the close
            return [Rejected("SESSION_CLOSED")]
        session = self.sessions.get(key) or Session()
        if event.event_id in session.recent_ids:
            return []
        if isinstance(event, SpanAdded) and event.span_id in session.spans:
            self.sessions[key] = session
            self._advance(event.tenant, event.session_id, event.seq)
            return [Rejected("SPAN_EXISTS")]
        self.sessions[key] = session
        outcomes = _check_seq(session, event.seq)
        session.remember(event.event_id, self.dedup_window)
        outcomes.extend(self._apply(key, session, event))
        return list_faults(outcomes)

    def _advance(self, tenant: str | None, session_id: str | None, seq: int | None) -> None:
        """A rejected event with a readable identity still moves the baseline."""
        if tenant is None or session_id is None or seq is None:
            return
        session = self.sessions.get((tenant, session_id))
        if session is not None and session.last_seq is not None:
            session.last_seq = max(session.last_seq, seq)

    def _apply(self, key: SessionKey, session: Session, event: InputEvent) -> list[Outcome]:
        if isinstance(event, SpanAdded):
            return _add(session, event)
        if isinstance(event, ScoresComputed):
            outcomes = _score(session, event)
            return outcomes + _close_drift(session)
        if isinstance(event, ContextRewritten):
            outcomes = _close_drift(session)
            session.drift_before = _measure(session)
            return outcomes + rewrite(session, event)
        if isinstance(event, EvictionRequested):
            return _close_drift(session) + decide(session, event)
        assert isinstance(event, SessionClosed)
        self.closed[key] = session.last_seq if session.last_seq is not None else event.seq
        del self.sessions[key]
        return []


def _check_seq(session: Session, seq: int) -> list[Outcome]:
    """``SEQUENCE_GAP`` / ``OUT_OF_ORDER`` against the highest ``seq`` seen."""
    last = session.last_seq
    outcomes: list[Outcome] = []
    if last is not None and seq > last + 1:
        outcomes.append(Fault("SEQUENCE_GAP", frozenset()))
    elif last is not None and seq <= last:
        outcomes.append(Fault("OUT_OF_ORDER", frozenset()))
    session.last_seq = seq if last is None else max(last, seq)
    return outcomes


def _add(session: Session, event: SpanAdded) -> list[Outcome]:
    referents = from_harness(event.introduces, event.mentions)
    if event.text is not None:
        referents = from_text(event.text, session.known_types, session.names).plus(referents)
    parents = tuple(event.derived_from or ())
    counter = 1 + max(session.counter_of(p) for p in parents) if parents else 0
    session.arrivals += 1
    session.spans[event.span_id] = Span(
        event.span_id,
        event.position,
        session.arrivals,
        event.content_hash,
        event.tokens,
        parents,
        counter,
        None,
        referents,
        event.seq,
        event.role,
        event.protected,
        tuple(dict.fromkeys(event.tool_call_ids or ())),
        event.tool_call_id,
    )
    session.known_types.update(referents.types)
    session.gone.pop(event.span_id, None)
    return counter_faults([(event.span_id, 0, counter)])


def _score(session: Session, event: ScoresComputed) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for score in event.scores:
        span = session.spans.get(score.span_id)
        if span is None or span.counter >= POISONED_AT:
            # Reading (contract-notes): a score for a span that is not live, or that is
            # poisoned and about to be dropped, binds nothing and raises nothing.
            continue
        if not score.text_sha256:
            outcomes.append(Fault("SCORE_PROVENANCE_GAP", frozenset({score.span_id})))
        elif score.text_sha256 != span.text_hash:
            outcomes.append(Fault("STALE_SCORE", frozenset({score.span_id})))
        else:
            span.score = Bound(score.score_id, score.score, score.query_sha256, event.seq)
            span.counter = 0
    return outcomes


def _measure(session: Session) -> tuple[float | None, int]:
    """Mean bound score (None without any) and tokens of the live set."""
    scores = [s.score.value for s in session.spans.values() if s.score is not None]
    tokens = sum(s.tokens for s in session.spans.values())
    return (sum(scores) / len(scores) if scores else None, tokens)


def _close_drift(session: Session) -> list[Outcome]:
    """Close the open drift window of the last rewrite, if any."""
    before = session.drift_before
    if before is None:
        return []
    session.drift_before = None
    mean_before, tokens_before = before
    mean_after, tokens_after = _measure(session)
    drifted = (
        mean_before is not None
        and mean_after is not None
        and mean_after - mean_before > abs(mean_before) * DRIFT_TOLERANCE
        and tokens_after < tokens_before
    )
    if not drifted:
        session.drift_run = 0
        return []
    session.drift_run += 1
    return [Fault("MONOTONIC_DRIFT", frozenset())] if session.drift_run >= 2 else []
