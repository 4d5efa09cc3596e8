"""Contract 1.1's summary faults, found by a rewrite's diff.

* ``SUMMARY_BALLOONING``: a created span with more tokens than ``balloon_ratio``
  x the sum of its ``derived_from`` parents', or a modified span with more than
  ``balloon_ratio`` x its sources': its own tokens before plus the spans this
  rewrite merged into it (named in its ``derived_from`` and gone from the
  snapshot). A rolling summary that absorbs new turns is measured against
  what it absorbed, so it is healthy.
* ``EMPTY_SUMMARY``: a created span whose ``derived_from`` names 2 or more
  spans and whose text is empty, or whose tokens are below
  ``min_summary_tokens`` while its parents held at least
  ``empty_summary_parent_factor`` x that many.

Parents are measured as they were just before the rewrite. Only live spans
have tokens in state, so a created span with a parent that had already left
is not checked for ballooning (its sources cannot be summed; no guess), and
for ``EMPTY_SUMMARY`` such a parent adds no tokens (so the rule stays
conservative: it never fires on tokens it cannot see).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanguard.schemas import FaultKind, SnapshotEntry, text_sha256
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.state import SessionState, SpanState

EMPTY_TEXT_SHA256 = text_sha256("")


@dataclass(slots=True)
class SummaryFindings:
    """Evidence items of the two faults, one per offending span."""

    ballooning: list[dict[str, Any]] = field(default_factory=list)
    empty: list[dict[str, Any]] = field(default_factory=list)


def inspect_summaries(
    session: SessionState,
    settings: EngineSettings,
    created: Iterable[SnapshotEntry],
    modified: Iterable[tuple[SnapshotEntry, SpanState]],
    merged: Iterable[SpanState],
) -> SummaryFindings:
    """Measure created and modified spans against their sources (call before the
    rewrite changes the session)."""
    findings = SummaryFindings()
    spans = session.spans
    ratio = settings.balloon_ratio
    for entry in created:
        parents = list(dict.fromkeys(entry.derived_from or ()))
        if not parents:
            continue
        known = {p: spans[p].tokens for p in parents if p in spans}
        parent_tokens = sum(known.values())
        if len(known) == len(parents) and entry.tokens > ratio * parent_tokens:
            findings.ballooning.append(
                _balloon(entry, "created", None, known, parent_tokens, ratio)
            )
        if len(parents) >= 2 and _empty(entry, parent_tokens, settings):
            findings.empty.append(
                {
                    "span_id": entry.span_id,
                    "tokens": entry.tokens,
                    "empty_text": entry.content_hash == EMPTY_TEXT_SHA256,
                    "parents": parents,
                    "parent_tokens": parent_tokens,
                    "unknown_parents": [p for p in parents if p not in known],
                }
            )
    merged_tokens = {span.span_id: span.tokens for span in merged}
    for entry, span in modified:
        absorbed = {p: merged_tokens[p] for p in entry.derived_from or () if p in merged_tokens}
        source_tokens = span.tokens + sum(absorbed.values())
        if entry.tokens > ratio * source_tokens:
            findings.ballooning.append(
                _balloon(entry, "modified", span.tokens, absorbed, source_tokens, ratio)
            )
    return findings


def _empty(entry: SnapshotEntry, parent_tokens: int, settings: EngineSettings) -> bool:
    if entry.content_hash == EMPTY_TEXT_SHA256:
        return True
    floor = settings.min_summary_tokens
    return entry.tokens < floor and parent_tokens >= settings.empty_summary_parent_factor * floor


def _balloon(
    entry: SnapshotEntry,
    change: str,
    tokens_before: int | None,
    sources: dict[str, int],
    source_tokens: int,
    ratio: float,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "span_id": entry.span_id,
        "change": change,
        "tokens": entry.tokens,
        "source_tokens": source_tokens,
        "sources": sources,
        "ratio": entry.tokens / source_tokens if source_tokens else None,
    }
    if tokens_before is not None:
        item["tokens_before"] = tokens_before
    return item


def emit_summary_faults(
    findings: SummaryFindings, rewrite_id: str, emission: Emission
) -> Sequence[str]:
    """One fault per kind that has findings; returns the fault ids."""
    settings = emission.settings
    ids: list[str] = []
    if findings.ballooning:
        ids.append(
            emission.fault(
                FaultKind.SUMMARY_BALLOONING,
                [item["span_id"] for item in findings.ballooning],
                {
                    "rewrite_id": rewrite_id,
                    "balloon_ratio": settings.balloon_ratio,
                    "spans": findings.ballooning,
                },
            )
        )
    if findings.empty:
        ids.append(
            emission.fault(
                FaultKind.EMPTY_SUMMARY,
                [item["span_id"] for item in findings.empty],
                {
                    "rewrite_id": rewrite_id,
                    "min_summary_tokens": settings.min_summary_tokens,
                    "parent_factor": settings.empty_summary_parent_factor,
                    "spans": findings.empty,
                },
            )
        )
    return ids
