"""The rewrite counter: rewrites applied to a span's content since a score was
last bound to it, and the REWRITE_OF_REWRITE / POISONED_SPAN faults it raises."""

from __future__ import annotations

from collections.abc import Iterable

from spanguard.schemas import FaultKind
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.state import SessionState, SpanState


def created_counter(session: SessionState, parents: Iterable[str]) -> int:
    """1 + the highest counter among ``parents``; parents that already left the live
    set (evicted or merged) still count."""
    highest = 0
    for parent in parents:
        live = session.spans.get(parent)
        if live is not None:
            highest = max(highest, live.stale_rewrites)
            continue
        gone = session.gone.get(parent)
        if gone is not None:
            highest = max(highest, gone.stale_rewrites)
    return 1 + highest


def apply_counters(
    session: SessionState,
    emission: Emission,
    changes: Iterable[tuple[SpanState, int]],
    cause: str,
) -> None:
    """Set each span's counter to its new value and raise the faults it crosses into.

    One ``REWRITE_OF_REWRITE`` lists every span that reached the configured
    count (2) and one ``POISONED_SPAN`` every span that reached the poison
    count (3); a span that jumps past both gets only the latter.
    """
    settings = emission.settings
    twice: list[tuple[SpanState, int]] = []
    poisoned: list[tuple[SpanState, int]] = []
    for span, new in changes:
        old = span.stale_rewrites
        session.set_counter(span, new)
        if old < settings.poisoned_at <= new and not span.poisoned:
            poisoned.append((span, new))
        elif old < settings.rewrite_of_rewrite_at <= new < settings.poisoned_at:
            twice.append((span, new))
    if twice:
        emission.fault(
            FaultKind.REWRITE_OF_REWRITE,
            [s.span_id for s, _ in twice],
            {
                "cause": cause,
                "stale_rewrites": {s.span_id: n for s, n in twice},
                "threshold": settings.rewrite_of_rewrite_at,
            },
        )
    if poisoned:
        drop = settings.poisoned == "drop"
        for span, _ in poisoned:
            session.mark_poisoned(span, drop=drop)
        emission.fault(
            FaultKind.POISONED_SPAN,
            [s.span_id for s, _ in poisoned],
            {
                "cause": cause,
                "stale_rewrites": {s.span_id: n for s, n in poisoned},
                "threshold": settings.poisoned_at,
                "treatment": settings.poisoned,
            },
        )
