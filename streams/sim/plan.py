"""Planning one step of a session on a copy of its state, judged by the reference model.

A step of the agent loop (a turn, a compaction, an eviction, an injection) is a
list of operations (:data:`Op`). :class:`Planner` renders each one as the input
event the harness would publish and feeds it to a copy of the session in the
independent reference model (:mod:`spanguard.streams.reference`, written from the
contract); the outcomes it returns (faults, rejections, decisions, pins) are
what the contract says the event causes. A step is kept only when those are
exactly the faults it means to inject (none for a healthy step). So the truth
comes from what was injected, confirmed by the reference model; the engine is
never called.

:class:`Live` answers the questions the generator asks of the session (what is
live, scored, stale, what binds an anaphor) from the reference model's state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import orjson

from spanguard.schemas import INPUT_ADAPTER, EvictionRequested, FaultKind, RejectReason, text_sha256
from spanguard.streams.engine.trace import SCORER, Json, SessionScript
from spanguard.streams.reference.extract import Mention
from spanguard.streams.reference.gate import requested_spans
from spanguard.streams.reference.model import ReferenceModel
from spanguard.streams.reference.outcome import Decision, Fault, Outcome, Pin, Rejected
from spanguard.streams.reference.state import POISONED_AT, Session, Span, binder
from spanguard.streams.sim.texts import Conversation, Entity, Hold, Text
from spanguard.streams.sim.truth import DeadLetterTruth


@dataclass(slots=True)
class SpanContent:
    """How a span's text is made: its forms, the current one, its entities."""

    role: str
    forms: tuple[str, ...]
    slots: tuple[Entity, ...] = ()
    level: int = 0
    text: str = ""
    folded: bool = False
    """The identifiers are written case-folded (a paraphrase's new surface form)."""

    @property
    def filler(self) -> bool:
        """Holds no entity: nothing can depend on it."""
        return not self.slots


@dataclass(frozen=True, slots=True)
class Record:
    """One line of the session: an event (or the bytes of a malformed record), its
    time in ms since the fleet's epoch, and the rejection it must get, if any."""

    data: Json | bytes
    ms: int
    deadletter: DeadLetterTruth | None = None


@dataclass(slots=True)
class SimState:
    """Everything a plan may change; planning works on a copy."""

    writer: SessionScript
    conversation: Conversation
    start_ms: int
    step_ms: int
    reference: ReferenceModel = field(default_factory=ReferenceModel)
    content: dict[str, SpanContent] = field(default_factory=dict)
    ids: Counter[str] = field(default_factory=Counter)
    last: Record | None = None
    """The last record written (a torn write repeats part of it)."""
    deferred: dict[str, float] = field(default_factory=dict)
    """Scores the harness sends late, with the next turn's pass."""

    def clone(self) -> SimState:
        """A copy that a failed plan can throw away."""
        return SimState(
            writer=self.writer.clone(),
            conversation=self.conversation.clone(),
            start_ms=self.start_ms,
            step_ms=self.step_ms,
            reference=self.reference.clone(),
            content={k: replace(v) for k, v in self.content.items()},
            ids=Counter(self.ids),
            last=self.last,
            deferred=dict(self.deferred),
        )

    @property
    def session(self) -> Session:
        """The reference model's state of this session (empty before its first event)."""
        key = (self.writer.tenant, self.writer.session_id)
        return self.reference.sessions.get(key) or Session()

    @property
    def live(self) -> Live:
        """Queries on the live set."""
        return Live(self.session)


def score_of(span: Span) -> float | None:
    """The span's bound score, or None."""
    return span.score.value if span.score is not None else None


def anaphors_of(span: Span) -> tuple[str, ...]:
    """The types of the anaphors the span makes."""
    return tuple(dict.fromkeys(m.type for m in span.referents.mentions if m.key is None and m.type))


