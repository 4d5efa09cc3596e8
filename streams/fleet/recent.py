"""The session inspector's memory: the last records of each session, summarised.

Session state holds spans, scores and counters but not history. To draw a
session's timeline (adds, scoring passes, rewrites, evictions, with the faults
and pins they caused) the worker keeps, per session it processes, a ring of the
last ``ring_size`` input records, each with the outputs it caused, as small
summaries: ids, counts, kinds, hashes' owners. Never text, never referent keys.
At most ``max_sessions`` sessions are kept (least recently active dropped), each
summary as its JSON bytes: a ring is read only when an operator opens the session,
and a summary's dict and strings cost ~4 times its JSON (1,198 B against 309 in the
simulated fleet: a full ring of 64, ~77 KB as dicts, is ~20 KB). It lives in memory
only: after a restart or a rebalance a session's timeline starts again from its next
record.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

import orjson

from spanguard.schemas import (
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    FleetAlert,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    SpanPinned,
)
from spanguard.streams.engine.jsonbytes import json_bytes

MAX_IDS = 32
"""Span ids listed per summary; longer lists are cut and their length given."""

MAX_ROLES = 16
"""Roles listed per compaction (a harness's role names are few)."""

Summary = dict[str, Any]


class RecentRecords:
    """Bounded per-session rings of record summaries."""

    def __init__(self, ring_size: int, max_sessions: int) -> None:
        self.ring_size = ring_size
        self.max_sessions = max_sessions
        self._rings: OrderedDict[tuple[str, str], deque[bytes]] = OrderedDict()

    def record(self, tenant: str, session_id: str, entry: Summary) -> None:
        """Append one record's summary to its session's ring."""
        key = (tenant, session_id)
        ring = self._rings.get(key)
        if ring is None:
            ring = self._rings[key] = deque(maxlen=self.ring_size)
            if len(self._rings) > self.max_sessions:
                self._rings.popitem(last=False)
        else:
            self._rings.move_to_end(key)
        ring.append(json_bytes(entry))

    def get(self, tenant: str, session_id: str) -> list[Summary]:
        """The session's recent records, oldest first (empty when unknown)."""
        ring = self._rings.get((tenant, session_id))
        return [orjson.loads(entry) for entry in ring] if ring is not None else []

    def __len__(self) -> int:
        return len(self._rings)


def input_summary(data: dict[str, Any]) -> Summary:
    """What the timeline shows of one input event (a parsed JSON object).

    Runs once per input record, so it reads only what it keeps: envelope, ids,
    counts, the first :data:`MAX_IDS` span ids of a list.
    """
    get = data.get
    type_name = get("type")
    summary: Summary = {
        "type": type_name if type(type_name) is str else "unknown",
        "seq": _int(get("seq")),
        "turn": _int(get("turn")),
        "ts": _str(get("ts")),
        "event_id": _str(get("event_id")),
    }
    if type_name == "span.added":
        summary["span_id"] = _str(get("span_id"))
        summary["tokens"] = _int(get("tokens"))
        summary["position"] = _int(get("position"))
        summary["role"] = _str(get("role"))
        summary["derived_from"] = _ids(get("derived_from"))
    elif type_name == "scores.computed":
        entries = _objects(get("scores"))
        summary["scorer"] = _str(get("scorer"))
        summary["count"] = len(entries)
        summary["span_ids"] = _ids([s.get("span_id") for s in entries[:MAX_IDS]])
        summary["unhashed"] = sum(1 for s in entries if not s.get("text_sha256"))
    elif type_name == "context.rewritten":
        entries = _objects(get("context"))
        head = entries[:MAX_IDS]
        summary["rewrite_id"] = _str(get("rewrite_id"))
        summary["count"] = len(entries)
        summary["span_ids"] = _ids([e.get("span_id") for e in head])
        summary["derived"] = {
            str(e.get("span_id")): _ids(e.get("derived_from"))
            for e in head
            if e.get("derived_from")
        }
        summary["declared_modified"] = _ids(get("declared_modified"))
        invalidated = get("scores_invalidated")
        summary["scores_invalidated"] = len(invalidated) if type(invalidated) is list else 0
        summary["strategy"] = _str(get("strategy"))
        summary["trigger"] = _str(get("trigger"))
    elif type_name == "eviction.requested":
        policy = get("policy")
        summary["request_id"] = _str(get("request_id"))
        summary["candidates"] = _ids(get("candidates"))
        summary["policy"] = policy if type(policy) is dict else None
        summary["basis"] = _str(get("basis")) or "score"
    return summary


def output_summary(event: OutputEvent) -> Summary:
    """What the timeline shows of one output (ids and kinds; no evidence, no keys)."""
    if isinstance(event, IntegrityFault):
        return {
            "type": event.type,
            "id": event.fault_id,
            "kind": event.kind.value,
            "severity": event.severity.value,
            "span_ids": _ids(event.span_ids),
        }
    if isinstance(event, SpanPinned):
        return {
            "type": event.type,
            "id": event.pin_id,
            "span_id": event.span_id,
            "request_id": event.request_id,
            "pinned_for": _ids(event.pinned_for),
            "path": _ids(event.path),
        }
    if isinstance(event, ScoresRecomputeRequested):
        return {
            "type": event.type,
            "id": event.recompute_id,
            "span_ids": _ids(event.span_ids),
            "reason": event.reason,
        }
    if isinstance(event, EvictionDecided):
        return {
            "type": event.type,
            "id": event.decision_id,
            "request_id": event.request_id,
            "action": event.action.value,
            "committed": _ids(event.committed),
            "dropped": _ids(event.dropped),
            "refused": [{"span_id": r.span_id, "reason": r.reason.value} for r in event.refused][
                :MAX_IDS
            ],
        }
    if isinstance(event, ContextCompacted):
        return compaction_summary(event)
    if isinstance(event, EventRejected):
        return {"type": event.type, "id": event.rejection_id, "reason": event.reason.value}
    if isinstance(event, FleetAlert):  # never caused by an input; kept for completeness
        return {"type": event.type, "id": event.alert_id, "rule": event.rule}
    return {"type": "unknown"}


def compaction_summary(event: ContextCompacted) -> Summary:
    """What the inspector shows of one compaction: its figures, the span ids it
    modified, created, merged and removed (the first :data:`MAX_IDS` of each, with
    their counts), its fault ids, strategy, trigger and outcome. Ids and counts
    only: tokens per role are per role name, the keys are counted, never listed."""
    return {
        "type": event.type,
        "id": event.compaction_id,
        "rewrite_id": event.rewrite_id,
        "outcome": event.outcome,
        "strategy": event.strategy,
        "trigger": event.trigger,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
        "spans_before": event.spans_before,
        "spans_after": event.spans_after,
        "keys_before": event.keys_before,
        "keys_after": event.keys_after,
        "keys_lost": max(0, event.keys_before - event.keys_after),
        **{name: _ids(getattr(event, name)) for name in CHANGES},
        "counts": {name: len(getattr(event, name)) for name in CHANGES},
        "faults": _ids(event.faults),
        "tokens_by_role_before": _roles(event.tokens_by_role_before),
        "tokens_by_role_after": _roles(event.tokens_by_role_after),
    }


CHANGES = ("modified", "created", "merged", "removed")
"""The span id lists of a compaction."""


def outputs_summary(outputs: Sequence[OutputEvent]) -> list[Summary]:
    """Summaries of every output of one record, in order."""
    return [output_summary(o) for o in outputs]


def _str(value: Any) -> str | None:
    return value if type(value) is str else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _objects(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if type(v) is dict] if type(value) is list else []


def _roles(tokens: dict[str, int]) -> dict[str, int]:
    """Tokens per role, at most :data:`MAX_ROLES` roles (the largest)."""
    ranked = sorted(tokens.items(), key=lambda item: (-item[1], item[0]))
    return dict(ranked[:MAX_ROLES])


def _ids(value: Any) -> list[str]:
    if type(value) is not list:
        return []
    return [v for v in value[:MAX_IDS] if type(v) is str]
