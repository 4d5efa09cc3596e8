"""Session state as small keyed records: what a changelog stores, and back.

One drain writes, per session it touched, the session's header and the few
records the events changed, never the whole session. Keys are JSON arrays
``[tenant, session_id, kind, name]``, so no separator can collide with an id.

Kinds:

* ``h`` the header: counters, drift window, known types, the open chunk of the
  duplicate window (``"chunk"``, its digests) and the *tail* (the newest spans, fewer
  than ``TAIL_SPANS``). Written whenever the session changes. For a closed session
  its value is ``{"closed": <last seq>}`` (the closed marker).
* ``b`` a block: the spans (live or gone) of ``BLOCK_SPANS`` consecutive
  arrival numbers. A span keeps its block for life; a gone span stays in it
  as ``[seq, counter, arrival]`` (lineage still counts it). A span changed by an
  event rewrites its block; spans in the tail cost nothing extra.
* ``d`` a full chunk of ``CHUNK_IDS`` duplicate-window ids, in a ring of
  slots large enough for the window: ``[chunk number, digests]``, written at the
  first drain after it fills.

The duplicate window is kept as the window holds it: each id's stable 64-bit digest
(:func:`~spanguard.streams.engine.dedup.event_digest`, a JSON integer), read from the
window's ring when written, so nothing else keeps the ids. A chunk or open chunk
partly out of the window when written holds only its newest digests (a window smaller
than ``CHUNK_IDS``, or a session that accepted more than the window between two
drains), and a chunk wholly out of it by the drain after it fills is not written: a
restore needs neither what left. Records written before the window's digests were
stable hold the ids themselves (strings): a restore digests them.

So a ``span.added`` writes the header (plus a block every ``TAIL_SPANS``
spans and a chunk every ``CHUNK_IDS`` events), and the bytes per event do not
grow with the session. Closing a session writes its closed marker and a
tombstone for each block and chunk it wrote. A value of ``None`` deletes.

Restoring from the latest value per key (tombstones removed), taken at any
drain, rebuilds exactly the state the engine had at that drain.

Referent keys are written in their text form, ``hmac-sha256:<hex>`` as outputs carry
them (the engine holds digests, :data:`~spanguard.streams.engine.keys.StoredKey`):
the records stay readable, and those written before the engine held digests load
as they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from spanguard.streams.engine.changes import BLOCK_SPANS, CHUNK_IDS, SessionChanges
from spanguard.streams.engine.dedup import DedupWindow, event_digest
from spanguard.streams.engine.holdings import (
    share_holds,
    share_id,
    share_mentions,
    share_strings,
)
from spanguard.streams.engine.jsonbytes import json_bytes
from spanguard.streams.engine.keys import StoredKey, key_text, key_texts, stored_key
from spanguard.streams.engine.markers import Marker, SessionKey
from spanguard.streams.engine.referent_index import Mention, flat_holds, hold_pairs
from spanguard.streams.engine.state import (
    BoundScore,
    Digest,
    DriftPoint,
    DriftWindow,
    SessionState,
    SpanState,
    to_digest,
)

Record = tuple[bytes, bytes | None]


class Changelog:
    """The state records an engine owes its changelog: the sessions changed since the
    last drain (each with its :class:`~spanguard.streams.engine.changes.SessionChanges`),
    the records of ended and forgotten sessions, and the clock."""

    __slots__ = ("_clock_moved", "_pending", "_touched", "dedup_window")

    def __init__(self, dedup_window: int) -> None:
        self.dedup_window = dedup_window
        self._touched: set[SessionKey] = set()
        self._pending: list[Record] = []
        self._clock_moved = False

    @staticmethod
    def track(session: SessionState) -> None:
        """Keep the changes of a new session."""
        session.changes = SessionChanges()

    def touched(self, key: SessionKey) -> None:
        """The session ``key`` changed (its header is written at the next drain)."""
        self._touched.add(key)

    def accepted(self, key: SessionKey, session: SessionState) -> None:
        """The session accepted an event (its id entered the duplicate window, which the
        chunks are read from)."""
        self._touched.add(key)
        if self.dedup_window > 0:
            _changes(session).remembered += 1

    def ended(self, key: SessionKey, session: SessionState, marker: Marker) -> None:
        """The session closed or expired: its marker replaces its records."""
        self._touched.discard(key)
        self._pending.extend(dump_ended(session, marker, self.dedup_window))

    def forgotten(self, key: SessionKey) -> None:
        """An ended session's marker ran out of retention."""
        self._pending.append(forget_record(key))

    def owing(self) -> AbstractSet[SessionKey]:
        """The sessions changed since the last drain (their records are owed)."""
        return self._touched

    def clock_moved(self) -> None:
        """The partition's clock moved (its record is written at the next drain)."""
        self._clock_moved = True

    def drain(
        self,
        sessions: Mapping[SessionKey, SessionState],
        windows: Mapping[SessionKey, DedupWindow],
        clock: datetime | None,
    ) -> list[Record]:
        """Every record owed since the last drain (the duplicate-window chunks read from
        ``windows``, after ``sessions`` gave the session: a cold one is thawed, its
        window back in ``windows``), the marks cleared."""
        records = self._pending
        self._pending = []
        if self._clock_moved:
            records.append(clock_record(clock))
            self._clock_moved = False
        for key in sorted(self._touched):
            session = sessions.get(key)
            if session is not None:
                records.extend(dump_changes(session, windows.get(key), self.dedup_window))
        self._touched.clear()
        return records


