"""Session state as small keyed records: what a changelog stores, and back.

One input event writes records in proportion to what it changed, never the
whole session: a header per session (counters, drift window), one record per
span that changed, one per span that left (lineage still needs its counter),
and one slot of the duplicate-window ring. Keys are JSON arrays
``[tenant, session_id, kind, name]``, so no separator can collide with an id.

Kinds: ``h`` header, ``s`` live span, ``g`` gone span, ``d`` duplicate-window
slot, ``x`` closed-session marker (its value: the last ``seq`` accepted). A value
of ``None`` deletes the record.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from streams.engine.referent_index import Mention
from streams.engine.state import (
    BoundScore,
    DriftPoint,
    DriftWindow,
    GoneSpan,
    SessionState,
    SpanState,
)

Record = tuple[bytes, bytes | None]
DRIFT_POINTS_KEPT = 16


def record_key(tenant: str, session_id: str, kind: str, name: str = "") -> bytes:
    """The changelog key of one record."""
    return orjson.dumps([tenant, session_id, kind, name])


def dump_changes(session: SessionState, dedup_window: int) -> Iterator[Record]:
    """The header and the records ``session`` changed since the last call (and
    clear the marks)."""
    tenant, sid = session.tenant, session.session_id
    yield record_key(tenant, sid, "h"), _header(session)
    first_kept = session.remembered - len(session.recent_ids)
    for kind, name in sorted(session.dirty):
        key = record_key(tenant, sid, kind, name)
        if kind == "s":
            span = session.spans.get(name)
            yield key, None if span is None else _span(span)
        elif kind == "g":
            gone = session.gone.get(name)
            yield key, None if gone is None else orjson.dumps([gone.seq, gone.stale_rewrites])
        elif kind == "d":
            # A ring slot holds the newest event id written to it: number n goes
            # to slot n % window.
            newest = session.remembered - 1
            n = newest - (newest - int(name)) % dedup_window
            yield key, orjson.dumps([n, session.recent_ids[n - first_kept]])
    session.dirty.clear()


def dump_closed(session: SessionState, dedup_window: int) -> Iterator[Record]:
    """Delete every record of a closed session and leave its closed marker."""
    tenant, sid = session.tenant, session.session_id
    yield record_key(tenant, sid, "h"), None
    for span_id in session.spans:
        yield record_key(tenant, sid, "s", span_id), None
    for span_id in session.gone:
        yield record_key(tenant, sid, "g", span_id), None
    for slot in range(min(session.remembered, dedup_window)):
        yield record_key(tenant, sid, "d", str(slot)), None
    yield record_key(tenant, sid, "x"), orjson.dumps(session.last_seq or 0)


def _header(session: SessionState) -> bytes:
    window = session.drift_window
    return orjson.dumps(
        {
            "last_seq": session.last_seq,
            "accepted": session.accepted,
            "arrivals": session.arrivals,
            "freeze_streak": session.freeze_streak,
            "remembered": session.remembered,
            "known_types": sorted(session.known_types),
            "drift_window": None
            if window is None
            else [window.rewrite_id, window.mean_before, window.tokens_before, window.clean],
            "drift_streak": [
                [p.rewrite_id, p.mean_before, p.mean_after, p.tokens_before, p.tokens_after]
                for p in session.drift_streak[-DRIFT_POINTS_KEPT:]
            ],
        }
    )


def _span(span: SpanState) -> bytes:
    bound = span.bound
    return orjson.dumps(
        [
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
            [list(h) for h in span.holds],
            [[m.key, m.type, m.surface] for m in span.mentions],
        ]
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
    ) = raw
    return SpanState(
        span_id=span_id,
        text_sha256=text_hash,
        tokens=tokens,
        position=position,
        arrival=arrival,
        added_seq=added_seq,
        derived_from=tuple(parents),
        stale_rewrites=stale,
        poisoned=poisoned,
        bound=None if bound is None else BoundScore(*bound),
        holds=tuple((k, t) for k, t in holds),
        mentions=tuple(Mention(key=k, type=t, surface=s) for k, t, s in mentions),
    )


def load_sessions(
    records: Iterable[tuple[bytes, bytes]], drop_poisoned: bool
) -> tuple[dict[tuple[str, str], SessionState], dict[tuple[str, str], int]]:
    """Rebuild sessions (and the closed ones with their last ``seq``) from their
    records, in any order."""
    grouped: dict[tuple[str, str], list[tuple[str, str, bytes]]] = defaultdict(list)
    closed: dict[tuple[str, str], int] = {}
    for key, value in records:
        tenant, sid, kind, name = orjson.loads(key)
        if kind == "x":
            closed[(tenant, sid)] = orjson.loads(value)
        else:
            grouped[(tenant, sid)].append((kind, name, value))
    sessions: dict[tuple[str, str], SessionState] = {}
    for (tenant, sid), items in grouped.items():
        if (tenant, sid) in closed:
            continue
        session = SessionState(tenant=tenant, session_id=sid)
        ring: list[tuple[int, str]] = []
        for kind, name, value in items:
            data = orjson.loads(value)
            if kind == "h":
                _load_header(session, data)
            elif kind == "s":
                session.spans[name] = _load_span(name, data)
            elif kind == "g":
                session.gone[name] = GoneSpan(seq=data[0], stale_rewrites=data[1])
            elif kind == "d":
                ring.append((data[0], data[1]))
        ring.sort()
        session.recent_ids = deque(event_id for _, event_id in ring)
        session.recent_set = set(session.recent_ids)
        if drop_poisoned:
            session.poisoned_pending = {s.span_id for s in session.spans.values() if s.poisoned}
        session.reindex()
        session.dirty.clear()
        sessions[(tenant, sid)] = session
    return sessions, closed


def _load_header(session: SessionState, data: dict[str, Any]) -> None:
    session.last_seq = data["last_seq"]
    session.accepted = data["accepted"]
    session.arrivals = data["arrivals"]
    session.freeze_streak = data["freeze_streak"]
    session.remembered = data["remembered"]
    session.known_types = set(data["known_types"])
    window = data["drift_window"]
    session.drift_window = None if window is None else DriftWindow(*window)
    session.drift_streak = [DriftPoint(*p) for p in data["drift_streak"]]
