"""``GET /sessions/{tenant}/{session_id}``: one session as the inspector shows it.

Built from the live state (spans by hash prefix, bound-score status, counters,
lineage) and the worker's ring of recent records (timeline, pins, faults,
decisions, compactions: each ``context.compacted`` with the faults it lists).
It holds no span text: there is none in state, and the ring keeps
ids and kinds only.
"""

from __future__ import annotations

from typing import Any

from spanguard.streams.engine.state import SessionState, SpanState
from spanguard.streams.fleet.recent import Summary

HASH_PREFIX = 12
"""Hex digits of a span's text hash shown (enough to tell versions apart)."""


def session_view(
    tenant: str,
    session_id: str,
    state: SessionState | None,
    recent: list[Summary],
    closed: bool = False,
) -> dict[str, Any] | None:
    """The inspector's JSON, or None when the worker knows nothing of the session."""
    if state is None and not recent and not closed:
        return None
    outputs = [o for entry in recent for o in entry.get("outputs", [])]
    view: dict[str, Any] = {
        "tenant": tenant,
        "session_id": session_id,
        "status": "live" if state is not None else ("closed" if closed else "unknown"),
        "counters": _counters(state) if state is not None else None,
        "spans": [_span(state, span.span_id) for span in state.order] if state is not None else [],
        "lineage": _lineage(state, recent),
        "pins": [o for o in outputs if o.get("type") == "span.pinned"],
        "faults": [o for o in outputs if o.get("type") == "integrity.fault"],
        "decisions": [o for o in outputs if o.get("type") == "eviction.decided"],
        "compactions": compactions(recent),
        "timeline": recent,
    }
    return view


def compactions(recent: list[Summary]) -> list[dict[str, Any]]:
    """Every compaction of the recent records, oldest first: its summary, the
    rewrite's ``seq``, ``turn`` and ``ts``, and ``fault_details`` (id, kind,
    severity, span ids of each fault it lists, found among the same record's
    outputs: a rewrite's faults are produced with it)."""
    found = []
    for entry in recent:
        outputs = entry.get("outputs", [])
        faults = {o.get("id"): o for o in outputs if o.get("type") == "integrity.fault"}
        for output in outputs:
            if output.get("type") != "context.compacted":
                continue
            details = [
                {
                    "id": fault_id,
                    "kind": faults[fault_id].get("kind"),
                    "severity": faults[fault_id].get("severity"),
                    "span_ids": faults[fault_id].get("span_ids", []),
                }
                for fault_id in output.get("faults", [])
                if fault_id in faults
            ]
            found.append(
                output
                | {
                    "seq": entry.get("seq"),
                    "turn": entry.get("turn"),
                    "ts": entry.get("ts"),
                    "fault_details": details,
                }
            )
    return found


def merge_session_views(views: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One view of a session from several workers' answers.

    A session's state lives on the worker that owns its partition, but its
    recent records may be spread over several: after a rebalance the new owner's
    ring starts at the records it processed itself, the previous owner remembers
    the earlier ones. The live (else closed, else any) view gives the state; the
    timelines are joined (each record once, by event id) in ``seq`` order, and
    pins, faults and decisions follow from the joined timeline.
    """
    if not views:
        return None
    rank = {"live": 0, "closed": 1}
    primary = min(views, key=lambda v: rank.get(str(v.get("status")), 2))
    timeline: dict[Any, Summary] = {}
    for view in views:
        for entry in view.get("timeline", []):
            key = entry.get("event_id") or (entry.get("seq"), entry.get("type"), entry.get("ts"))
            timeline.setdefault(key, entry)
    joined = sorted(timeline.values(), key=lambda e: (e.get("seq") is None, e.get("seq") or 0))
    outputs = [o for entry in joined for o in entry.get("outputs", [])]
    return primary | {
        "timeline": joined,
        "pins": [o for o in outputs if o.get("type") == "span.pinned"],
        "faults": [o for o in outputs if o.get("type") == "integrity.fault"],
        "decisions": [o for o in outputs if o.get("type") == "eviction.decided"],
        "compactions": compactions(joined),
    }


def _counters(state: SessionState) -> dict[str, Any]:
    mean = state.mean_bound()
    return {
        "accepted": state.accepted,
        "last_seq": state.last_seq,
        "live_spans": len(state.spans),
        "live_tokens": state.live_tokens,
        "gone_spans": len(state.gone),
        "stale_spans": len(state.stale),
        "poisoned_pending": len(state.poisoned_pending),
        "bound_scores": state.bound_count,
        "mean_bound_score": round(mean, 6) if mean is not None else None,
        "freeze_streak": state.freeze_streak,
        "drift_streak": len(state.drift_streak),
        "known_types": len(state.known_types),
    }


def _span(state: SessionState, span_id: str) -> dict[str, Any]:
    span = state.spans[span_id]
    return {
        "span_id": span.span_id,
        "hash": span.text_sha256[:HASH_PREFIX],
        "tokens": span.tokens,
        "position": span.position,
        "stale_rewrites": span.stale_rewrites,
        "poisoned": span.poisoned,
        "score": _score(span),
        "derived_from": list(span.derived_from),
        "holds": len(span.holds) // 2,  # flat (key, type, ...): a count of pairs
        "mentions": len(span.mentions),
    }


def _score(span: SpanState) -> dict[str, Any]:
    bound = span.bound
    if bound is None:
        return {"status": "unscored"}
    # A bound score is current only while the span's text is the text it was
    # computed on and no rewrite touched the span since.
    current = bound.text_sha256 == span.text_sha256 and span.stale_rewrites == 0
    return {
        "status": "bound" if current else "stale",
        "score_id": bound.score_id,
        "value": bound.score,
        "for_query": bound.query_sha256 is not None,
        "computed_on": bound.text_sha256[:HASH_PREFIX],
    }


def _lineage(state: SessionState | None, recent: list[Summary]) -> dict[str, Any]:
    """Summary lineage: parent -> child edges from live spans and recent records."""
    edges: dict[tuple[str, str], None] = {}
    if state is not None:
        for span in state.spans.values():
            for parent in span.derived_from:
                edges[(parent, span.span_id)] = None
    for entry in recent:
        if entry.get("type") == "span.added":
            for parent in entry.get("derived_from") or []:
                edges[(parent, str(entry.get("span_id")))] = None
        elif entry.get("type") == "context.rewritten":
            for child, parents in (entry.get("derived") or {}).items():
                for parent in parents:
                    edges[(parent, child)] = None
    names = sorted({n for edge in edges for n in edge})
    nodes = []
    for name in names:
        node: dict[str, Any] = {"span_id": name, "live": False}
        if state is not None and name in state.spans:
            node.update(live=True, stale_rewrites=state.spans[name].stale_rewrites)
        elif state is not None and name in state.gone:
            node.update(stale_rewrites=state.gone[name].stale_rewrites)
        nodes.append(node)
    return {"nodes": nodes, "edges": [list(edge) for edge in edges]}