class Live:
    """The live set of a session as the reference model holds it, with the
    questions the generator asks of it."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.spans = session.spans

    def ordered(self) -> list[Span]:
        """Live spans in context order."""
        return self.session.ordered()

    def by_arrival(self) -> list[Span]:
        """Live spans in the order they entered the session."""
        return sorted(self.spans.values(), key=lambda s: s.arrival)

    def poisoned(self) -> set[str]:
        """Poisoned spans waiting to be dropped at the next decision."""
        return {s.span_id for s in self.spans.values() if s.counter >= POISONED_AT}

    def ranked(self) -> list[Span]:
        """Spans with a bound score that a policy may rank, lowest first (contract 1.2:
        never a protected one)."""
        scored = [
            s
            for s in self.spans.values()
            if s.score is not None and s.counter < POISONED_AT and not s.protected
        ]
        return sorted(scored, key=lambda s: (score_of(s), s.position, s.span_id))

    def stale(self) -> set[str]:
        """Spans rewritten since their last bound score (poisoned ones excepted)."""
        return {s.span_id for s in self.spans.values() if 0 < s.counter < POISONED_AT}

    def known_types(self) -> frozenset[str]:
        """Entity types the session introduced so far (anaphors may name them)."""
        return frozenset(self.session.known_types)

    def names(self) -> dict[str, str]:
        """The session's name book as :func:`~spanguard.streams.sim.texts.compose` reads it: the
        key of every name the session's texts introduced -> its type there."""
        return {
            value[0]: value[1]
            for value in self.session.names.entries.values()
            if value is not None and not value[2]
        }

    def mean_before(self) -> float | None:
        """Mean bound score before the last rewrite, while its drift window is open."""
        window = self.session.drift_before
        return window[0] if window is not None else None

    def type_binder(self, type_: str, span: Span) -> Span | None:
        """The span that binds an anaphor of ``type_`` made by ``span``."""
        return binder(Mention(None, type_), span, self.spans.values())

    def group(self, span_id: str) -> set[str]:
        """Contract 1.2: the live spans of ``span_id``'s tool pair group."""
        return {s.span_id for s in self.session.group(span_id)}

    def whole(self, spans: Sequence[str]) -> bool:
        """Whether ``spans`` holds every tool pair group it touches entirely."""
        inside = set(spans)
        return all(self.group(s) <= inside for s in spans if self.spans[s].call_ids)

    def whole_pairs(self) -> list[tuple[str, str]]:
        """(call, result) of every live pair of one call span and one result span
        that form a group of their own, in context order."""
        found = []
        for span in self.ordered():
            if len(span.calls) != 1 or span.answers is not None:
                continue
            group = self.group(span.span_id)
            if len(group) == 2:
                [result] = group - {span.span_id}
                if self.spans[result].answers == span.calls[0]:
                    found.append((span.span_id, result))
        return found

    def protected(self) -> list[str]:
        """Live protected spans, in context order."""
        return [s.span_id for s in self.ordered() if s.protected]

    def next_position(self) -> int:
        """The position after the last live span."""
        return max((s.position for s in self.spans.values()), default=-1) + 1


@dataclass(frozen=True, slots=True)
class NextTurn:
    """The agent loop starts its next turn (no event)."""


@dataclass(frozen=True, slots=True)
class AddOp:
    """A ``span.added``."""

    span_id: str
    text: Text
    role: str
    position: int
    known: frozenset[str]
    derived_from: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    """Contract 1.2: the tool call ids the span makes."""
    answers: str | None = None
    """Contract 1.2: the tool call id the span answers."""
    protected: bool = False


@dataclass(frozen=True, slots=True)
class ScoreOp:
    """A ``scores.computed``: (span id, value, how the hash is sent).

    The hash mode is ``None`` for the current text, ``""`` for no hash, or an
    older text of the span (a score computed against it).
    """

    entries: tuple[tuple[str, float, str | None], ...]
    scorer: str = SCORER


@dataclass(frozen=True, slots=True)
class SnapEntry:
    """One entry of a rewrite's snapshot."""

    span_id: str
    text: Text
    derived_from: tuple[str, ...] | None = None
    claim: tuple[str, float, str | None] | None = None
    known: frozenset[str] | None = None
    """The session's known types when the text was written (None: unchanged)."""


@dataclass(frozen=True, slots=True)
class RewriteOp:
    """A ``context.rewritten``."""

    entries: tuple[SnapEntry, ...]
    declared: tuple[str, ...]
    invalidated: tuple[str, ...]
    base_seq: int | None = None
    strategy: str | None = None
    trigger: str | None = None


@dataclass(frozen=True, slots=True)
class EvictOp:
    """An ``eviction.requested``."""

    mode: str
    candidates: tuple[str, ...] | None = None
    threshold: float | None = None
    keep_top_k: int | None = None
    basis: str = "score"


@dataclass(frozen=True, slots=True)
class GapOp:
    """The harness skips ``k`` sequence numbers (lost events)."""

    k: int


@dataclass(frozen=True, slots=True)
class BadOp:
    """A malformed record that the engine must dead-letter with ``reason``."""

    reason: RejectReason
    span_id: str = ""
    text: str = ""
    position: int = 0


@dataclass(frozen=True, slots=True)
class CloseOp:
    """A ``session.closed``."""


@dataclass(frozen=True, slots=True)
class RedeliverOp:
    """An earlier event delivered again (at-least-once): same bytes, same event id."""

    data: Json


Op = NextTurn | AddOp | ScoreOp | RewriteOp | EvictOp | GapOp | BadOp | CloseOp | RedeliverOp


