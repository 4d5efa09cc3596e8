"""The integrity engine: input events in, output events out, no I/O.

``Engine`` holds the state of many sessions and is driven one record at a time,
in the order of the session's topic partition. It has no Faust or Kafka import:
the Faust agents, ``spanguard replay`` and the tests all drive it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from spanguard.schemas import (
    EventRejected,
    FaultKind,
    InputEvent,
    OutputEvent,
    RejectReason,
    SpanAdded,
)
from spanguard.streams.engine.cold import Sessions
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.counters import apply_counters, created_counter
from spanguard.streams.engine.deadletter import keep, scan_identity
from spanguard.streams.engine.decode import Identity, Invalid, decode
from spanguard.streams.engine.dedup import DedupWindow, event_digest
from spanguard.streams.engine.drift import CycleOutcome, close_window
from spanguard.streams.engine.emit import Emission, build, output_id
from spanguard.streams.engine.expiry import Lifetimes
from spanguard.streams.engine.gate import decide
from spanguard.streams.engine.holdings import HoldingsBuilder, forget_shared
from spanguard.streams.engine.markers import Marker, SessionKey
from spanguard.streams.engine.persist import Changelog, Record, load_sessions
from spanguard.streams.engine.rewrite import apply_rewrite, live_after
from spanguard.streams.engine.scoring import apply_scores
from spanguard.streams.engine.state import SessionState, SpanState, to_digest

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a raw record came from, and its Kafka key and headers; all of it ends up
    in the record's dead letter if it is rejected."""

    topic: str
    partition: int
    offset: int
    received: datetime | None = None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes]] = ()


@dataclass(slots=True)
class EngineStats:
    """Counters of what produced no output of its own (for metrics)."""

    events: int = 0
    duplicates: int = 0
    rejected: int = 0
    cycles_closed: int = 0
    cycles_healthy: int = 0
    sessions_closed: int = 0
    sessions_expired: int = 0
    """Sessions expired after ``idle_timeout`` without events (contract 1.2)."""


