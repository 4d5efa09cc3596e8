"""Ground truth of a simulated fleet, and the reference model that produces it.

Two things live here:

* the **truth file** (:class:`FleetTruth`): for every session, whether it is
  healthy, the faults injected into it (``{session_id, tenant, kind,
  at_event_id}``), the dead-letter reasons its malformed records must get, and
  for every eviction request the spans a naive pruner would have destroyed a
  live referent with;
* :class:`ContextModel`, the generator's own knowledge of one session. It is
  written from ``CONTRACT.md``, not from the engine, and it never calls the
  engine: it knows which identifiers and anaphors each span carries because the
  generator put them there. The simulator plans every step on a copy of the
  model, keeps the step only when the faults the model predicts are exactly the
  ones it meant to inject, and reads the "needed referent" truth of an eviction
  request from it. A disagreement between this model and the engine is what
  ``spanguard quality`` measures.

The model assumes the engine's default settings (drift tolerance 5%,
REWRITE_OF_REWRITE at 2, poisoned at 3 and dropped, PRUNING_STALLED every 3
freezes, lineage not protected); the truth file records them.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from schemas import FaultKind, RefusalReason

EMPTY_TEXT_SHA256 = hashlib.sha256(b"").hexdigest()
TRUTH_FORMAT = "spanguard-sim-truth"
TRUTH_VERSION = 1

Hold = tuple[str, str]
"""(key, type): an entity a span holds; the key is the identifier case-folded."""
OrderKey = tuple[int, int, str]
"""(position, arrival, span id): the contract's order of the live context."""
Mention = tuple[Literal["key", "type"], str]
"""A reference a span makes: a key it repeats, or an anaphor's type."""


# --------------------------------------------------------------------------
# The truth file
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FaultTruth:
    """One injected fault: the engine must raise ``kind`` in this session,
    caused by the input event ``at_event_id``."""

    session_id: str
    tenant: str
    kind: str
    at_event_id: str
    injection: str
    """The injection that caused it (a fault-mix name, e.g. ``POISONED_SPAN``)."""
    span_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeadLetterTruth:
    """One malformed record and the ``event.rejected`` reason it must get.

    ``event_id`` is None when the record has no readable identity (broken
    JSON); ``line`` is its 0-based line in the events file (the ``offset`` that
    ``spanguard replay`` gives the rejection), -1 until the fleet is written.
    """

    session_id: str | None
    tenant: str | None
    reason: str
    event_id: str | None
    line: int = -1


@dataclass(frozen=True, slots=True)
class EvictionTruth:
    """One ``eviction.requested`` and what the generator knows about it.

    ``requested``: the spans a naive pruner would evict (the candidates, or the
    policy's selection on bound scores). ``needed``: those among them that bind
    a referent a retained span needs (directly or through another needed
    span): evicting them "would have destroyed a live referent".
    ``expected_*``: the decision the contract prescribes, from the model.
    """

    session_id: str
    tenant: str
    request_id: str
    event_id: str
    mode: str
    basis: str
    requested: tuple[str, ...]
    needed: tuple[str, ...]
    expected_action: str
    expected_committed: tuple[str, ...]
    expected_dropped: tuple[str, ...]


@dataclass(slots=True)
class SessionTruth:
    """Everything known about one simulated session."""

    session_id: str
    tenant: str
    profile: str
    referent_dense: bool
    events: int = 0
    injections: list[str] = field(default_factory=list)
    """Injections placed in this session (fault-mix names)."""
    skipped: list[str] = field(default_factory=list)
    """Injections that found no place before the session ended (nothing injected)."""
    faults: list[FaultTruth] = field(default_factory=list)
    deadletters: list[DeadLetterTruth] = field(default_factory=list)
    evictions: list[EvictionTruth] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """No injected fault and no malformed record."""
        return not self.faults and not self.deadletters