@dataclass(frozen=True, slots=True)
class TextRecord:
    """A text the engine extracts referents from, with what the generator says it holds
    (tests compare the two with the contract's extractor)."""

    session_id: str
    span_id: str
    text: str
    holds: tuple[Hold, ...]
    anaphors: tuple[str, ...]
    known: frozenset[str]


@dataclass(frozen=True, slots=True)
class EvictionPlan:
    """What the reference decided for one eviction request of the plan."""

    requested: tuple[str, ...]
    pinned: frozenset[str]
    action: str
    committed: tuple[str, ...]
    dropped: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Step:
    """One operation of a plan, the record it wrote and what the reference said."""

    op: Op
    record: Record | None
    outcomes: tuple[Outcome, ...]
    eviction: EvictionPlan | None = None

    @property
    def event_id(self) -> str | None:
        """The record's event id (None for an unreadable record or no record)."""
        data = self.record.data if self.record is not None else None
        if isinstance(data, dict):
            return str(data["event_id"])
        if self.record is not None and self.record.deadletter is not None:
            return self.record.deadletter.event_id
        return None

    def faults(self, kind: str) -> tuple[str, ...]:
        """Span ids the reference's faults of ``kind`` name (sorted)."""
        spans = {
            s for o in self.outcomes if isinstance(o, Fault) and o.kind == kind for s in o.span_ids
        }
        return tuple(sorted(spans))


