"""What ``request_eviction`` returns: the service's decision, or the safe default.

A harness acts on :attr:`Decision.evict` and nothing else. When no decision
arrives in time (or the broker cannot be reached) the decision is the
documented safe default: evict nothing, keep every message, and say why
(:attr:`Decision.timed_out`, :attr:`Decision.note`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spanguard.schemas import (
    Action,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    SpanPinned,
)


@dataclass(frozen=True, slots=True)
class Pin:
    """Why a message stays: a retained message refers to it.

    ``span_id`` is the pinned message; ``pinned_for`` the retained messages (or
    messages pinned before it) whose mentions resolve to it; ``path`` the chain
    from a retained message to this one, this one last. The gate's
    ``span.pinned`` (:meth:`from_event`) and the SDK's own check of a compaction
    (:meth:`~spanguard.streams.sdk.client.Session.pins_for`) give the same fields.
    """

    span_id: str
    pinned_for: tuple[str, ...]
    path: tuple[str, ...]

    @classmethod
    def from_event(cls, event: SpanPinned) -> Pin:
        """The pin of a gate's ``span.pinned``."""
        return cls(event.span_id, tuple(event.pinned_for), tuple(event.path))


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one eviction request.

    ``committed`` and ``dropped`` are the spans the harness may (must) remove;
    ``refused`` maps every other candidate to the gate's reason (``PINNED``,
    ``UNSCORED``, ``FROZEN``, ``PROTECTED``, ``TOOL_PAIR``...); ``held_by`` maps a
    ``TOOL_PAIR`` refusal to the span of its group that stays for a reason of its
    own (contract 1.2); ``pins`` say which retained span needs a
    pinned one; ``recompute`` lists the spans to re-score before the gate will
    commit anything; ``faults`` are those this request caused.
    """

    request_id: str
    candidates: tuple[str, ...]
    action: Action | None
    """None when no decision arrived (see ``timed_out``)."""
    committed: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)
    held_by: dict[str, str] = field(default_factory=dict)
    pins: tuple[SpanPinned, ...] = ()
    faults: tuple[IntegrityFault, ...] = ()
    recompute: tuple[str, ...] = ()
    decision_id: str | None = None
    timed_out: bool = False
    note: str = ""
    """Why this is the safe default (timeout, broker unavailable), else empty."""

    @property
    def evict(self) -> tuple[str, ...]:
        """Every span to remove from the context: committed, then dropped (poisoned)."""
        return self.committed + tuple(d for d in self.dropped if d not in self.committed)

    @property
    def pinned(self) -> tuple[str, ...]:
        """Span ids refused because a retained span needs them."""
        return tuple(s for s, reason in self.refused.items() if reason == "PINNED")

    @classmethod
    def safe_default(cls, request_id: str, candidates: tuple[str, ...], note: str) -> Decision:
        """Evict nothing: every candidate stays (refused as ``NO_DECISION``)."""
        return cls(
            request_id=request_id,
            candidates=candidates,
            action=None,
            refused=dict.fromkeys(candidates, "NO_DECISION"),
            timed_out=True,
            note=note,
        )

    @classmethod
    def from_outputs(
        cls, candidates: tuple[str, ...], decided: EvictionDecided, outputs: list[OutputEvent]
    ) -> Decision:
        """Assemble a decision from its ``eviction.decided`` and the outputs it lists."""
        pin_ids = set(decided.pins)
        fault_ids = set(decided.faults)
        pins = tuple(o for o in outputs if isinstance(o, SpanPinned) and o.pin_id in pin_ids)
        faults = tuple(
            o for o in outputs if isinstance(o, IntegrityFault) and o.fault_id in fault_ids
        )
        recompute: tuple[str, ...] = ()
        for o in outputs:
            if isinstance(o, ScoresRecomputeRequested) and o.recompute_id == decided.recompute_id:
                recompute = tuple(o.span_ids)
        return cls(
            request_id=decided.request_id,
            candidates=candidates,
            action=decided.action,
            committed=tuple(decided.committed),
            dropped=tuple(decided.dropped),
            refused={r.span_id: r.reason.value for r in decided.refused},
            held_by={r.span_id: r.held_by for r in decided.refused if r.held_by is not None},
            pins=pins,
            faults=faults,
            recompute=recompute,
            decision_id=decided.decision_id,
        )
