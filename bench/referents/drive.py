"""Turning a :class:`~bench.referents.model.Dialogue` into a spanguard trace while
the engine runs it.

The trace is built incrementally, as a harness would: a ``span.added`` per turn;
every :data:`EVERY` spans a ``scores.computed`` pass (BM25 of every *live* span
against the latest user turn, :mod:`bench.referents.bm25`) and an
``eviction.requested`` with the policy. The engine's ``eviction.decided`` says
which spans left (committed), so the next pass scores only what is still live.
Each line goes through ``Engine.process_raw`` exactly as ``spanguard replay``
would read it from a file, so the lines can be written out and replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from bench.referents.bm25 import score_pass
from bench.referents.model import Dialogue
from spanguard.schemas import (
    EventRejected,
    EvictionDecided,
    IntegrityFault,
    SpanPinned,
    text_sha256,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source

EVERY = 6
"""Spans added between two scoring passes (each followed by a request)."""

POLICIES: dict[str, dict[str, float | int]] = {
    "threshold": {"threshold": 0.15},
    "keep_top_k": {"keep_top_k": 4},
}
"""The two pruning policies of the issue, by name."""

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SCORER = "bm25-stdlib-v1"
TOPIC = "referents"


def engine_settings() -> EngineSettings:
    """The engine settings of the benchmark: keys in clear and mention surfaces in
    pins, so a pin can be read; everything else the defaults."""
    return EngineSettings(clear_keys=True, emit_surfaces=True)


SETTINGS_TOML = "[engine]\nclear_keys = true\nemit_surfaces = true\n"
"""The same settings as a ``spanguard replay --config`` file."""


@dataclass(frozen=True, slots=True)
class PinSeen:
    """A ``span.pinned`` as the benchmark reads it."""

    span_id: str
    pinned_for: tuple[str, ...]
    key: str | None
    type: str | None
    surface: str | None
    path: tuple[str, ...]


@dataclass(slots=True)
class RequestSeen:
    """One eviction request and what the gate made of it."""

    request_id: str
    live: tuple[str, ...]
    """Span ids live just before the request, in position order."""
    selected: tuple[str, ...]
    """What the policy selected: committed + refused."""
    committed: tuple[str, ...]
    refused: dict[str, str]
    pins: list[PinSeen]
    action: str


@dataclass(slots=True)
class SessionRun:
    """Everything one session produced."""

    dialogue: Dialogue
    policy: str
    session_id: str
    requests: list[RequestSeen] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    """Fault kinds, one per ``integrity.fault``."""
    rejected: list[str] = field(default_factory=list)
    """Reasons of ``event.rejected`` (a broken trace; 0 expected)."""
    lines: list[bytes] = field(default_factory=list)
    """The trace (kept only when asked for)."""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """Every ``eviction.decided`` and ``span.pinned`` as JSON data (kept when asked for)."""


class _Envelope:
    """Numbers the events of one session as a harness does (``seq`` +1 per event,
    ``event_id`` unique, ``ts`` one second per event)."""

    def __init__(self, session_id: str, tenant: str) -> None:
        self.session_id = session_id
        self.tenant = tenant
        self.seq = 0

    def event(self, type_: str, turn: int, **fields: Any) -> dict[str, Any]:
        ts = START + timedelta(seconds=self.seq)
        event: dict[str, Any] = {
            "type": type_,
            "schema_version": 1,
            "event_id": f"{self.session_id}-e{self.seq:04d}",
            "session_id": self.session_id,
            "tenant": self.tenant,
            "seq": self.seq,
            "turn": turn,
            "ts": ts.isoformat().replace("+00:00", "Z"),
        }
        event.update(fields)
        self.seq += 1
        return event


def run_dialogue(
    engine: Engine,
    dialogue: Dialogue,
    policy: str,
    *,
    tenant: str = "sgd",
    keep_lines: bool = False,
    every: int = EVERY,
) -> SessionRun:
    """Drive ``engine`` through ``dialogue`` under ``policy`` (a key of
    :data:`POLICIES`) and return what each request did.

    The session id is ``<dialogue id>-<policy>``; the session is closed at the
    end (its state freed). With ``keep_lines`` the trace's lines and the
    decisions and pins (as JSON data) are kept, for writing and for comparison
    with a replay.
    """
    session_id = f"{dialogue.dialogue_id}-{policy}"
    run = SessionRun(dialogue, policy, session_id)
    env = _Envelope(session_id, tenant)
    live: dict[str, str] = {}  # span id -> text, in position order
    last_user: str | None = None
    offset = 0

    def send(event: dict[str, Any]) -> list[Any]:
        nonlocal offset
        line = orjson.dumps(event)
        if keep_lines:
            run.lines.append(line)
        outputs = engine.process_raw(line, Source(TOPIC, -1, offset))
        offset += 1
        for out in outputs:
            if isinstance(out, IntegrityFault):
                run.faults.append(str(out.kind))
            elif isinstance(out, EventRejected):
                run.rejected.append(str(out.reason))
            if keep_lines and isinstance(out, EvictionDecided | SpanPinned):
                run.decisions.append(out.model_dump(mode="json", exclude={"ts"}))
        return outputs

    passes = 0
    for position, turn in enumerate(dialogue.turns):
        fields: dict[str, Any] = {
            "span_id": turn.span_id,
            "position": position,
            "tokens": turn.tokens,
            "role": turn.role,
            "text": turn.text,
        }
        if turn.tool_call_ids:
            fields["tool_call_ids"] = list(turn.tool_call_ids)
        if turn.tool_call_id is not None:
            fields["tool_call_id"] = turn.tool_call_id
        if turn.protected:
            fields["protected"] = True
        send(env.event("span.added", position, **fields))
        live[turn.span_id] = turn.text
        if turn.role == "user":
            last_user = turn.text
        if (position + 1) % every or last_user is None:
            continue
        passes += 1
        scores = score_pass(last_user, live)
        entries = [
            {
                "score_id": f"p{passes}-{span_id}",
                "span_id": span_id,
                "score": round(scores[span_id], 6),
                "text_sha256": text_sha256(text),
            }
            for span_id, text in live.items()
        ]
        send(env.event("scores.computed", position, scorer=SCORER, scores=entries))
        request_id = f"r{passes}"
        outputs = send(
            env.event(
                "eviction.requested", position, request_id=request_id, policy=POLICIES[policy]
            )
        )
        pins = [
            PinSeen(
                out.span_id,
                tuple(out.pinned_for),
                out.mention.key,
                out.mention.type,
                out.mention.surface,
                tuple(out.path),
            )
            for out in outputs
            if isinstance(out, SpanPinned)
        ]
        decision = next(out for out in outputs if isinstance(out, EvictionDecided))
        refused = {r.span_id: str(r.reason) for r in decision.refused}
        committed = tuple(decision.committed)
        run.requests.append(
            RequestSeen(
                request_id=request_id,
                live=tuple(live),
                selected=committed + tuple(refused),
                committed=committed,
                refused=refused,
                pins=pins,
                action=str(decision.action),
            )
        )
        for span_id in (*committed, *decision.dropped):
            live.pop(span_id, None)
    send(env.event("session.closed", len(dialogue.turns)))
    return run


def new_engine() -> Engine:
    """An engine with :func:`engine_settings`."""
    return Engine(engine_settings())