class Planner:
    """Applies operations to a copy of the session state and collects what the
    reference model says they cause; the session keeps the plan only when the
    faults are the intended ones."""

    def __init__(self, state: SimState) -> None:
        self.state = state.clone()
        self.steps: list[Step] = []
        self.intended: set[tuple[int, str]] = set()

    @property
    def live(self) -> Live:
        """Queries on the planning copy's live set."""
        return self.state.live

    def predicted(self) -> set[tuple[int, str]]:
        """(step, fault kind or ``REJECTED:reason``) the reference reports."""
        found: set[tuple[int, str]] = set()
        for index, step in enumerate(self.steps):
            for outcome in step.outcomes:
                if isinstance(outcome, Fault):
                    found.add((index, outcome.kind))
                elif isinstance(outcome, Rejected):
                    found.add((index, f"REJECTED:{outcome.reason}"))
        return found

    def ok(self) -> bool:
        """True when the reference reports exactly the intended faults, step by step."""
        return self.predicted() == self.intended

    def run(self, op: Op, intend: Sequence[FaultKind] = ()) -> int:
        """Apply ``op``; returns its index in the plan."""
        index = len(self.steps)
        self.intended.update((index, kind.value) for kind in intend)
        if isinstance(op, BadOp):
            self.intended.add((index, f"REJECTED:{op.reason.value}"))
        self.steps.append(self._apply(op))
        return index

    def _apply(self, op: Op) -> Step:
        st = self.state
        writer = st.writer
        if isinstance(op, NextTurn):
            writer.turn += 1
            return Step(op, None, ())
        if isinstance(op, GapOp):
            writer.seq += op.k
            return Step(op, None, ())
        if isinstance(op, BadOp):
            return self._feed(op, self._bad(op))
        if isinstance(op, AddOp):
            st.content[op.span_id].text = op.text.text
            event = writer.add(
                op.span_id,
                op.text.text,
                tokens=op.text.tokens,
                position=op.position,
                role=op.role,
                derived_from=op.derived_from or None,
                tool_call_ids=op.calls or None,
                tool_call_id=op.answers,
                protected=op.protected or None,
            )
        elif isinstance(op, ScoreOp):
            event = score_pass(
                writer,
                [(sid, value, self._scored_text(sid, mode)) for sid, value, mode in op.entries],
                op.scorer,
            )
        elif isinstance(op, RewriteOp):
            event = writer.rewrite(
                [_snapshot_entry(e) for e in op.entries],
                declared_modified=op.declared,
                scores_invalidated=op.invalidated,
                base_seq=op.base_seq,
                strategy=op.strategy,
                trigger=op.trigger,
            )
            for e in op.entries:
                if e.span_id in st.content:
                    st.content[e.span_id].text = e.text.text
        elif isinstance(op, EvictOp):
            event = writer.evict(
                op.candidates,
                threshold=op.threshold,
                keep_top_k=op.keep_top_k,
                basis=op.basis if op.basis != "score" else None,
            )
            return self._evict(op, event)
        elif isinstance(op, RedeliverOp):
            previous = st.last
            assert previous is not None
            return self._feed(op, Record(op.data, previous.ms))
        else:
            assert isinstance(op, CloseOp)
            event = writer.close()
        return self._feed(op, Record(event, self._ms(event)))

    def _scored_text(self, span_id: str, mode: str | None) -> str | None:
        """The text a score was computed against (see :class:`ScoreOp`); None: no hash."""
        if mode is None:
            return self.state.writer.texts.get(span_id, "")
        return mode or None

    def _ms(self, event: Json) -> int:
        return self.state.start_ms + self.state.step_ms * int(event["seq"])

    def _feed(self, op: Op, record: Record) -> Step:
        data = record.data
        line = data if isinstance(data, bytes) else orjson.dumps(data)
        outcomes = tuple(self.state.reference.process(line))
        self.state.last = record
        return Step(op, record, outcomes)

    def _evict(self, op: EvictOp, event: Json) -> Step:
        session = self.state.session
        order = {s.span_id: s.order for s in session.spans.values()}
        request = INPUT_ADAPTER.validate_python(event)
        assert isinstance(request, EvictionRequested)
        requested = tuple(requested_spans(session, request))
        step = self._feed(op, Record(event, self._ms(event)))
        [decision] = [o for o in step.outcomes if isinstance(o, Decision)]
        for span_id in decision.committed | decision.dropped:
            self.state.content.pop(span_id, None)
        plan = EvictionPlan(
            requested=requested,
            pinned=frozenset(o.span_id for o in step.outcomes if isinstance(o, Pin)),
            action=decision.action,
            committed=tuple(s for s in requested if s in decision.committed),
            dropped=tuple(sorted(decision.dropped, key=lambda s: order[s])),
        )
        return replace(step, eviction=plan)

    def _bad(self, op: BadOp) -> Record:
        """A malformed record; the writer's ``seq`` moves on only when it is readable."""
        st = self.state
        writer = st.writer
        reason = op.reason
        tenant, session_id = writer.tenant, writer.session_id
        if reason in (RejectReason.INVALID_JSON, RejectReason.NOT_AN_OBJECT):
            previous = st.last
            assert previous is not None and isinstance(previous.data, dict)
            line = orjson.dumps(previous.data)
            # A torn write of the previous record, or a batch sent as one array.
            raw = (
                line[: len(line) // 2]
                if reason is RejectReason.INVALID_JSON
                else b"[" + line + b"]"
            )
            return Record(raw, previous.ms, DeadLetterTruth(None, None, reason.value, None))
        if reason is RejectReason.NON_FINITE_SCORE:
            event = writer.score((op.span_id, 0.5))
            event["scores"][0]["score"] = "__NAN__"
            raw = orjson.dumps(event).replace(b'"__NAN__"', b"NaN")
            truth = DeadLetterTruth(session_id, tenant, reason.value, str(event["event_id"]))
            return Record(raw, self._ms(event), truth)
        event = writer.add(
            op.span_id,
            op.text,
            tokens=max(1, len(op.text.split())),
            position=op.position,
            role="tool",
        )
        if reason is RejectReason.UNSUPPORTED_SCHEMA_VERSION:
            event["schema_version"] = 2
        elif reason is RejectReason.UNKNOWN_TYPE:
            event["type"] = "span.updated"
        elif reason is RejectReason.MISSING_FIELD:
            del event["tokens"]
        elif reason is RejectReason.INVALID_FIELD:
            event["tokens"] = -1
        elif reason is RejectReason.HASH_MISMATCH:
            event["text_sha256"] = text_sha256(op.text + " (edited)")
        truth = DeadLetterTruth(session_id, tenant, reason.value, str(event["event_id"]))
        return Record(event, self._ms(event), truth)


def score_pass(
    writer: SessionScript,
    entries: Sequence[tuple[str, float, str | None]],
    scorer: str = SCORER,
) -> Json:
    """A ``scores.computed`` pass of ``(span id, value, text)``: each score carries the
    hash of the text it was computed against (no hash when that is None)."""
    if len({span_id for span_id, _, _ in entries}) < len(entries):
        raise ValueError("a scoring pass scores each span once")
    return writer.score(
        *((span_id, value) for span_id, value, _ in entries),
        against={span_id: text for span_id, _, text in entries if text is not None},
        no_hash=[span_id for span_id, _, text in entries if text is None],
        scorer=scorer,
    )


def _snapshot_entry(e: SnapEntry) -> Json:
    item: Json = {"span_id": e.span_id, "text": e.text.text, "tokens": e.text.tokens}
    if e.derived_from is not None:
        item["derived_from"] = list(e.derived_from)
    if e.claim is not None:
        claim: Json = {"score_id": e.claim[0], "score": e.claim[1]}
        if e.claim[2] is not None:
            claim["text_sha256"] = e.claim[2]
        item["score"] = claim
    return item