def _changes(session: SessionState) -> SessionChanges:
    changes = session.changes
    assert isinstance(changes, SessionChanges), "the session's changes are not tracked"
    return changes


def record_key(tenant: str, session_id: str, kind: str, name: str = "") -> bytes:
    """The changelog key of one record."""
    return json_bytes([tenant, session_id, kind, name])


def chunk_slots(dedup_window: int) -> int:
    """Ring slots for duplicate-window chunks: enough that every chunk holding an
    id of the window keeps its slot until the window has passed it (chunk ``n`` is
    overwritten by chunk ``n + slots``, written once ``(n + slots + 1) * CHUNK_IDS``
    ids were accepted, when the window has passed all of ``n``'s ids by ``CHUNK_IDS`` or
    more). A chunk not written (gone from the window by the drain after it filled)
    leaves the record of an older chunk in its slot: a restore skips a record whose
    chunk number is not the one it looks for."""
    return -(-dedup_window // CHUNK_IDS) + 1


_EMPTY_WINDOW = DedupWindow()
"""The window of a session that has none (never added to)."""


def dump_changes(
    session: SessionState, window: DedupWindow | None, dedup_window: int
) -> Iterator[Record]:
    """The header and the records ``session`` changed since the last call (and
    clear the marks); ``window`` is the session's duplicate window (None: it has none,
    as a session handed to the engine)."""
    tenant, sid = session.tenant, session.session_id
    changes = _changes(session)
    changes.roll_tail(session.arrivals)
    recent = _EMPTY_WINDOW if window is None else window
    # The window holds the newest ``len(recent)`` accepted ids: the oldest it holds is
    # accepted id number ``oldest`` (counting from 0, as the chunks do).
    oldest = changes.remembered - len(recent)
    yield record_key(tenant, sid, "h"), _header(session, changes, recent, oldest)
    for block in sorted(changes.dirty_blocks):
        # A block holds only arrivals below the tail: newer ones live in the header.
        stop = min((block + 1) * BLOCK_SPANS, changes.persisted_below)
        entries = _entries(session, changes, block * BLOCK_SPANS, stop)
        yield record_key(tenant, sid, "b", str(block)), json_bytes(entries) if entries else None
    filled = changes.chunks_to_write()
    if filled and dedup_window > 0:
        slots = chunk_slots(dedup_window)
        for number in filled:
            start = number * CHUNK_IDS - oldest
            digests = recent.between(start, start + CHUNK_IDS)
            if digests:  # else the chunk left the window before this drain: not needed
                yield (
                    record_key(tenant, sid, "d", str(number % slots)),
                    json_bytes([number, digests]),
                )
    changes.written()


def dump_ended(session: SessionState, marker: Marker, dedup_window: int) -> Iterator[Record]:
    """The marker of a closed or expired session, and a tombstone for every other record
    it has."""
    tenant, sid = session.tenant, session.session_id
    changes = _changes(session)
    yield record_key(tenant, sid, "h"), json_bytes(_marker_value(marker))
    if changes.persisted_below > 0:
        for block in range((changes.persisted_below - 1) // BLOCK_SPANS + 1):
            yield record_key(tenant, sid, "b", str(block)), None
    if dedup_window > 0:
        # Every slot a chunk may have been written to (a chunk never written leaves a
        # tombstone for a record that may not exist: harmless).
        written = min(changes.remembered // CHUNK_IDS, chunk_slots(dedup_window))
        for slot in range(written):
            yield record_key(tenant, sid, "d", str(slot)), None


def _marker_value(marker: Marker) -> dict[str, Any]:
    at = None if marker.at is None else marker.at.isoformat()
    return {marker.kind: marker.last_seq, "at": at}


def forget_record(key: tuple[str, str]) -> Record:
    """The tombstone of a forgotten marker (its retention ran out)."""
    return record_key(key[0], key[1], "h"), None


CLOCK_KEY = record_key("", "", "c")
"""The record of the partition's event-time clock (idle expiry)."""


def clock_record(clock: datetime | None) -> Record:
    """The partition's clock as a state record."""
    return CLOCK_KEY, json_bytes({"clock": None if clock is None else clock.isoformat()})


def _entries(
    session: SessionState, changes: SessionChanges, start: int, stop: int
) -> list[list[Any]]:
    """``[span id, state]`` of the spans with arrival numbers in [start, stop)."""
    found: list[list[Any]] = []
    for span_id in changes.span_ids(start, stop):
        live = session.spans.get(span_id)
        if live is not None:
            found.append([span_id, _span(live)])
        else:
            gone = session.gone[span_id]
            record = [gone.seq, gone.stale_rewrites, gone.arrival]
            found.append([span_id, [*record, key_texts(gone.keys)] if gone.keys else record])
    return found


def _header(
    session: SessionState, changes: SessionChanges, recent: DedupWindow, oldest: int
) -> bytes:
    window = session.drift_window
    open_start = changes.remembered - changes.remembered % CHUNK_IDS
    return json_bytes(
        {
            "last_seq": session.last_seq,
            "accepted": session.accepted,
            "arrivals": session.arrivals,
            "freeze_streak": session.freeze_streak,
            "newest_ts": None if session.newest_ts is None else session.newest_ts.isoformat(),
            "thrash": [session.thrash_streak, session.last_rewrite_turn],
            "remembered": changes.remembered,
            "known_types": sorted(session.known_types),
            # The book's digests in their text form, as records have always held them.
            "names": [
                [key_text(entry), None if value is None else [key_text(value[0]), *value[1:]]]
                for entry, value in session.names.entries.items()
            ],
            "name_firsts": sorted(key_texts(session.names.firsts)),
            "drift_window": None
            if window is None
            else [window.rewrite_id, window.mean_before, window.tokens_before, window.clean],
            "drift_streak": [
                [p.rewrite_id, p.mean_before, p.mean_after, p.tokens_before, p.tokens_after]
                for p in session.drift_streak
            ],
            "drift_consecutive": session.drift_consecutive,
            "persisted_below": changes.persisted_below,
            "tail": _entries(session, changes, changes.persisted_below, session.arrivals + 1),
            # The open chunk: the digests accepted since the last full chunk, as held.
            "chunk": recent.between(open_start - oldest, len(recent)),
        }
    )


def _span(span: SpanState) -> list[Any]:
    bound = span.bound
    return [
        span.text_sha256,
        span.tokens,
        span.position,
        span.arrival,
        span.added_seq,
        list(span.derived_from),
        span.stale_rewrites,
        span.poisoned,
        None
        if bound is None
        else [
            bound.score_id,
            bound.score,
            bound.query_sha256,
            bound.text_sha256,
            bound.bound_seq,
        ],
        # Pairs on the wire, as records written before flat holds have them.
        [[key_text(key), type_] for key, type_ in hold_pairs(span.holds)],
        [[_key_text(m.key), m.type, m.surface] for m in span.mentions],
        *([extra] if (extra := _span_extra(span)) else []),
    ]


def _key_text(key: StoredKey | None) -> str | None:
    return None if key is None else key_text(key)


def _stored_key(text: str | None) -> StoredKey | None:
    return None if text is None else stored_key(text)


def _span_extra(span: SpanState) -> dict[str, Any]:
    """What only some spans have, by short name (absent when default): surfaces (with
    ``emit_surfaces``), role, protection, the tool calls it makes and answers."""
    extra: dict[str, Any] = {}
    if span.surfaces:
        extra["s"] = [[key_text(key), surface] for key, surface in span.surfaces]
    if span.role is not None:
        extra["r"] = span.role
    if span.protected:
        extra["p"] = True
    if span.calls:
        extra["c"] = list(span.calls)
    if span.answers is not None:
        extra["a"] = span.answers
    return extra


def _load_bound(raw: list[Any], span_digest: Digest) -> BoundScore:
    # The record's text hash is the span's (a bound score is always of the span's
    # current text), and the span keeps no other.
    score_id, score, query_sha256, _, bound_seq = raw
    return BoundScore(
        score_id=score_id,
        score=score,
        query_sha256=query_sha256,
        text_digest=span_digest,
        bound_seq=bound_seq,
    )


def _load_span(span_id: str, raw: list[Any]) -> SpanState:
    (
        text_hash,
        tokens,
        position,
        arrival,
        added_seq,
        parents,
        stale,
        poisoned,
        bound,
        holds,
        mentions,
        *rest,
    ) = raw
    extra: dict[str, Any] = rest[0] if rest else {}
    digest = to_digest(text_hash)
    return SpanState(
        span_id=span_id,
        text_digest=digest,
        tokens=tokens,
        position=position,
        arrival=arrival,
        added_seq=added_seq,
        derived_from=tuple(parents),
        stale_rewrites=stale,
        poisoned=poisoned,
        bound=None if bound is None else _load_bound(bound, digest),
        holds=share_holds(flat_holds([(stored_key(k), t) for k, t in holds])),
        mentions=share_mentions(
            tuple(Mention(key=_stored_key(k), type=t, surface=s) for k, t, s in mentions)
        ),
        surfaces=tuple((stored_key(k), s) for k, s in extra.get("s", ())),
        role=extra.get("r"),
        protected=extra.get("p", False),
        calls=tuple(extra.get("c", ())),
        answers=extra.get("a"),
    )


def _load_entry(
    session: SessionState, changes: SessionChanges, span_id: str, data: list[Any]
) -> None:
    span_id = share_id(span_id)  # one string for the state's every use, as an event's
    if len(data) <= 4:  # a gone span: [seq, counter, arrival] and the keys it held
        keys = tuple(map(stored_key, data[3])) if len(data) == 4 else ()
        session.gone.leave(span_id, data[0], data[1], data[2], keys)
        changes.reload(data[2], span_id)
    else:
        span = _load_span(span_id, data)
        session.spans[span_id] = span
        changes.reload(span.arrival, span_id)


@dataclass(frozen=True, slots=True)
class Restored:
    """What a changelog holds: live sessions (their changes tracked) and their duplicate
    windows, the markers of ended ones, the clock."""

    sessions: dict[SessionKey, SessionState]
    windows: dict[SessionKey, DedupWindow]
    markers: dict[SessionKey, Marker]
    clock: datetime | None


def load_sessions(
    records: Iterable[tuple[bytes, bytes]], drop_poisoned: bool, dedup_window: int
) -> Restored:
    """Rebuild sessions, the markers of closed and expired ones and the clock from the
    latest value of each record, in any order. Raises ``ValueError`` on a record this
    version does not write."""
    grouped: dict[tuple[str, str], list[tuple[str, str, Any]]] = defaultdict(list)
    headers: dict[tuple[str, str], dict[str, Any]] = {}
    markers: dict[tuple[str, str], Marker] = {}
    clock: datetime | None = None
    for key, value in records:
        tenant, sid, kind, name = orjson.loads(key)
        data = orjson.loads(value)
        if kind == "h":
            ended = _marker_of(data)
            if ended is not None:
                markers[(tenant, sid)] = ended
            else:
                headers[(tenant, sid)] = data
        elif kind in ("b", "d"):
            grouped[(tenant, sid)].append((kind, name, data))
        elif kind == "c":
            clock = None if data["clock"] is None else datetime.fromisoformat(data["clock"])
        else:
            raise ValueError(f"unknown state record kind {kind!r} (key {key!r})")
    sessions: dict[SessionKey, SessionState] = {}
    windows: dict[SessionKey, DedupWindow] = {}
    for name, header in headers.items():
        if name in markers:
            continue
        changes = SessionChanges()
        session = SessionState(tenant=name[0], session_id=name[1], changes=changes)
        _load_header(session, changes, header)
        chunks: dict[int, list[int | str]] = {}
        for kind, _, data in grouped.get(name, ()):
            if kind == "b":
                for span_id, state in data:
                    _load_entry(session, changes, span_id, state)
            else:
                chunks[data[0]] = data[1]
        for span_id, state in header["tail"]:
            _load_entry(session, changes, span_id, state)
        changes.compact()  # no slots for the arrivals of spans forgotten before the drain
        windows[name] = _load_window(changes.remembered, chunks, header["chunk"], dedup_window)
        if drop_poisoned:
            session.poisoned_pending = {s.span_id for s in session.spans.values() if s.poisoned}
        session.reindex()
        sessions[name] = session
    return Restored(sessions, windows, markers, clock)


def _marker_of(data: dict[str, Any]) -> Marker | None:
    """The marker a header record holds, if it is one (a closed marker written before
    1.2 has no time: it is kept for good, as it was)."""
    for kind in ("closed", "expired"):
        if kind in data:
            at = data.get("at")
            return Marker(kind, data[kind], None if at is None else datetime.fromisoformat(at))
    return None


def _load_window(
    remembered: int, chunks: dict[int, list[int | str]], open_chunk: list[int | str], window: int
) -> DedupWindow:
    """The last ``window`` accepted ids (as their digests), from the full chunks and the
    open one, ``remembered`` ids accepted in all.

    A record holds a chunk's newest ids (all of them but for one written partly out of
    the window); a chunk record missing or shorter than needed (the window grew since,
    say) breaks the run: the window holds only the ids after it, so that its ring stays
    the newest ids accepted, in order (what the chunks written later are read from)."""
    recent = DedupWindow()
    if window <= 0:
        return recent
    first = max(0, remembered - window)
    open_number = remembered // CHUNK_IDS
    held: list[int] = []
    for number in range(first // CHUNK_IDS, open_number + 1):
        start = number * CHUNK_IDS
        needed = min(start + CHUNK_IDS, remembered) - max(first, start)
        if needed <= 0:
            continue  # an empty open chunk
        stored = open_chunk if number == open_number else chunks.get(number)
        if stored is None:  # also a slot holding another chunk number (stale)
            held = []
            continue
        if len(stored) < needed:
            held = []
        held.extend(_digests(stored[-needed:]))
    for digest in held:
        recent.add(digest, window)
    return recent


def _digests(stored: list[int | str]) -> list[int]:
    """A chunk's digests: as written, or digested from the ids a record written before
    the digests were stable holds."""
    return [event_digest(item) if isinstance(item, str) else item for item in stored]


def _load_header(session: SessionState, changes: SessionChanges, data: dict[str, Any]) -> None:
    session.last_seq = data["last_seq"]
    session.accepted = data["accepted"]
    session.arrivals = data["arrivals"]
    session.freeze_streak = data["freeze_streak"]
    newest = data.get("newest_ts")
    session.newest_ts = None if newest is None else datetime.fromisoformat(newest)
    session.thrash_streak, session.last_rewrite_turn = data.get("thrash", (0, None))
    changes.remembered = data["remembered"]
    changes.drained_chunks = changes.remembered // CHUNK_IDS  # all written by that drain
    session.known_types = share_strings(frozenset(data["known_types"]))
    session.names.entries = {
        stored_key(entry): None if value is None else (stored_key(value[0]), value[1], value[2])
        for entry, value in data.get("names", ())
    }
    firsts = set(map(stored_key, data.get("name_firsts", ())))
    if firsts:  # else the book keeps its shared empty placeholder
        session.names.firsts = firsts
    window = data["drift_window"]
    session.drift_window = None if window is None else DriftWindow(*window)
    session.drift_streak = tuple(DriftPoint(*p) for p in data["drift_streak"])
    session.drift_consecutive = data.get("drift_consecutive", len(session.drift_streak))
    changes.persisted_below = data["persisted_below"]
