"""The async client: one per process (or per service), one :class:`Session` per agent session.

Two modes, one API:

* **Kafka** (``SpanguardClient.kafka(bootstrap)``): events go to
  ``<prefix>.events`` keyed by session with the murmur2 partitioner; the
  process's one output consumer brings the decisions back.
* **Offline** (``SpanguardClient.offline()``): the same events drive the
  engine in process (``spanguard.streams.engine.engine.Engine``): no broker, for tests
  and notebooks.

In both modes the client keeps a local engine fed with exactly the events it
sends (hashes, never more than the wire holds). Offline it is the service; on
Kafka it is a mirror that lets :meth:`Session.check_rewrite` try a rewrite
before it is applied, and gives a rewrite's faults at once. The worker's
decisions stay authoritative.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Self, Unpack

from spanguard.schemas import (
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    InputEvent,
    IntegrityFault,
    OutputEvent,
    RejectReason,
    ScoresComputed,
    SessionClosed,
    SpanAdded,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.gate import pinned_set
from spanguard.streams.sdk.decision import Decision, Pin
from spanguard.streams.sdk.inbox import Inbox
from spanguard.streams.sdk.kafka_link import KafkaLink, SpanguardUnavailable
from spanguard.streams.sdk.messages import (
    DEFAULT_PROTECT,
    Message,
    Protect,
    TokenCounter,
    approximate_tokens,
    check_policy,
)
from spanguard.streams.sdk.tracker import EvictionOptions, Extractor, RewriteDiff, SpanTracker

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0
"""Seconds ``request_eviction`` waits for a decision before the safe default."""


class SpanguardClient:
    """Creates sessions and owns the connection (Kafka) or the engine (offline).

    Use as ``async with SpanguardClient.kafka("127.0.0.1:9092") as client:``.
    """

    def __init__(
        self,
        *,
        bootstrap: str | None = None,
        topic_prefix: str = "spanguard",
        settings: EngineSettings | None = None,
        send_text: bool = False,
        mirror: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        token_counter: TokenCounter = approximate_tokens,
        extractor: Extractor | None = None,
        protect: Protect = DEFAULT_PROTECT,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic_prefix = topic_prefix
        self.send_text = send_text
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.token_counter = token_counter
        self.extractor = extractor
        """The harness's own referent extractor for every session (see
        :data:`spanguard.streams.sdk.tracker.Extractor`)."""
        self.protect = check_policy(protect)
        """Which messages every session protects
        (see :data:`~spanguard.streams.sdk.messages.Protect`):
        by default the system prompt and the user's first message."""
        offline = bootstrap is None
        self.engine: Engine | None = Engine(settings) if offline or mirror else None
        """The local engine: the service itself offline, a mirror on Kafka (or None)."""
        self.link: KafkaLink | None = None
        self.sessions: dict[tuple[str, str], Session] = {}

    @classmethod
    def offline(cls, settings: EngineSettings | None = None, **options: object) -> Self:
        """A client that drives the engine in process (no broker)."""
        return cls(settings=settings, **options)  # type: ignore[arg-type]

    @classmethod
    def kafka(cls, bootstrap: str, topic_prefix: str = "spanguard", **options: object) -> Self:
        """A client of the spanguard worker behind ``bootstrap`` (``host:port[,host:port]``)."""
        return cls(bootstrap=bootstrap, topic_prefix=topic_prefix, **options)  # type: ignore[arg-type]

    @property
    def is_offline(self) -> bool:
        """True when the local engine is the service."""
        return self.bootstrap is None

    async def connect(self) -> None:
        """Start (or share) the process's Kafka link; nothing to do offline.

        Raises:
            SpanguardUnavailable: When the broker or the service's topics cannot be reached.
        """
        if self.bootstrap is not None and self.link is None:
            self.link = await KafkaLink.acquire(
                self.bootstrap, self.topic_prefix, connect_timeout=self.connect_timeout
            )

    async def close(self) -> None:
        """Wait for outstanding acks and release the link (sessions stay open on the service)."""
        if self.link is not None:
            link, self.link = self.link, None
            for session in self.sessions.values():
                link.unregister(session.inbox)
            try:
                await link.flush()
            except Exception as exc:  # closing must not fail on a dead broker
                log.warning("spanguard: unacknowledged events at close: %s", exc)
            await link.release()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def session(
        self,
        session_id: str,
        *,
        tenant: str = "default",
        start_seq: int = 0,
        token_counter: TokenCounter | None = None,
        extractor: Extractor | None = None,
        protect: Protect | None = None,
    ) -> Session:
        """The tracker of one agent session (created on first use).

        ``start_seq`` resumes a session another process started (its next ``seq``).
        ``extractor`` (else the client's) adds the harness's own referents, for
        instance from a NER model, to every message of the session. ``protect``
        (else the client's) says which messages are protected: named rules
        (``"system"``, ``"first_user"``) and predicates of a message; ``()`` none.

        Raises:
            ValueError: For an empty session id or tenant.
        """
        if not session_id or not tenant:
            raise ValueError("session_id and tenant must be non-empty")
        key = (tenant, session_id)
        existing = self.sessions.get(key)
        if existing is not None:
            return existing
        tracker = SpanTracker(
            tenant,
            session_id,
            token_counter=token_counter or self.token_counter,
            send_text=self.send_text,
            extractor=extractor or self.extractor,
            next_seq=start_seq,
            protect=self.protect if protect is None else protect,
        )
        session = Session(self, tracker, Inbox(tenant, session_id))
        self.sessions[key] = session
        if self.link is not None:
            self.link.register(session.inbox)
        return session


