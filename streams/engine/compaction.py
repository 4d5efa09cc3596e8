"""The compaction failures of contract 1.2 and the record of every compaction.

A ``context.rewritten`` is a compaction. Besides the faults of ``rewrite.py``,
this module checks what agent teams lose to compactions in production:

* ``PROTECTED_SPAN_REWRITTEN``: the system prompt or the user's task modified or
  left out;
* ``TOOL_PAIR_SPLIT``: a tool call live without its result, or a result without
  its call, where the pair was whole before (the provider rejects the next request);
* ``SUMMARY_LOST_KEYS``: a summary whose parents held N >= ``lost_keys_min`` keys,
  fewer than ``lost_keys_kept`` x N of them still held by a live span;
* ``COMPACTION_THRASHING``: ``thrash_after`` rewrites in a row, each close to the
  one before, that do not shrink the context;

and builds the ``context.compacted`` record (tokens, spans and keys before and
after, tokens by role, what was modified, created, merged and removed, the
faults, the outcome), emitted after every fault it lists.

Everything is read from the session's state before and after the rewrite: the
cost is that of the rewrite itself plus one pass over the live spans' roles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spanguard.schemas import ContextRewritten, FaultKind, IntegrityFault, Severity, SnapshotEntry
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.keys import StoredKey, key_texts
from spanguard.streams.engine.state import SessionState, SpanState

UNKNOWN_ROLE = "unknown"
"""The role of the tokens of spans that have none (a summary a rewrite created)."""


@dataclass(frozen=True, slots=True)
class Before:
    """The live context just before a rewrite, as the record and the checks need it."""

    tokens: int
    spans: int
    keys: int
    tokens_by_role: dict[str, int]
    whole_pairs: frozenset[str]
    """Call ids whose call and at least one result were live."""


def before(session: SessionState) -> Before:
    """What the record and the checks read of the context before a rewrite."""
    return Before(
        session.live_tokens,
        len(session.spans),
        len(session.referents.key_holders),
        tokens_by_role(session.spans.values()),
        frozenset(call for call in session.call_spans if _whole(session, call)),
    )


def tokens_by_role(spans: Iterable[SpanState]) -> dict[str, int]:
    """Live tokens per span role (``unknown`` without one), roles in sorted order."""
    totals: dict[str, int] = {}
    for span in spans:
        role = span.role or UNKNOWN_ROLE
        totals[role] = totals.get(role, 0) + span.tokens
    return dict(sorted(totals.items()))


def _whole(session: SessionState, call: str) -> bool:
    spans = session.spans
    linked = session.linked_by(call)
    made = any(call in spans[s].calls for s in linked)
    answered = any(spans[s].answers == call for s in linked)
    return made and answered


def parent_keys(
    session: SessionState, created: Sequence[SnapshotEntry]
) -> dict[str, list[StoredKey]]:
    """For each created span with parents, the distinct keys its parents held (live
    ones by their holdings, gone ones by the keys they held when they left)."""
    found: dict[str, list[StoredKey]] = {}
    for entry in created:
        if not entry.derived_from:
            continue
        keys: dict[StoredKey, None] = {}
        for parent in entry.derived_from:
            span = session.spans.get(parent)
            if span is not None:
                keys.update(dict.fromkeys(span.holds[::2]))
            else:
                gone = session.gone.get(parent)
                if gone is not None:
                    keys.update(dict.fromkeys(gone.keys))
        found[entry.span_id] = list(keys)
    return found


def protected_rewrites(
    modified: Sequence[SpanState], left_out: Sequence[SpanState]
) -> list[dict[str, Any]]:
    """The protected spans a rewrite modified or left out (merged or not)."""
    items = [_protected_item(span, "modified") for span in modified if span.protected]
    items += [_protected_item(span, "left out") for span in left_out if span.protected]
    return items


def _protected_item(span: SpanState, change: str) -> dict[str, Any]:
    return {"span_id": span.span_id, "change": change, "text_sha256": span.text_sha256}


def check_after(
    session: SessionState,
    event: ContextRewritten,
    emission: Emission,
    was: Before,
    protected: list[dict[str, Any]],
    parents: dict[str, list[StoredKey]],
) -> None:
    """Emit the 1.2 faults of a rewrite already applied to ``session``."""
    settings = emission.settings
    rewrite_id = event.rewrite_id
    if protected:
        emission.fault(
            FaultKind.PROTECTED_SPAN_REWRITTEN,
            [item["span_id"] for item in protected],
            {"rewrite_id": rewrite_id, "spans": protected},
        )
    for call in sorted(was.whole_pairs):
        split = _split(session, call)
        if split is not None:
            emission.fault(
                FaultKind.TOOL_PAIR_SPLIT,
                split["live"],
                {"rewrite_id": rewrite_id, "tool_call_id": call, **split},
            )
    held = session.referents.key_holders
    for span_id, keys in parents.items():
        if len(keys) < settings.lost_keys_min:
            continue
        lost = [key for key in keys if key not in held]
        kept = len(keys) - len(lost)
        if kept < settings.lost_keys_kept * len(keys):
            emission.fault(
                FaultKind.SUMMARY_LOST_KEYS,
                [span_id],
                {
                    "rewrite_id": rewrite_id,
                    "span_id": span_id,
                    "parent_keys": len(keys),
                    "kept": kept,
                    "lost": key_texts(lost),
                    "lost_keys_kept": settings.lost_keys_kept,
                },
            )
    _check_thrashing(session, event, emission, was)


def _split(session: SessionState, call: str) -> dict[str, list[str]] | None:
    """The halves of a pair that was whole, if one of them is live and one is not."""
    spans = session.spans
    linked = session.linked_by(call)
    if not linked:
        return None  # both halves gone: a summary replaced the whole pair
    live = session.in_order(linked)
    calls = [s for s in live if call in spans[s].calls]
    results = [s for s in live if spans[s].answers == call]
    if calls and results:
        return None
    return {"live": live, "call": calls, "results": results}


def _check_thrashing(
    session: SessionState, event: ContextRewritten, emission: Emission, was: Before
) -> None:
    settings = emission.settings
    thin = session.live_tokens > (1 - settings.thrash_min_reduction) * was.tokens
    previous = session.last_rewrite_turn
    close = previous is not None and event.turn - previous <= settings.thrash_within_turns
    if not thin:
        session.thrash_streak = 0
    elif close:
        session.thrash_streak += 1
    else:
        session.thrash_streak = 1
    session.last_rewrite_turn = event.turn
    streak = session.thrash_streak
    if streak and streak % settings.thrash_after == 0:
        emission.fault(
            FaultKind.COMPACTION_THRASHING,
            [],
            {
                "rewrite_id": event.rewrite_id,
                "consecutive": streak,
                "turn": event.turn,
                "tokens_before": was.tokens,
                "tokens_after": session.live_tokens,
                "thrash_min_reduction": settings.thrash_min_reduction,
                "thrash_within_turns": settings.thrash_within_turns,
            },
        )


def record(
    session: SessionState,
    event: ContextRewritten,
    emission: Emission,
    was: Before,
    changes: dict[str, list[str]],
) -> None:
    """Emit the ``context.compacted`` of an applied rewrite, after its faults."""
    faults = [o for o in emission.outputs if isinstance(o, IntegrityFault)]
    worst = max((Severity(fault.severity).rank for fault in faults), default=Severity.INFO.rank)
    outcome = ("clean", "warning", "critical")[worst]
    emission.compacted(
        {
            "rewrite_id": event.rewrite_id,
            "tokens_before": was.tokens,
            "tokens_after": session.live_tokens,
            "spans_before": was.spans,
            "spans_after": len(session.spans),
            **changes,
            "keys_before": was.keys,
            "keys_after": len(session.referents.key_holders),
            "faults": [fault.fault_id for fault in faults],
            "outcome": outcome,
            "strategy": event.strategy,
            "trigger": event.trigger,
            "tokens_by_role_before": was.tokens_by_role,
            "tokens_by_role_after": tokens_by_role(session.spans.values()),
        }
    )