@dataclass(slots=True)
class FleetTruth:
    """The truth file of one ``spanguard simulate`` run."""

    generator: dict[str, Any]
    sessions: list[SessionTruth]
    events_file: str | None = None
    events_lines: int = 0
    events_sha256: str = ""

    def session(self, session_id: str) -> SessionTruth | None:
        """The session with this id, or None."""
        return self._index().get(session_id)

    def _index(self) -> dict[str, SessionTruth]:
        return {s.session_id: s for s in self.sessions}

    def to_json(self) -> bytes:
        """Deterministic JSON (sorted keys, two-space indent, trailing newline)."""
        data: dict[str, Any] = {
            "format": TRUTH_FORMAT,
            "version": TRUTH_VERSION,
            "generator": self.generator,
            "events": {
                "file": self.events_file,
                "lines": self.events_lines,
                "sha256": self.events_sha256,
            },
            "summary": self.summary(),
            "sessions": [_session_json(s) for s in self.sessions],
        }
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"

    def summary(self) -> dict[str, Any]:
        """Counts for people: sessions, healthy ones, faults by kind, dead letters by reason."""
        kinds: dict[str, int] = {}
        reasons: dict[str, int] = {}
        for s in self.sessions:
            for f in s.faults:
                kinds[f.kind] = kinds.get(f.kind, 0) + 1
            for d in s.deadletters:
                reasons[d.reason] = reasons.get(d.reason, 0) + 1
        requests = [e for s in self.sessions for e in s.evictions]
        return {
            "sessions": len(self.sessions),
            "healthy_sessions": sum(s.healthy for s in self.sessions),
            "referent_dense_sessions": sum(s.referent_dense for s in self.sessions),
            "faults": dict(sorted(kinds.items())),
            "deadletters": dict(sorted(reasons.items())),
            "skipped_injections": sum(len(s.skipped) for s in self.sessions),
            "eviction_requests": len(requests),
            "requested_spans": sum(len(e.requested) for e in requests),
            "needed_spans": sum(len(e.needed) for e in requests),
        }

    @classmethod
    def from_json(cls, raw: bytes) -> FleetTruth:
        """Parse a truth file (raises ``ValueError`` when it is not one)."""
        data = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("format") != TRUTH_FORMAT:
            raise ValueError("not a spanguard simulator truth file")
        if data.get("version") != TRUTH_VERSION:
            raise ValueError(f"unsupported truth file version {data.get('version')!r}")
        events = data.get("events") or {}
        return cls(
            generator=dict(data.get("generator") or {}),
            sessions=[_session_from(s) for s in data["sessions"]],
            events_file=events.get("file"),
            events_lines=int(events.get("lines", 0)),
            events_sha256=str(events.get("sha256", "")),
        )

    @classmethod
    def load(cls, path: Path) -> FleetTruth:
        """Read a truth file."""
        return cls.from_json(path.read_bytes())


def _session_json(s: SessionTruth) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "tenant": s.tenant,
        "profile": s.profile,
        "referent_dense": s.referent_dense,
        "healthy": s.healthy,
        "events": s.events,
        "injections": s.injections,
        "skipped_injections": s.skipped,
        "faults": [asdict(f) for f in s.faults],
        "deadletters": [asdict(d) for d in s.deadletters],
        "evictions": [asdict(e) for e in s.evictions],
    }


def _session_from(data: dict[str, Any]) -> SessionTruth:
    return SessionTruth(
        session_id=data["session_id"],
        tenant=data["tenant"],
        profile=data["profile"],
        referent_dense=bool(data["referent_dense"]),
        events=int(data.get("events", 0)),
        injections=list(data.get("injections", [])),
        skipped=list(data.get("skipped_injections", [])),
        faults=[
            FaultTruth(**{**f, "span_ids": tuple(f.get("span_ids", ()))}) for f in data["faults"]
        ],
        deadletters=[DeadLetterTruth(**d) for d in data["deadletters"]],
        evictions=[
            EvictionTruth(
                **{
                    **e,
                    "requested": tuple(e["requested"]),
                    "needed": tuple(e["needed"]),
                    "expected_committed": tuple(e["expected_committed"]),
                    "expected_dropped": tuple(e["expected_dropped"]),
                }
            )
            for e in data["evictions"]
        ],
    )


# --------------------------------------------------------------------------
# The reference model of one session
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Predicted:
    """A fault the contract says an event causes."""

    kind: FaultKind
    span_ids: tuple[str, ...] = ()