@dataclass(frozen=True, slots=True)
class RewriteReport:
    """What a rewrite did (the local diff) and the faults it caused.

    ``faults`` come from the local engine, which runs the service's code on
    the same events: offline they are the service's; on Kafka the worker's own
    copies follow on ``<prefix>.faults`` (see :meth:`Session.faults`).
    ``compaction`` is the local engine's ``context.compacted`` record of the
    rewrite (contract 1.2; None without a local engine).
    """

    diff: RewriteDiff
    faults: tuple[IntegrityFault, ...]
    event_id: str
    sent: bool = True
    note: str = ""
    compaction: ContextCompacted | None = None


@dataclass(frozen=True, slots=True)
class Renewal:
    """The session continued under a new id because its old one expired (contract 1.2's
    idle expiry): the event ``refused_event_id`` was rejected ``reason`` (the rejection's
    ``detail`` says when it expired); the live context was reported again under
    ``new_session_id`` (``spans_reported`` spans, with their known scores) and the
    event re-sent there."""

    old_session_id: str
    new_session_id: str
    reason: str
    detail: str
    refused_event_id: str
    spans_reported: int


@dataclass(slots=True)
class Session:
    """One agent session: tell it what enters and leaves the context; ask before evicting."""

    client: SpanguardClient
    tracker: SpanTracker
    inbox: Inbox
    send_errors: int = 0
    """Events that could not be produced (the broker was down); see docs/sdk.md."""
    disagreements: list[tuple[str, str]] = field(default_factory=list)
    """(request id, what differed) where the local mirror decided otherwise than the worker."""
    renewals: list[Renewal] = field(default_factory=list)
    """Each time the session's id expired and it continued under a new one (see
    docs/sdk.md, "Idle expiry": ``<first id>~2``, ``~3``...), oldest first."""
    _turn_mark: int | None = field(default=None, repr=False)
    """The tracker's ``next_seq`` at the last :meth:`advance_turn`."""

    # -- reporting -----------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session id (the Kafka key)."""
        return self.tracker.session_id

    @property
    def live(self) -> list[str]:
        """Live span ids, in context order, as this session tracks them."""
        return list(self.tracker.live)

    def faults(self) -> list[IntegrityFault]:
        """Every fault of this session the service produced and this process received."""
        return self.inbox.faults()

    def set_turn(self, turn: int) -> None:
        """The agent loop's turn, stamped on the events that follow."""
        self.tracker.turn = turn

    def advance_turn(self) -> int:
        """Start the next turn (one model call, one agent step) and return it.

        The adapters call it once per model call. It advances only when an event
        was reported since the last advance, so two hooks of the same model call (two
        guards wrapping one agent, a reporter and a compactor) advance it once; the
        events' ``seq`` and ids do not depend on it.
        """
        if self._turn_mark != self.tracker.next_seq:
            self.tracker.turn += 1
            self._turn_mark = self.tracker.next_seq
        return self.tracker.turn

    async def add(self, message: Message) -> list[IntegrityFault]:
        """Report one message entering the context; returns the faults it caused locally."""
        return _faults((await self._send(self.tracker.added(message)))[1])

    async def observe(self, messages: Iterable[Message]) -> list[IntegrityFault]:
        """Report every message of ``messages`` that is not tracked yet, in order.

        Call it with the whole context before each model call: known messages
        are skipped (by id), new ones are added after the live ones.
        """
        faults: list[IntegrityFault] = []
        for message in messages:
            if message.id not in self.tracker.live:
                faults.extend(await self.add(message))
        return faults

    async def score(
        self, scores: Mapping[str, float], *, scorer: str, query: str | None = None
    ) -> list[IntegrityFault]:
        """Report one scoring pass (span id -> relevance), bound to the current texts."""
        return _faults((await self._send(self.tracker.scored(scores, scorer, query)))[1])

    def check_rewrite(
        self, messages: Sequence[Message], *, invalidate_scores: bool | Iterable[str] = True
    ) -> list[IntegrityFault]:
        """The faults the rewrite to ``messages`` would cause, computed on a copy of the
        local engine's state: nothing is sent and nothing changes.

        Raises:
            RuntimeError: When the client has no local engine (``mirror=False``).
        """
        engine = self.client.engine
        if engine is None:
            raise RuntimeError("check_rewrite needs the local engine (mirror=True)")
        event, _ = self.tracker.preview_rewrite(messages, invalidate_scores=invalidate_scores)
        scratch = Engine(engine.settings)
        key = (self.tracker.tenant, self.tracker.session_id)
        state = engine.sessions.get(key)
        if state is not None:
            scratch.sessions[key] = copy.deepcopy(state)
        return _faults(scratch.process(event))

    def pins_for(self, removal: Collection[str]) -> list[Pin] | None:
        """The messages of ``removal`` that a message outside it still refers to,
        closed transitively over their own mentions: the gate's pinned set (its step 1,
        ``spanguard.streams.engine.gate.pinned_set``) computed on the local engine's state of
        the session, which it only reads. Ids the engine does not hold as live are
        ignored. None without a local engine (``mirror=False``): nothing to compute on.
        """
        engine = self.client.engine
        if engine is None:
            return None
        state = engine.session(self.tracker.tenant, self.tracker.session_id)
        if state is None:
            return []
        live = {s for s in removal if s in state.spans}
        pins = pinned_set(state, live)
        return [Pin(span_id, tuple(p.pinned_for), tuple(p.path)) for span_id, p in pins.items()]

    async def rewrite(
        self,
        messages: Sequence[Message],
        *,
        invalidate_scores: bool | Iterable[str] = True,
        base_seq: int | None = None,
        strategy: str | None = None,
        trigger: str | None = None,
    ) -> RewriteReport:
        """Report that the context is now ``messages`` (complete, in order).

        A message whose id is new is created (its ``derived_from`` is its
        lineage); one with a known id and other text is modified; a live span
        missing from ``messages`` is merged when a created message names it, else
        removed (an ``UNGATED_EVICTION`` unless a decision committed it: evict
        through :meth:`request_eviction` first). ``strategy`` / ``trigger`` name
        the compactor and why it ran (echoed in ``context.compacted``). Nothing
        here vetoes: :func:`~spanguard.streams.sdk.compaction.gate_compaction` does.
        """
        event, diff = self.tracker.rewritten(
            messages,
            invalidate_scores=invalidate_scores,
            base_seq=base_seq,
            strategy=strategy,
            trigger=trigger,
        )
        errors = self.send_errors
        sent, outputs = await self._send(event)
        self.tracker.commit_rewrite(messages, diff)
        acked = self.send_errors == errors
        note = "" if acked else "not sent: the broker is unavailable (see send_errors)"
        compaction = next((o for o in outputs if isinstance(o, ContextCompacted)), None)
        return RewriteReport(diff, tuple(_faults(outputs)), sent.event_id, acked, note, compaction)

    async def request_eviction(
        self,
        candidates: Sequence[str] | None = None,
        *,
        timeout: float | None = None,
        **options: Unpack[EvictionOptions],
    ) -> Decision:
        """Ask the gate; returns its decision, or the safe default (evict nothing).

        ``candidates`` or a policy in ``options`` (see :class:`EvictionOptions`).
        Evict exactly :attr:`Decision.evict`. With no decision within ``timeout``
        seconds (the client's default otherwise) or with the broker down, the
        decision is :meth:`Decision.safe_default`: ``timed_out`` is True and
        ``note`` says why. A decision that comes later is kept in
        ``session.inbox.late`` and is not applied.
        """
        event = self.tracker.eviction(candidates, **options)
        wanted = tuple(event.candidates or ())
        events, local = self._local(event)  # the request keeps its id if re-sent
        link = self.client.link
        if link is not None:
            for earlier in events[:-1]:  # the refused request and the context reported again
                await self._produce(link, earlier, wait=False)
        if link is None:
            if not self.client.is_offline:
                decision = Decision.safe_default(
                    event.request_id, wanted, "client not connected: call connect() first"
                )
            else:
                decision = _decision_from(event.request_id, wanted, local)
        else:
            decision = await self._remote_decision(link, events[-1], wanted, timeout)
            self._compare(decision, local)
        decision = self._keep_whole(decision)
        self.tracker.evicted(decision.evict)
        return decision

    async def close(self) -> None:
        """Report ``session.closed`` and stop tracking the session (under its every id)."""
        await self._send(self.tracker.closed(), wait=True)
        link = self.client.link
        for key in self._keys():
            if link is not None and link.inboxes.get(key) is self.inbox:
                del link.inboxes[key]
            if self.client.sessions.get(key) is self:
                del self.client.sessions[key]

    # -- plumbing --------------------------------------------------------------

    def _process_locally(self, event: InputEvent) -> list[OutputEvent]:
        engine = self.client.engine
        if engine is None:
            return []
        outputs = engine.process(event, Source("sdk", -1, event.seq))
        if self.client.is_offline:
            for output in outputs:
                self.inbox.deliver(output)
        return outputs

    async def _send(
        self, event: InputEvent, *, wait: bool = False
    ) -> tuple[InputEvent, list[OutputEvent]]:
        """Process ``event`` locally (renewing the session if its id expired) and produce
        what was processed; returns the event as finally sent and its local outputs."""
        events, outputs = self._local(event)
        link = self.client.link
        if link is not None:
            for index, each in enumerate(events):
                await self._produce(link, each, wait=wait and index == len(events) - 1)
        return events[-1], outputs

    async def _produce(self, link: KafkaLink, event: InputEvent, *, wait: bool) -> None:
        # A harness must not fail because its guard is down: a send that fails is
        # counted and logged; the next eviction request then gets the safe default.
        try:
            await asyncio.wait_for(link.send(event, wait=wait), self.client.connect_timeout)
        except (SpanguardUnavailable, TimeoutError) as exc:
            self.send_errors += 1
            log.warning("spanguard: %s not sent: %s", event.type, exc)

    def _local(self, event: InputEvent) -> tuple[list[InputEvent], list[OutputEvent]]:
        """Process ``event`` on the local engine. When it is rejected ``SESSION_EXPIRED``
        (the local engine expires exactly as the service, given the same event times), the
        session is renewed once (:meth:`_renew`) and the event re-sent under the new id.
        Returns every event processed, in order (the refused one first: the service gets
        it too and refuses it alike), and the outputs of the last."""
        outputs = self._process_locally(event)
        refusal = _expiry(event, outputs)
        if refusal is None or isinstance(event, SessionClosed):
            return [event], outputs  # closing an expired session: it is over already
        events = [event, *self._renew(event, refusal)]
        for each in events[1:-1]:
            self._process_locally(each)
        return events, self._process_locally(events[-1])

    def _renew(self, event: InputEvent, refusal: EventRejected) -> list[InputEvent]:
        """Continue under a new session id: the live context reported again, then
        ``event`` under the new id. Once per refusal: nothing here checks or renews again."""
        old = self.session_id
        new = self._next_id()
        skip_span = event.span_id if isinstance(event, SpanAdded) else None
        skip_scores = (
            {s.score_id for s in event.scores} if isinstance(event, ScoresComputed) else set()
        )
        self.tracker.renew(new)
        reports = self.tracker.rereport(skip_span=skip_span, skip_scores=skip_scores)
        resent = self.tracker.reenvelope(event)
        self.inbox.session_id = new
        key = self.inbox.key
        self.client.sessions[key] = self  # the old key stays: session(old id) finds it
        if self.client.link is not None:
            self.client.link.register(self.inbox)  # the old id's outputs keep coming here
        spans = sum(isinstance(e, SpanAdded) for e in reports)
        self.renewals.append(
            Renewal(old, new, str(refusal.reason), refusal.detail, event.event_id, spans)
        )
        log.warning(
            "spanguard: session %r expired (%s); continuing as %r: %d live messages "
            "reported again, then its %s",
            old,
            refusal.detail,
            new,
            spans,
            event.type,
        )
        return [*reports, resent]

    def _next_id(self) -> str:
        """``<first id>~<n>`` (n = 2, 3... one per renewal), unused by the client and
        within the contract's 256 characters."""
        first = self.renewals[0].old_session_id if self.renewals else self.session_id
        generation = len(self.renewals) + 2
        while True:
            suffix = f"~{generation}"
            candidate = first[: _SESSION_ID_MAX - len(suffix)] + suffix
            if (self.tracker.tenant, candidate) not in self.client.sessions:
                return candidate
            generation += 1

    def _keys(self) -> list[tuple[str, str]]:
        """(tenant, id) of every id this session has had."""
        tenant = self.tracker.tenant
        return [
            *((tenant, r.old_session_id) for r in self.renewals),
            (tenant, self.session_id),
        ]

    async def _remote_decision(
        self,
        link: KafkaLink,
        event: InputEvent,
        wanted: tuple[str, ...],
        timeout: float | None,
    ) -> Decision:
        request_id = getattr(event, "request_id", "")
        inbox = self.inbox
        wait = timeout if timeout is not None else self.client.timeout
        loop_time = _Deadline(wait)
        try:
            await asyncio.wait_for(link.send(event, wait=True), loop_time.left())
        except (SpanguardUnavailable, TimeoutError) as exc:
            self.send_errors += 1
            note = f"request not acknowledged by the broker: {exc or 'timeout'}"
            return Decision.safe_default(request_id, wanted, f"{note}; nothing evicted")
        if not await inbox.wait(lambda: request_id in inbox.decisions, loop_time.left()):
            inbox.give_up(request_id)
            return Decision.safe_default(
                request_id,
                wanted,
                f"no decision within {wait:g} s: nothing evicted (safe default)",
            )
        decided = inbox.decisions[request_id]
        listed = {*decided.pins, *decided.faults}
        if decided.recompute_id:
            listed.add(decided.recompute_id)
        # The decision's own outputs were acknowledged before it, but on other
        # topics: they may reach this consumer a moment later.
        await inbox.wait(lambda: listed <= inbox.by_id.keys(), loop_time.left())
        return Decision.from_outputs(wanted, decided, inbox.outputs)

    def _keep_whole(self, decision: Decision) -> Decision:
        """``decision`` without the protected spans and partial tool-pair groups it
        would evict (see :meth:`request_eviction`)."""
        live = self.tracker.live
        evict = [s for s in decision.evict if s in live]
        held = {s: "PROTECTED" for s in evict if live[s].protected}
        groups = self.tracker.tool_groups()
        changed = True
        while changed:
            changed = False
            for span_id in evict:
                if span_id in held:
                    continue
                group = groups.get(span_id, ())
                if any(other not in evict or other in held for other in group):
                    held[span_id] = "TOOL_PAIR"
                    changed = True
        if not held:
            return decision
        self.disagreements.append(
            (decision.request_id, f"the SDK kept {sorted(held)}: {sorted(set(held.values()))}")
        )
        note = f"kept by the SDK: {', '.join(f'{s} ({r})' for s, r in held.items())}"
        return replace(
            decision,
            committed=tuple(s for s in decision.committed if s not in held),
            dropped=tuple(s for s in decision.dropped if s not in held),
            refused={**decision.refused, **held},
            note=f"{decision.note}; {note}" if decision.note else note,
        )

    def _compare(self, decision: Decision, local: list[OutputEvent]) -> None:
        if decision.timed_out:
            return
        mine = next((o for o in local if isinstance(o, EvictionDecided)), None)
        if mine is not None and set(mine.committed) != set(decision.committed):
            self.disagreements.append(
                (decision.request_id, f"mirror committed {sorted(mine.committed)}")
            )


class _Deadline:
    """Seconds left until a deadline (for waits that share one budget)."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self._end - time.monotonic())


_SESSION_ID_MAX = 256
"""The contract's longest ``session_id``."""


def _expiry(event: InputEvent, outputs: Iterable[OutputEvent]) -> EventRejected | None:
    """The rejection of ``event`` as ``SESSION_EXPIRED`` among ``outputs``, if any."""
    for output in outputs:
        if (
            isinstance(output, EventRejected)
            and output.reason is RejectReason.SESSION_EXPIRED
            and output.caused_by == event.event_id
        ):
            return output
    return None


def _faults(outputs: Iterable[OutputEvent]) -> list[IntegrityFault]:
    return [o for o in outputs if isinstance(o, IntegrityFault)]


def _decision_from(
    request_id: str, wanted: tuple[str, ...], outputs: list[OutputEvent]
) -> Decision:
    decided = next((o for o in outputs if isinstance(o, EvictionDecided)), None)
    if decided is None:  # the engine rejected the request (e.g. the session was closed)
        details = "; ".join(getattr(o, "detail", "") for o in outputs) or "no decision"
        return Decision.safe_default(request_id, wanted, f"request rejected: {details}")
    return Decision.from_outputs(wanted, decided, outputs)
