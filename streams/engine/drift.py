"""Drift measured per rewrite (the contract's "Drift, measured per rewrite").

For each rewrite the live set is measured just before it (mean bound score,
live tokens) and again after the first scoring pass that follows it, or just
before the next rewrite or eviction if that comes first. A rewrite drifts when
the mean rose by more than the tolerance while tokens fell; two drifting
rewrites in a row raise ``MONOTONIC_DRIFT`` (and every further one in the run).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from spanguard.schemas import FaultKind
from spanguard.streams.engine.emit import Emission
from spanguard.streams.engine.state import DriftPoint, DriftWindow, SessionState


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    """How one rewrite cycle ended, for fleet figures.

    ``healthy`` is the contract's healthy cycle (tokens fell, mean within the
    tolerance, every modified or merged scored span invalidated), read strictly:
    a rewrite that lost a span without a successor or dropped a referent is not
    healthy either.
    """

    drifted: bool
    healthy: bool


def open_window(session: SessionState, rewrite_id: str) -> DriftWindow:
    """Measure the live set just before a rewrite and remember it."""
    window = DriftWindow(
        rewrite_id=rewrite_id,
        mean_before=session.mean_bound(),
        tokens_before=session.live_tokens,
        clean=True,
    )
    session.drift_window = window
    return window


def close_window(session: SessionState, emission: Emission) -> CycleOutcome | None:
    """Close the open window (if any) on the current live set; may raise MONOTONIC_DRIFT.

    A window whose mean cannot be measured (nothing scored before or after)
    does not drift and ends a run of drifting rewrites.
    """
    window = session.drift_window
    if window is None:
        return None
    session.drift_window = None
    tolerance = emission.settings.drift_tolerance
    point = DriftPoint(
        rewrite_id=window.rewrite_id,
        mean_before=window.mean_before,
        mean_after=session.mean_bound(),
        tokens_before=window.tokens_before,
        tokens_after=session.live_tokens,
    )
    tokens_fell = point.tokens_after < point.tokens_before
    measurable = point.mean_before is not None and point.mean_after is not None
    rose = False
    within = False
    if measurable:
        assert point.mean_before is not None and point.mean_after is not None
        limit = abs(point.mean_before) * tolerance
        rose = point.mean_after - point.mean_before > limit
        within = abs(point.mean_after - point.mean_before) <= limit
    drifted = rose and tokens_fell
    if drifted:
        # The series in evidence (and in state) is the streak's last points; the count
        # is the whole streak's, so a restore in the middle of a long streak emits
        # exactly what replay does.
        session.drift_consecutive += 1
        kept = emission.settings.drift_series_points  # 2 or more
        session.drift_streak = (*session.drift_streak, point)[-kept:]
        if session.drift_consecutive >= 2:
            emission.fault(
                FaultKind.MONOTONIC_DRIFT,
                [],
                {
                    "tolerance": tolerance,
                    "consecutive": session.drift_consecutive,
                    "series": [asdict(p) for p in session.drift_streak],
                },
            )
    else:
        session.drift_consecutive = 0
        session.drift_streak = ()
    healthy = tokens_fell and within and window.clean
    return CycleOutcome(drifted=drifted, healthy=healthy)