@dataclass(slots=True)
class SpanFacts:
    """What the generator knows of one live span (it wrote the text)."""

    span_id: str
    text_sha256: str
    tokens: int
    position: int
    arrival: int
    added_seq: int
    holds: tuple[Hold, ...] = ()
    anaphors: tuple[str, ...] = ()
    derived_from: tuple[str, ...] = ()
    counter: int = 0
    poisoned: bool = False
    score: float | None = None
    score_id: str | None = None
    bound_seq: int = -1

    @property
    def order(self) -> OrderKey:
        """Place in the context order."""
        return (self.position, self.arrival, self.span_id)

    @property
    def keys(self) -> set[str]:
        """The identifier keys this span holds."""
        return {key for key, _ in self.holds}

    @property
    def types(self) -> set[str]:
        """The entity types this span holds."""
        return {type_ for _, type_ in self.holds}

    def mentions(self) -> list[Mention]:
        """References this span makes: every key it holds (a repeat depends on the
        key's binder) and every anaphor."""
        found: list[Mention] = [("key", key) for key in sorted(self.keys)]
        found.extend(("type", t) for t in dict.fromkeys(self.anaphors))
        return found


@dataclass(frozen=True, slots=True)
class ScoreEntry:
    """One score of a scoring pass, as the generator sends it."""

    span_id: str
    score_id: str
    value: float
    text_sha256: str | None


@dataclass(frozen=True, slots=True)
class SnapshotClaim:
    """A score the rewriter carried in its snapshot (never binds)."""

    score_id: str
    value: float | None
    text_sha256: str | None


