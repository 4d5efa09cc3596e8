"""A small builder of input traces, for tests, examples, benchmarks and the simulator.

It plays the harness: it numbers ``seq`` and ``event_id``, remembers the text of
each span so scores can be bound to the right hash, and writes events as JSON
objects exactly as they would travel on ``spanguard.events``::

    s = SessionScript("s1")
    s.add("a", "account 8841-C, the one flagged last week")
    s.add("b", "did that account clear KYC?")
    s.score(("a", 0.11), ("b", 0.9))
    s.evict(threshold=0.15)
    engine.process_many(s.events())
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from spanguard.schemas import INPUT_ADAPTER, InputEvent, text_sha256

Json = dict[str, Any]


SCORER = "relevance-v1"
"""The scorer of a scoring pass that names none."""


class SessionScript:
    """Builds the input events of one session, in order.

    ``seq`` and ``turn`` may be moved by hand (a harness that lost events, the next
    turn); with ``record`` off the events are only returned, not kept in :attr:`raw`
    (a simulator writing many sessions keeps its own)."""

    def __init__(
        self,
        session_id: str = "s1",
        tenant: str = "acme",
        start: datetime = datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
        step: timedelta = timedelta(seconds=1),
        *,
        record: bool = True,
    ) -> None:
        self.session_id = session_id
        self.tenant = tenant
        self.seq = 0
        self.turn = 0
        self.texts: dict[str, str] = {}
        self.raw: list[Json] = []
        self.record = record
        self._start = start
        self._step = step
        self._position = 0
        self._rewrites = 0
        self._requests = 0
        self._passes = 0

    # -- envelope --------------------------------------------------------

    def _event(self, type_: str, **fields: Any) -> Json:
        event: Json = {
            "type": type_,
            "schema_version": 1,
            "event_id": f"{self.session_id}-e{self.seq}",
            "session_id": self.session_id,
            "tenant": self.tenant,
            "seq": self.seq,
            "turn": self.turn,
            "ts": (self._start + self._step * self.seq).isoformat().replace("+00:00", "Z"),
        }
        event.update({k: v for k, v in fields.items() if v is not None})
        self.seq += 1
        if self.record:
            self.raw.append(event)
        return event

    def clone(self) -> SessionScript:
        """A copy to write on and throw away (a simulator's plan that fails)."""
        twin = copy.copy(self)
        twin.texts = dict(self.texts)
        twin.raw = list(self.raw)
        return twin

    def next_turn(self) -> SessionScript:
        """Start the next turn of the agent loop."""
        self.turn += 1
        return self

    # -- events ----------------------------------------------------------

    def add(
        self,
        span_id: str,
        text: str | None = None,
        *,
        tokens: int | None = None,
        position: int | None = None,
        derived_from: Sequence[str] | None = None,
        introduces: Sequence[Json] | None = None,
        mentions: Sequence[Json] | None = None,
        hash_only: bool = False,
        role: str | None = None,
        tool_call_ids: Sequence[str] | None = None,
        tool_call_id: str | None = None,
        protected: bool | None = None,
    ) -> Json:
        """A ``span.added``; with ``hash_only`` the text is sent as its hash alone."""
        text = text if text is not None else f"span {span_id}"
        self.texts[span_id] = text
        pos = self._position if position is None else position
        self._position = max(self._position, pos) + 1
        return self._event(
            "span.added",
            span_id=span_id,
            position=pos,
            tokens=tokens if tokens is not None else max(1, len(text.split())),
            role=role,
            text=None if hash_only else text,
            text_sha256=text_sha256(text) if hash_only else None,
            derived_from=list(derived_from) if derived_from is not None else None,
            introduces=list(introduces) if introduces is not None else None,
            mentions=list(mentions) if mentions is not None else None,
            tool_call_ids=list(tool_call_ids) if tool_call_ids is not None else None,
            tool_call_id=tool_call_id,
            protected=protected,
        )

    def score(
        self,
        *scores: tuple[str, float],
        against: dict[str, str] | None = None,
        no_hash: Iterable[str] = (),
        query_sha256: str | None = None,
        scorer: str = SCORER,
    ) -> Json:
        """A ``scores.computed`` pass; each score is bound to the span's current text
        unless ``against`` names another text or ``no_hash`` leaves the hash out."""
        self._passes += 1
        against = against or {}
        missing = set(no_hash)
        entries = []
        for i, (span_id, value) in enumerate(scores):
            entry: Json = {
                "score_id": f"sc-{self._passes}-{i}-{span_id}",
                "span_id": span_id,
                "score": value,
            }
            if span_id not in missing:
                text = against.get(span_id, self.texts.get(span_id, ""))
                entry["text_sha256"] = text_sha256(text)
            if query_sha256 is not None:
                entry["query_sha256"] = query_sha256
            entries.append(entry)
        return self._event("scores.computed", scorer=scorer, scores=entries)

    def score_id(self, pass_number: int, index: int, span_id: str) -> str:
        """The ``score_id`` :meth:`score` gave (pass numbers start at 1)."""
        return f"sc-{pass_number}-{index}-{span_id}"

    def rewrite(
        self,
        context: Sequence[Json],
        *,
        declared_modified: Sequence[str] = (),
        scores_invalidated: Sequence[str] = (),
        base_seq: int | None = None,
        rewrite_id: str | None = None,
        strategy: str | None = None,
        trigger: str | None = None,
    ) -> Json:
        """A ``context.rewritten``. Each entry needs ``span_id``; ``text`` defaults
        to the span's current text (unchanged), ``tokens`` to its word count."""
        self._rewrites += 1
        snapshot = []
        for item in context:
            entry = dict(item)
            span_id = entry["span_id"]
            if "text" not in entry and "text_sha256" not in entry:
                entry["text"] = self.texts.get(span_id, f"span {span_id}")
            if entry.get("text") is not None:
                self.texts[span_id] = entry["text"]
            entry.setdefault("tokens", max(1, len(str(entry.get("text", "")).split())))
            snapshot.append(entry)
        self._position = len(snapshot)
        return self._event(
            "context.rewritten",
            rewrite_id=rewrite_id or f"rw-{self._rewrites}",
            context=snapshot,
            declared_modified=list(declared_modified),
            scores_invalidated=list(scores_invalidated),
            base_seq=base_seq,
            strategy=strategy,
            trigger=trigger,
        )

    def evict(
        self,
        candidates: Sequence[str] | None = None,
        *,
        threshold: float | None = None,
        keep_top_k: int | None = None,
        basis: str | None = None,
        query_sha256: str | None = None,
        request_id: str | None = None,
    ) -> Json:
        """An ``eviction.requested`` by candidates, threshold or keep_top_k."""
        self._requests += 1
        policy: Json | None = None
        if threshold is not None:
            policy = {"threshold": threshold}
        elif keep_top_k is not None:
            policy = {"keep_top_k": keep_top_k}
        return self._event(
            "eviction.requested",
            request_id=request_id or f"req-{self._requests}",
            candidates=list(candidates) if candidates is not None else None,
            policy=policy,
            basis=basis,
            query_sha256=query_sha256,
        )

    def close(self) -> Json:
        """A ``session.closed``."""
        return self._event("session.closed")

    # -- output ----------------------------------------------------------

    def events(self) -> list[InputEvent]:
        """The trace as validated contract models."""
        return [INPUT_ADAPTER.validate_python(e) for e in self.raw]

    def lines(self) -> list[bytes]:
        """The trace as JSON lines, as a harness would publish them."""
        return [orjson.dumps(e) for e in self.raw]


def interleave(scripts: Sequence[SessionScript]) -> list[bytes]:
    """Round-robin the lines of several sessions (each keeps its own order)."""
    streams = [s.lines() for s in scripts]
    merged: list[bytes] = []
    for i in range(max((len(s) for s in streams), default=0)):
        merged.extend(s[i] for s in streams if i < len(s))
    return merged