class Engine:
    """Per-session integrity state and the rules of the contract.

    Usage::

        engine = Engine(EngineSettings())
        outputs = engine.process_raw(line, Source("replay", -1, n))

    ``process_raw`` never raises on bad input: it returns an ``event.rejected``.
    Outputs come in the order they must be produced (a decision last).
    """

    def __init__(
        self, settings: EngineSettings | None = None, *, track_changes: bool = False
    ) -> None:
        self.settings = settings or EngineSettings()
        self.windows: dict[SessionKey, DedupWindow] = {}
        """Each hot live session's duplicate window (a cold one's is packed with it)."""
        self.sessions = Sessions(self.windows, self.settings.cold_after)
        """The live sessions, the idle ones held packed (:mod:`~spanguard.streams.engine.cold`)."""
        self._holdings = HoldingsBuilder(self.settings)
        self.lifetimes = Lifetimes(
            self.settings.idle_timeout,
            self.settings.tombstone_retention,
            self.settings.max_clock_skew,
        )
        self.markers = self.lifetimes.markers
        """The markers of closed and expired sessions (forgotten by the clock)."""
        self.stats = EngineStats()
        self._last_ts = EPOCH
        self._changelog = Changelog(self.settings.dedup_window) if track_changes else None

    def clear_caches(self) -> None:
        """Empty the bounded caches the engine and its module keep (scans of recent
        texts, keyed hashes, shared holds and mentions): what is left is what its
        sessions hold. Outputs do not change; the next events fill the caches again.
        Memory measures (``bench.memory``) read a session's cost with them empty, so
        that a cache filling up, or emptied when full, is not counted as sessions'
        memory."""
        self._holdings.clear_caches()
        forget_shared()

    # -- state records (for a changelog) ---------------------------------

    @property
    def tracks_changes(self) -> bool:
        """Whether the engine keeps a changelog (made with ``track_changes``)."""
        return self._changelog is not None

    def drain_changes(self) -> list[Record]:
        """State records changed since the last drain (needs ``track_changes``):
        ``(key, value)`` pairs, ``value`` None deleting the key; a later record for
        a key supersedes an earlier one. One record per key per drain, except that a
        session closed and forgotten in the same drain lists its tombstones.

        Write them to a (compacted) changelog after the outputs they belong to are
        acknowledged; :meth:`restore` with the latest value per key rebuilds the
        state as it was at this drain. See :mod:`spanguard.streams.engine.persist`.
        """
        if self._changelog is None:
            return []
        records = self._changelog.drain(self.sessions, self.windows, self.lifetimes.clock)
        self.sessions.settle()
        return records

    def restore(self, records: Iterable[tuple[bytes, bytes]]) -> int:
        """Load sessions from changelog records, the latest value per key with
        tombstones removed (replacing the sessions it names); returns how many
        live sessions were loaded. Closed sessions are remembered as closed."""
        restored = load_sessions(
            records,
            drop_poisoned=self.settings.poisoned == "drop",
            dedup_window=self.settings.dedup_window,
        )
        self.sessions.update(restored.sessions)
        self.windows.update(restored.windows)
        self.lifetimes.restore(restored.clock, restored.markers)
        for key, session in restored.sessions.items():
            if self._changelog is None:
                session.changes = None
            if session.newest_ts is not None:
                self.lifetimes.watch(key, session.newest_ts)
        return len(restored.sessions)

    # -- entry points ----------------------------------------------------

    def process_raw(self, raw: bytes | None, source: Source) -> list[OutputEvent]:
        """Decode, validate and process one record (bytes as they were on the topic;
        None for a tombstone, which is rejected with its key)."""
        self.stats.events += 1
        if not raw:
            what = "a tombstone (no value)" if raw is None else "an empty value"
            detail = f"{what}: input events are JSON objects and are never deleted"
            return [self._reject(b"", source, RejectReason.INVALID_JSON, detail, Identity())]
        decoded = decode(raw, self.settings.max_event_bytes)
        if isinstance(decoded, Invalid):
            self._advance_silently(decoded.identity)
            return [self._reject(raw, source, decoded.reason, decoded.detail, decoded.identity)]
        return self._process(decoded, raw, source)

    def process(self, event: InputEvent, source: Source | None = None) -> list[OutputEvent]:
        """Process an already validated event (tests, in-process clients)."""
        self.stats.events += 1
        raw = orjson.dumps(event.model_dump(mode="json", exclude_none=True))
        return self._process(event, raw, source or Source("direct", -1, -1))

    def process_many(self, events: Iterable[InputEvent]) -> list[OutputEvent]:
        """Process events in order and return every output, in order."""
        outputs: list[OutputEvent] = []
        for event in events:
            outputs.extend(self.process(event))
        return outputs

    def refuse(
        self, raw: bytes | None, source: Source, reason: RejectReason, detail: str
    ) -> EventRejected:
        """A dead letter for a record refused before the engine processes it (the runtime
        refuses records on the wrong partition); no session's state is touched. The
        record is read only to name its tenant, session and event when it can be."""
        self.stats.events += 1
        identity = Identity()
        if raw:
            decoded = decode(raw, self.settings.max_event_bytes)
            identity = decoded.identity if isinstance(decoded, Invalid) else _identity(decoded)
        return self._reject(raw or b"", source, reason, detail, identity)

    def session(self, tenant: str, session_id: str) -> SessionState | None:
        """The live state of a session, or None (never seen, or closed)."""
        return self.sessions.get((tenant, session_id))

    # -- dispatch --------------------------------------------------------

    def _process(self, event: InputEvent, raw: bytes, source: Source) -> list[OutputEvent]:
        key = (event.tenant, event.session_id)
        self._last_ts = event.ts
        self._tick(event.ts, source.received, key)
        ended = self.markers.get(key)
        if ended is not None and ended.kind == "expired":
            if event.seq <= ended.last_seq:
                self.stats.duplicates += 1  # redelivered: processed before the expiry
                return []
            when = "" if ended.at is None else f" at {ended.at.isoformat()}"
            detail = (
                f"the session expired{when} (no event for "
                f"{self.settings.idle_timeout}); start a new session id and report its "
                "context again"
            )
            return [
                self._reject(
                    raw, source, RejectReason.SESSION_EXPIRED, detail, _identity(event), event.ts
                )
            ]
        closed_at = None if ended is None else ended.last_seq
        if closed_at is not None and event.seq <= closed_at:
            # Re-delivered after a restart (at-least-once): it was processed before
            # the close, so it is a duplicate, not a new event.
            self.stats.duplicates += 1
            return []
        if closed_at is not None:
            return [
                self._reject(
                    raw,
                    source,
                    RejectReason.SESSION_CLOSED,
                    "the session was closed; start a new session id",
                    _identity(event),
                    event.ts,
                )
            ]
        session = self.sessions.get(key)
        if session is None:
            cap = self.settings.max_live_sessions
            if cap and len(self.sessions) >= cap:
                detail = (
                    f"the partition holds {len(self.sessions)} live sessions, its limit "
                    f"(max_live_sessions {cap}); this session starts when one ends or expires"
                )
                return [
                    self._reject(
                        raw, source, RejectReason.LIMIT_REACHED, detail, _identity(event), event.ts
                    )
                ]
            session = self.sessions[key] = SessionState(
                tenant=event.tenant, session_id=event.session_id
            )
            if self._changelog is not None:
                self._changelog.track(session)
        window = self.windows.get(key)
        if window is None:  # a new session, or one handed in (the SDK previews on a copy)
            window = self.windows[key] = DedupWindow()
        dedup_window = self.settings.dedup_window
        digest = event_digest(event.event_id) if dedup_window > 0 else 0  # once an event
        if dedup_window > 0 and digest in window:
            self.stats.duplicates += 1
            return []
        self._touch_newest(session, event.ts)
        if event.type == "span.added" and event.span_id in session.spans:
            identity = _identity(event)
            self._advance_silently(identity)
            return [
                self._reject(
                    raw,
                    source,
                    RejectReason.SPAN_EXISTS,
                    f"span {event.span_id!r} is live; a rewrite changes live spans",
                    identity,
                    event.ts,
                )
            ]
        over = self._over_span_limit(session, event)
        if over is not None:
            identity = _identity(event)
            self._advance_silently(identity)
            return [self._reject(raw, source, RejectReason.LIMIT_REACHED, over, identity, event.ts)]
        session.accepted += 1
        emission = Emission(
            self.settings,
            event.tenant,
            event.session_id,
            event.event_id,
            session.accepted,
            event.ts,
        )
        self._check_seq(session, event, emission)
        if dedup_window > 0:
            window.add(digest, dedup_window)
        if self._changelog is not None:
            self._changelog.accepted(key, session)
        # by ``type``, not class: a decoded event is the Struct derived from its model
        if event.type == "span.added":
            self._add_span(session, event, emission)
        elif event.type == "scores.computed":
            apply_scores(session, event, emission)
            self._close_cycle(session, emission)
        elif event.type == "context.rewritten":
            self._close_cycle(session, emission)
            apply_rewrite(session, event, emission, self._holdings)
        elif event.type == "eviction.requested":
            self._close_cycle(session, emission)
            decide(session, event, emission)
        elif event.type == "session.closed":
            closed = Marker("closed", session.last_seq or 0, self.lifetimes.clock or event.ts)
            self._end(key, closed)
            self.stats.sessions_closed += 1
            return emission.outputs
        session.forget_gone(self.settings.max_gone_spans)
        return emission.outputs

    # -- limits a runaway harness cannot break ----------------------------

    def _over_span_limit(self, session: SessionState, event: InputEvent) -> str | None:
        """Why ``event`` would take the session past ``max_live_spans`` (None if it
        does not): a ``span.added`` at the limit, or a rewrite that leaves more spans
        live than the limit and than before (one that shrinks the live set always
        passes, so a session above a lowered limit can still be compacted)."""
        cap = self.settings.max_live_spans
        live = len(session.spans)
        if not cap:
            return None
        if event.type == "span.added":
            after = live + 1
        elif event.type == "context.rewritten" and len(event.context) + live > cap:
            after = live_after(session, event)  # only near the limit: the bound above is loose
        else:
            return None
        if after <= cap or after <= live:
            return None
        return (
            f"the event would leave {after} live spans, the session's limit is "
            f"{cap} (max_live_spans); evict or compact first"
        )

    # -- idle expiry (contract 1.2) --------------------------------------

    def _tick(self, ts: datetime, received: datetime | None, busy: SessionKey) -> None:
        """Move the clock, expire the sessions it leaves idle, forget old markers, pack
        idle sessions but ``busy``, the session of the event that moved it."""
        lifetimes = self.lifetimes
        before = lifetimes.clock
        lifetimes.advance(ts, received)
        if lifetimes.clock == before:
            return
        changelog = self._changelog
        if changelog is not None:
            changelog.clock_moved()
        for key, at in list(lifetimes.expired(self.sessions.newest)):
            session = self.sessions[key]
            self._end(key, Marker("expired", session.last_seq or 0, at))
            self.stats.sessions_expired += 1
        for key in list(lifetimes.forgotten()):
            if changelog is not None:
                changelog.forgotten(key)
        self.sessions.cool(lifetimes.clock, () if changelog is None else changelog.owing(), busy)

    def _touch_newest(self, session: SessionState, ts: datetime) -> None:
        if session.newest_ts is None or ts > session.newest_ts:
            session.newest_ts = ts
            key = (session.tenant, session.session_id)
            self.lifetimes.watch(key, ts)
            self.sessions.watch(key, ts)

    def _end(self, key: SessionKey, marker: Marker) -> None:
        """A session closed or expired: its state and window go, its marker stays."""
        session = self.sessions.pop(key)
        self.windows.pop(key, None)
        self.markers.mark(key, marker)
        if self._changelog is not None:
            self._changelog.ended(key, session, marker)

    # -- rules that need no module of their own -------------------------

    def _check_seq(self, session: SessionState, event: InputEvent, emission: Emission) -> None:
        last = session.last_seq
        session.last_seq = event.seq if last is None else max(last, event.seq)
        if last is None or event.seq == last + 1:
            return
        evidence = {"expected": last + 1, "actual": event.seq}
        if event.seq > last + 1:
            emission.fault(
                FaultKind.SEQUENCE_GAP, [], {**evidence, "missing": event.seq - last - 1}
            )
        else:
            emission.fault(FaultKind.OUT_OF_ORDER, [], evidence)

    def _add_span(self, session: SessionState, event: SpanAdded, emission: Emission) -> None:
        holdings = self._holdings.build(
            session.tenant,
            session.known_types,
            session.names,
            event.text,
            event.content_hash,
            event.introduces,
            event.mentions,
        )
        session.known_types = self._holdings.learn_types(session.known_types, holdings)
        parents = session.lineage(event.derived_from)
        span = SpanState(
            span_id=event.span_id,
            text_digest=to_digest(event.content_hash),
            tokens=event.tokens,
            position=event.position,
            arrival=session.next_arrival(),
            added_seq=event.seq,
            derived_from=parents,
            holds=holdings.holds,
            mentions=holdings.mentions,
            surfaces=holdings.surfaces,
            role=event.role,
            protected=event.protected,
            calls=tuple(dict.fromkeys(map(session.call_id, event.tool_call_ids or ()))),
            answers=None if event.tool_call_id is None else session.call_id(event.tool_call_id),
        )
        counter = created_counter(session, parents) if parents else 0
        session.add_span(span)
        if counter:
            apply_counters(session, emission, [(span, counter)], cause=event.event_id)

    def _close_cycle(self, session: SessionState, emission: Emission) -> None:
        outcome: CycleOutcome | None = close_window(session, emission)
        if outcome is not None:
            self.stats.cycles_closed += 1
            self.stats.cycles_healthy += outcome.healthy

    def _advance_silently(self, identity: Identity) -> None:
        # A rejected event with a readable identity still moves the session's seq
        # baseline, so the next good event is not reported as a gap.
        if identity.tenant is None or identity.session_id is None or identity.seq is None:
            return
        key = (identity.tenant, identity.session_id)
        session = self.sessions.get(key)
        if session is not None and session.last_seq is not None:
            session.last_seq = max(session.last_seq, identity.seq)
            if self._changelog is not None:
                self._changelog.touched(key)

    def _reject(
        self,
        raw: bytes,
        source: Source,
        reason: RejectReason,
        detail: str,
        identity: Identity,
        ts: datetime | None = None,
    ) -> EventRejected:
        self.stats.rejected += 1
        settings = self.settings
        kept = keep(raw, source.key, source.headers, settings.dead_letter_raw_limit)
        if reason is RejectReason.TOO_LARGE and identity.tenant is None:
            tenant, session_id = scan_identity(raw[: settings.dead_letter_raw_limit])
            identity = Identity(tenant=tenant, session_id=session_id)
        when = ts or _parse_ts(identity.ts) or source.received or self._last_ts
        return build(
            EventRejected,
            type="event.rejected",
            schema_version=1,
            rejection_id=output_id(
                "rej",
                source.topic,
                source.partition,
                source.offset,
                len(raw),
                identity.event_id,
                reason.value,
            ),
            reason=reason,
            detail=detail,
            raw=kept.raw,
            raw_size=len(raw),
            raw_truncated=kept.raw_truncated,
            tenant=identity.tenant,
            session_id=identity.session_id,
            caused_by=identity.event_id,
            topic=source.topic,
            partition=source.partition,
            offset=source.offset,
            ts=when,
            raw_sha256=kept.raw_sha256,
            key=kept.key,
            key_truncated=kept.key_truncated,
            headers=kept.headers,
            headers_truncated=kept.headers_truncated,
        )


def _identity(event: InputEvent) -> Identity:
    return Identity(event.tenant, event.session_id, event.event_id, event.seq)


def _parse_ts(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
