"""Process-wide settings that every ``spanguard`` command applies before it runs
(the benchmarks apply them too, so that they measure the engine as it runs)."""

from __future__ import annotations

import gc

GC_THRESHOLDS = (50_000, 20, 50)
"""The cyclic collector's thresholds (generation 0, 1, 2). The engine allocates many
small, long-lived objects (spans, index entries, decoded events); CPython's default
generation-0 threshold of 700 collects far too often for it (measured on the mixed
engine workload: about a quarter of the engine's time, see BENCHMARKS.md)."""


def tune_gc() -> None:
    """Set :data:`GC_THRESHOLDS` for this process."""
    gc.set_threshold(*GC_THRESHOLDS)