@dataclass(frozen=True, slots=True)
class RewriteEntry:
    """One span of a rewrite's snapshot, with what the generator put in its text."""

    span_id: str
    text_sha256: str
    tokens: int
    holds: tuple[Hold, ...] = ()
    anaphors: tuple[str, ...] = ()
    derived_from: tuple[str, ...] | None = None
    claim: SnapshotClaim | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The decision the contract prescribes for one eviction request."""

    action: str
    requested: tuple[str, ...]
    committed: tuple[str, ...]
    dropped: tuple[str, ...]
    pinned: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]


@dataclass(slots=True)
class _Window:
    mean_before: float | None
    tokens_before: int


@dataclass(slots=True)
class ContextModel:
    """The generator's model of one session, written from the contract.

    Every event method applies the event and returns the faults the contract
    says it causes. Resolution rules (the contract's "Referents"): a key is
    bound by the earliest live span holding it, and a later holder depends on
    that binding; an anaphor of type T is bound by the latest live span
    strictly before it that holds an entity of type T.
    """

    drift_tolerance: float = 0.05
    rewrite_of_rewrite_at: int = 2
    poisoned_at: int = 3
    stall_after: int = 3
    spans: dict[str, SpanFacts] = field(default_factory=dict)
    gone: dict[str, tuple[int, int]] = field(default_factory=dict)
    """span id -> (seq it left at, its counter then)."""
    known_types: set[str] = field(default_factory=set)
    arrivals: int = 0
    poisoned_pending: set[str] = field(default_factory=set)
    freeze_streak: int = 0
    window: _Window | None = None
    drift_streak: int = 0
    last_seq: int | None = None
    closed: bool = False

    def clone(self) -> ContextModel:
        """An independent copy (plans are tried on a copy first)."""
        return copy.deepcopy(self)

    # -- queries ------------------------------------------------------------

    def ordered(self) -> list[SpanFacts]:
        """Live spans in context order."""
        return sorted(self.spans.values(), key=lambda s: s.order)

    def key_binder(self, key: str) -> SpanFacts | None:
        """The earliest live span holding ``key``."""
        holders = [s for s in self.spans.values() if key in s.keys]
        return min(holders, key=lambda s: s.order) if holders else None

    def type_binder(self, type_: str, at: OrderKey) -> SpanFacts | None:
        """The latest live span strictly before ``at`` holding an entity of ``type_``."""
        holders = [s for s in self.spans.values() if s.order < at and type_ in s.types]
        return max(holders, key=lambda s: s.order) if holders else None

    def resolve(self, at: OrderKey, mention: Mention) -> SpanFacts | None:
        """The span that binds ``mention`` made by the span at ``at``."""
        kind, name = mention
        return self.key_binder(name) if kind == "key" else self.type_binder(name, at)

    def ranked(self) -> list[SpanFacts]:
        """Spans with a bound score that may be ranked (not poisoned), lowest first."""
        scored = [
            s
            for s in self.spans.values()
            if s.score is not None and s.span_id not in self.poisoned_pending
        ]
        return sorted(scored, key=lambda s: (s.score, s.position, s.span_id))

    def mean_bound(self) -> float | None:
        """Mean bound score of the live set (poisoned spans waiting to be dropped excluded)."""
        values = [s.score for s in self.ranked() if s.score is not None]
        return math.fsum(values) / len(values) if values else None

    def live_tokens(self) -> int:
        """Tokens of every live span."""
        return sum(s.tokens for s in self.spans.values())

    def stale(self) -> set[str]:
        """Spans rewritten since their last bound score (poisoned ones excepted)."""
        return {
            s.span_id
            for s in self.spans.values()
            if s.counter > 0 and s.span_id not in self.poisoned_pending
        }

    def needed_by(self, span: SpanFacts, removal: set[str]) -> list[str]:
        """Spans outside ``removal`` whose mention ``span`` binds."""
        users: set[str] = set()
        for key in span.keys:
            binder = self.key_binder(key)
            if binder is not None and binder.span_id == span.span_id:
                users.update(
                    s.span_id
                    for s in self.spans.values()
                    if key in s.keys and s.span_id != span.span_id
                )
        for type_ in span.types:
            for user in self.spans.values():
                if type_ in user.anaphors:
                    binder = self.type_binder(type_, user.order)
                    if binder is not None and binder.span_id == span.span_id:
                        users.add(user.span_id)
        return sorted(users - removal, key=lambda s: self.spans[s].order)

    def pinned_set(self, removal: set[str]) -> dict[str, list[str]]:
        """Spans of ``removal`` that a retained span needs, closed transitively over
        the pinned spans' own references; maps each to the spans that need it."""
        pins: dict[str, list[str]] = {}
        queue: list[str] = []
        for span in sorted((self.spans[s] for s in removal), key=lambda s: s.order):
            users = self.needed_by(span, removal)
            if users:
                pins[span.span_id] = users
                queue.append(span.span_id)
        while queue:
            holder = self.spans[queue.pop(0)]
            for mention in holder.mentions():
                binder = self.resolve(holder.order, mention)
                if (
                    binder is not None
                    and binder.span_id in removal
                    and binder.span_id not in pins
                    and binder.span_id != holder.span_id
                ):
                    pins[binder.span_id] = [holder.span_id]
                    queue.append(binder.span_id)
        return pins

    # -- envelope -------------------------------------------------------------

    def _seq(self, seq: int) -> list[Predicted]:
        last = self.last_seq
        self.last_seq = seq if last is None else max(last, seq)
        if last is None or seq == last + 1:
            return []
        return [Predicted(FaultKind.SEQUENCE_GAP if seq > last + 1 else FaultKind.OUT_OF_ORDER)]

    def reject(self, seq: int | None) -> None:
        """A record the engine rejects: a readable ``seq`` still moves the baseline."""
        if seq is not None and self.last_seq is not None and not self.closed:
            self.last_seq = max(self.last_seq, seq)

    # -- events ---------------------------------------------------------------

    def add_span(
        self,
        seq: int,
        span_id: str,
        text_sha256: str,
        tokens: int,
        position: int,
        holds: Sequence[Hold],
        anaphors: Sequence[str],
        derived_from: Sequence[str] = (),
    ) -> list[Predicted]:
        """A ``span.added``."""
        faults = self._seq(seq)
        self.arrivals += 1
        span = SpanFacts(
            span_id=span_id,
            text_sha256=text_sha256,
            tokens=tokens,
            position=position,
            arrival=self.arrivals,
            added_seq=seq,
            holds=tuple(dict.fromkeys(holds)),
            anaphors=tuple(anaphors),
            derived_from=tuple(derived_from),
        )
        self.spans[span_id] = span
        self.gone.pop(span_id, None)
        self.known_types.update(span.types)
        if derived_from:
            faults += self._counters([(span, self._created_counter(derived_from))])
        return faults

    def score(self, seq: int, entries: Sequence[ScoreEntry]) -> list[Predicted]:
        """A ``scores.computed`` pass."""
        faults = self._seq(seq)
        gaps: list[str] = []
        stale: list[str] = []
        for entry in entries:
            span = self.spans.get(entry.span_id)
            if span is None or span.poisoned:
                continue
            if not entry.text_sha256:
                gaps.append(span.span_id)
            elif entry.text_sha256 != span.text_sha256:
                stale.append(span.span_id)
            else:
                span.score, span.score_id, span.bound_seq = entry.value, entry.score_id, seq
                span.counter = 0
        if gaps:
            faults.append(Predicted(FaultKind.SCORE_PROVENANCE_GAP, tuple(dict.fromkeys(gaps))))
        if stale:
            faults.append(Predicted(FaultKind.STALE_SCORE, tuple(dict.fromkeys(stale))))
        return faults + self._close_window()

    def rewrite(
        self,
        seq: int,
        entries: Sequence[RewriteEntry],
        declared: Iterable[str] = (),
        invalidated: Iterable[str] = (),
        base_seq: int | None = None,
    ) -> list[Predicted]:
        """A ``context.rewritten`` with the complete snapshot ``entries``."""
        faults = self._seq(seq)
        faults += self._close_window()
        self.window = _Window(self.mean_bound(), self.live_tokens())
        in_snapshot = {e.span_id for e in entries}
        parents = {p for e in entries for p in (e.derived_from or ())}
        modified: list[tuple[RewriteEntry, SpanFacts]] = []
        unchanged: list[tuple[RewriteEntry, SpanFacts]] = []
        created: list[RewriteEntry] = []
        for entry in entries:
            span = self.spans.get(entry.span_id)
            if span is not None:
                target = modified if entry.text_sha256 != span.text_sha256 else unchanged
                target.append((entry, span))
                continue
            gone = self.gone.get(entry.span_id)
            if not (base_seq is not None and gone is not None and gone[0] > base_seq):
                created.append(entry)
        kept_late: list[SpanFacts] = []
        merged: list[SpanFacts] = []
        ungated: list[SpanFacts] = []
        for span in self.ordered():
            if span.span_id in in_snapshot:
                continue
            if base_seq is not None and span.added_seq > base_seq:
                kept_late.append(span)
            elif span.span_id in parents:
                merged.append(span)
            else:
                ungated.append(span)
        created_counters = {e.span_id: self._created_counter(e.derived_from or ()) for e in created}

        # Mentions of the spans that survive, resolved on the state before.
        new_anaphors = {s.span_id: e.anaphors for e, s in modified}
        before: list[tuple[SpanFacts, Mention]] = []
        for span in [s for _, s in unchanged] + [s for _, s in modified] + kept_late:
            anaphors = new_anaphors.get(span.span_id, span.anaphors)
            for anaphor in dict.fromkeys(anaphors):
                if self.type_binder(anaphor, span.order) is not None:
                    before.append((span, ("type", anaphor)))

        declared_set = set(declared)
        undeclared = [s.span_id for _, s in modified if s.span_id not in declared_set]
        if undeclared:
            faults.append(Predicted(FaultKind.UNDECLARED_MODIFICATION, tuple(undeclared)))
        invalid = set(invalidated)
        missing = [
            s.span_id
            for s in [s for _, s in modified] + merged
            if s.score_id is not None
            and s.score_id not in invalid
            and not (base_seq is not None and s.bound_seq > base_seq)
        ]
        if missing:
            faults.append(Predicted(FaultKind.REWRITE_WITHOUT_INVALIDATION, tuple(missing)))
        if ungated:
            faults.append(Predicted(FaultKind.UNGATED_EVICTION, tuple(s.span_id for s in ungated)))
        gaps = [
            e.span_id
            for e in entries
            if e.claim is not None
            and (
                not e.claim.text_sha256 or e.claim.value is None or not math.isfinite(e.claim.value)
            )
        ]
        stale = [
            e.span_id
            for e in entries
            if e.claim is not None
            and e.span_id not in gaps
            and e.claim.text_sha256 != e.text_sha256
        ]
        if gaps:
            faults.append(Predicted(FaultKind.SCORE_PROVENANCE_GAP, tuple(gaps)))
        if stale:
            faults.append(Predicted(FaultKind.STALE_SCORE, tuple(stale)))
        summary_faults = self._summary_faults(created, modified, merged)

        # Apply.
        for span in merged + ungated:
            self._remove(span.span_id, seq)
        for entry, span in modified:
            span.text_sha256 = entry.text_sha256
            span.score = span.score_id = None
            span.holds, span.anaphors = tuple(dict.fromkeys(entry.holds)), entry.anaphors
        for entry, span in unchanged + modified:
            span.tokens = entry.tokens
            if entry.derived_from is not None:
                span.derived_from = tuple(entry.derived_from)
        for entry in created:
            self.arrivals += 1
            self.spans[entry.span_id] = SpanFacts(
                span_id=entry.span_id,
                text_sha256=entry.text_sha256,
                tokens=entry.tokens,
                position=0,
                arrival=self.arrivals,
                added_seq=seq,
                holds=tuple(dict.fromkeys(entry.holds)),
                anaphors=entry.anaphors,
                derived_from=tuple(entry.derived_from or ()),
            )
            self.gone.pop(entry.span_id, None)
        for index, entry in enumerate(entries):
            if entry.span_id in self.spans:
                self.spans[entry.span_id].position = index
        for offset, span in enumerate(kept_late):
            span.position = len(entries) + offset
        for span in self.spans.values():
            self.known_types.update(span.types)

        changes = [(s, s.counter + 1) for _, s in modified]
        changes += [(self.spans[e.span_id], created_counters[e.span_id]) for e in created]
        faults += self._counters(changes)

        dropped = [
            span.span_id
            for span, mention in before
            if span.span_id in self.spans and self.resolve(span.order, mention) is None
        ]
        if dropped:
            faults.append(Predicted(FaultKind.REFERENT_DROPPED, tuple(dict.fromkeys(dropped))))
        return faults + summary_faults

    def _summary_faults(
        self,
        created: Sequence[RewriteEntry],
        modified: Sequence[tuple[RewriteEntry, SpanFacts]],
        merged: Sequence[SpanFacts],
    ) -> list[Predicted]:
        """Contract 1.1: a span longer than its sources (``SUMMARY_BALLOONING``, ratio
        1.0) and an empty summary of 2+ spans (``EMPTY_SUMMARY``: empty text, or
        under 3 tokens from parents holding 75 or more)."""
        balloon: list[str] = []
        empty: list[str] = []
        for entry in created:
            parents = list(dict.fromkeys(entry.derived_from or ()))
            if not parents:
                continue
            parent_tokens = sum(self.spans[p].tokens for p in parents if p in self.spans)
            if all(p in self.spans for p in parents) and entry.tokens > parent_tokens:
                balloon.append(entry.span_id)
            if len(parents) >= 2 and (
                entry.text_sha256 == EMPTY_TEXT_SHA256 or (entry.tokens < 3 and parent_tokens >= 75)
            ):
                empty.append(entry.span_id)
        absorbed = {s.span_id: s.tokens for s in merged}
        for entry, span in modified:
            sources = span.tokens + sum(absorbed.get(p, 0) for p in entry.derived_from or ())
            if entry.tokens > sources:
                balloon.append(entry.span_id)
        found: list[Predicted] = []
        if balloon:
            found.append(Predicted(FaultKind.SUMMARY_BALLOONING, tuple(balloon)))
        if empty:
            found.append(Predicted(FaultKind.EMPTY_SUMMARY, tuple(empty)))
        return found

    def evict(
        self,
        seq: int,
        *,
        candidates: Sequence[str] | None = None,
        threshold: float | None = None,
        keep_top_k: int | None = None,
        basis: str = "score",
    ) -> tuple[Decision, list[Predicted]]:
        """An ``eviction.requested``: the decision and the faults it causes."""
        faults = self._seq(seq)
        faults += self._close_window()
        if candidates is not None:
            requested = list(dict.fromkeys(candidates))
        elif threshold is not None:
            requested = [
                s.span_id for s in self.ranked() if s.score is not None and s.score < threshold
            ]
        else:
            assert keep_top_k is not None
            ranked = self.ranked()
            excess = len(ranked) - keep_top_k
            requested = [s.span_id for s in ranked[: max(0, excess)]]
        refused: list[tuple[str, str]] = []
        live: list[str] = []
        for span_id in requested:
            if span_id in self.spans:
                live.append(span_id)
            else:
                reason = (
                    RefusalReason.ALREADY_EVICTED
                    if span_id in self.gone
                    else RefusalReason.UNKNOWN_SPAN
                )
                refused.append((span_id, reason.value))
        poisoned = sorted(self.poisoned_pending, key=lambda s: self.spans[s].order)
        removal = set(live) | set(poisoned)
        pins = self.pinned_set(removal)
        dropped = [s for s in poisoned if s not in pins]
        kept = [s for s in poisoned if s in pins]
        if kept:
            faults.append(Predicted(FaultKind.POISONED_SPAN, tuple(kept)))
            refused.extend((s, RefusalReason.PINNED.value) for s in kept if s not in live)
        stale = self.stale()
        frozen = basis == "score" and bool(stale)
        committed: list[str] = []
        if frozen:
            self.freeze_streak += 1
            if self.freeze_streak % self.stall_after == 0:
                faults.append(Predicted(FaultKind.PRUNING_STALLED, tuple(sorted(stale))))
            for span_id in live:
                if span_id in pins:
                    refused.append((span_id, RefusalReason.PINNED.value))
                elif span_id in stale:
                    refused.append((span_id, RefusalReason.STALE_SCORE.value))
                elif span_id not in self.poisoned_pending:
                    refused.append((span_id, RefusalReason.FROZEN.value))
        else:
            self.freeze_streak = 0
            for span_id in live:
                if span_id in pins:
                    refused.append((span_id, RefusalReason.PINNED.value))
                elif span_id in self.poisoned_pending:
                    continue
                elif basis == "score" and self.spans[span_id].score is None:
                    refused.append((span_id, RefusalReason.UNSCORED.value))
                else:
                    committed.append(span_id)
            leaving = set(committed) | set(dropped)
            orphans = [
                c
                for c in committed
                if any(
                    c in s.derived_from and s.span_id not in leaving for s in self.spans.values()
                )
            ]
            if orphans:
                faults.append(Predicted(FaultKind.ORPHANED_PARENT, tuple(orphans)))
        if frozen:
            action = "FREEZE"
        elif not refused:
            action = "COMMIT"
        else:
            action = "PARTIAL" if committed else "REJECT"
        for span_id in committed + dropped:
            self._remove(span_id, seq)
        decision = Decision(
            action=action,
            requested=tuple(requested),
            committed=tuple(committed),
            dropped=tuple(dropped),
            pinned=tuple(pins),
            refused=tuple(refused),
        )
        return decision, faults

    def close(self, seq: int) -> list[Predicted]:
        """A ``session.closed``: state is gone; later events are rejected."""
        faults = self._seq(seq)
        self.closed = True
        return faults

    # -- internals ------------------------------------------------------------

    def _remove(self, span_id: str, seq: int) -> None:
        span = self.spans.pop(span_id)
        self.poisoned_pending.discard(span_id)
        self.gone[span_id] = (seq, span.counter)

    def _created_counter(self, parents: Iterable[str]) -> int:
        highest = 0
        for parent in parents:
            if parent in self.spans:
                highest = max(highest, self.spans[parent].counter)
            elif parent in self.gone:
                highest = max(highest, self.gone[parent][1])
        return 1 + highest

    def _counters(self, changes: Sequence[tuple[SpanFacts, int]]) -> list[Predicted]:
        twice: list[str] = []
        poisoned: list[str] = []
        for span, new in changes:
            old = span.counter
            span.counter = new
            if old < self.poisoned_at <= new and not span.poisoned:
                poisoned.append(span.span_id)
            elif old < self.rewrite_of_rewrite_at <= new < self.poisoned_at:
                twice.append(span.span_id)
        faults: list[Predicted] = []
        if twice:
            faults.append(Predicted(FaultKind.REWRITE_OF_REWRITE, tuple(twice)))
        if poisoned:
            for span_id in poisoned:
                self.spans[span_id].poisoned = True
                self.poisoned_pending.add(span_id)
            faults.append(Predicted(FaultKind.POISONED_SPAN, tuple(poisoned)))
        return faults

    def _close_window(self) -> list[Predicted]:
        window = self.window
        if window is None:
            return []
        self.window = None
        after = self.mean_bound()
        tokens_fell = self.live_tokens() < window.tokens_before
        rose = False
        if window.mean_before is not None and after is not None:
            rose = after - window.mean_before > abs(window.mean_before) * self.drift_tolerance
        if rose and tokens_fell:
            self.drift_streak += 1
            if self.drift_streak >= 2:
                return [Predicted(FaultKind.MONOTONIC_DRIFT)]
        else:
            self.drift_streak = 0
        return []

    def drift_of(self, mean_after: float | None, tokens_after: int) -> float | None:
        """The relative rise of the open window if it closed at these figures
        (None when it cannot be measured or tokens did not fall)."""
        window = self.window
        if window is None or window.mean_before is None or mean_after is None:
            return None
        if tokens_after >= window.tokens_before or window.mean_before == 0:
            return None
        return (mean_after - window.mean_before) / abs(window.mean_before)
