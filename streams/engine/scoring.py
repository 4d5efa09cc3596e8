"""``scores.computed``: binding scores to the exact text they were computed against."""

from __future__ import annotations

from typing import Any

from spanguard.schemas import FaultKind, ScoresComputed
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.state import SessionState


def apply_scores(session: SessionState, event: ScoresComputed, emission: Emission) -> None:
    """Bind every score whose hash matches its span's current text.

    A matching score replaces the span's bound score and resets its rewrite
    counter. Scores with no hash raise one ``SCORE_PROVENANCE_GAP`` and scores
    against another text one ``STALE_SCORE``; neither binds. Scores for spans
    that are not live, and for poisoned spans under ``poisoned: drop``, bind
    nothing and raise nothing (the span is gone or about to be dropped).
    """
    gaps: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    drop_poisoned = emission.settings.poisoned == "drop"
    for entry in event.scores:
        span = session.spans.get(entry.span_id)
        if span is None or (drop_poisoned and span.poisoned):
            continue
        if not entry.text_sha256:
            gaps.append({"span_id": span.span_id, "score_id": entry.score_id})
            continue
        if entry.text_sha256 != span.text_sha256:
            stale.append(
                {
                    "span_id": span.span_id,
                    "score_id": entry.score_id,
                    "expected_sha256": span.text_sha256,
                    "actual_sha256": entry.text_sha256,
                }
            )
            continue
        session.bind(span, entry.score_id, entry.score, entry.query_sha256, event.seq)
        if span.stale_rewrites:  # a counter at 0 stays so, and bind marked the change
            session.set_counter(span, 0)
    if gaps:
        emission.fault(
            FaultKind.SCORE_PROVENANCE_GAP,
            _span_ids(gaps),
            {"scorer": event.scorer, "source": "scores.computed", "scores": gaps},
        )
    if stale:
        emission.fault(
            FaultKind.STALE_SCORE,
            _span_ids(stale),
            {"scorer": event.scorer, "source": "scores.computed", "scores": stale},
        )


def _span_ids(items: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(item["span_id"] for item in items))
