"""The input events of one simulated session, as its harness writes them.

:class:`EventWriter` fills the envelope (``event_id``, ``seq``, ``turn``, ``ts``)
and the ids a harness gives (``score_id``, ``rewrite_id``, ``request_id``), and
remembers the last text it sent for each span, so a score is hashed on the text
the harness last published. It is plain data: a plan copies it with
:meth:`EventWriter.clone` and throws the copy away when the plan fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from spanguard.schemas import text_sha256

Json = dict[str, Any]

SCORER = "relevance-v1"
"""The scorer of the loop's own scoring passes."""


@dataclass(slots=True)
class EventWriter:
    """Writes the events of one session in order (``seq`` +1 per event)."""

    session_id: str
    tenant: str
    start: datetime
    step: timedelta
    seq: int = 0
    turn: int = 0
    texts: dict[str, str] = field(default_factory=dict)
    passes: int = 0
    rewrites: int = 0
    requests: int = 0

    def clone(self) -> EventWriter:
        """A copy a failed plan can throw away."""
        return replace(self, texts=dict(self.texts))

    def event(self, type_: str, **fields: Any) -> Json:
        """The next event of ``type_``; fields that are None are left out."""
        seq = self.seq
        self.seq += 1
        when = (self.start + self.step * seq).isoformat().replace("+00:00", "Z")
        envelope: Json = dict(
            type=type_,
            schema_version=1,
            event_id=f"{self.session_id}-e{seq}",
            session_id=self.session_id,
            tenant=self.tenant,
            seq=seq,
            turn=self.turn,
            ts=when,
        )
        return envelope | {k: v for k, v in fields.items() if v is not None}

    def add(
        self,
        span_id: str,
        text: str,
        *,
        tokens: int,
        position: int,
        role: str,
        derived_from: Sequence[str] = (),
        tool_call_ids: Sequence[str] = (),
        tool_call_id: str | None = None,
        protected: bool = False,
    ) -> Json:
        """A ``span.added`` with its text (contract 1.2: the tool calls it makes or
        answers, and whether it is protected; left out when it has none)."""
        self.texts[span_id] = text
        return self.event(
            "span.added",
            span_id=span_id,
            position=position,
            tokens=tokens,
            role=role,
            text=text,
            derived_from=list(derived_from) or None,
            tool_call_ids=list(tool_call_ids) or None,
            tool_call_id=tool_call_id,
            protected=protected or None,
        )

    def score_id(self, pass_number: int, index: int, span_id: str) -> str:
        """The ``score_id`` of entry ``index`` of pass ``pass_number`` (from 1)."""
        return f"sc-{pass_number}-{index}-{span_id}"

    def score(self, scores: Iterable[tuple[str, float, str | None]], scorer: str = SCORER) -> Json:
        """A ``scores.computed`` pass of ``(span id, value, text)``: each score carries
        the hash of the text it was computed against (no hash when that is None)."""
        self.passes += 1
        entries = [
            {"score_id": self.score_id(self.passes, i, span_id), "span_id": span_id, "score": value}
            | ({} if text is None else {"text_sha256": text_sha256(text)})
            for i, (span_id, value, text) in enumerate(scores)
        ]
        return self.event("scores.computed", scorer=scorer, scores=entries)

    def rewrite(
        self,
        context: Sequence[Json],
        *,
        declared_modified: Sequence[str],
        scores_invalidated: Sequence[str],
        base_seq: int | None,
        strategy: str | None = None,
        trigger: str | None = None,
    ) -> Json:
        """A ``context.rewritten`` with the complete ``context`` (entries with text),
        naming the compactor's ``strategy`` and ``trigger`` (contract 1.2) when given."""
        self.rewrites += 1
        for entry in context:
            self.texts[entry["span_id"]] = entry["text"]
        return self.event(
            "context.rewritten",
            rewrite_id=f"rw-{self.rewrites}",
            context=list(context),
            declared_modified=list(declared_modified),
            scores_invalidated=list(scores_invalidated),
            base_seq=base_seq,
            strategy=strategy,
            trigger=trigger,
        )

    def evict(
        self, candidates: Sequence[str] | None, policy: Json | None, basis: str | None
    ) -> Json:
        """An ``eviction.requested`` naming ``candidates`` or a ``policy``."""
        self.requests += 1
        named = None if candidates is None else list(candidates)
        return self.event(
            "eviction.requested",
            request_id=f"req-{self.requests}",
            candidates=named,
            policy=policy,
            basis=basis,
        )

    def close(self) -> Json:
        """A ``session.closed``."""
        return self.event("session.closed")
