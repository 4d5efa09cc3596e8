"""What each engine measure runs on: sizes (full run or ``--quick``), targets, the clock."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spanguard.streams.engine.engine import Source

Json = dict[str, Any]

TARGET_EVENTS_PER_S = 35_000.0
"""Issue 11's target (its moonshot: 50,000)."""
TARGET_SIZE_RATIO = 1.3
TARGET_GATE_SPEEDUP = 100.0
TARGET_GATE_NEVER_SLOWER = 1.0
"""Every selection, however large: the engine's gate at least as fast as the rescan."""
TARGET_REWRITE_MS = 30.0
"""A 10,000-span snapshot that changes 3 spans (2 merged into a summary, 1 condensed)."""

CLOCK = time.process_time
"""The timer of every measure: CPU time of this process (see the module docstring)."""

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
SOURCE = Source("spanguard.events", 0, 0)
"""``process_raw`` only reads the source for dead-letter records; one object serves all."""

BIG_EVENT_BYTES = 64 << 20
"""Event size limit of the size-scaling engines: a 10,000-span rewrite snapshot is
larger than the default 1 MiB limit and would be rejected as ``TOO_LARGE``."""


@dataclass(frozen=True, slots=True)
class Scale:
    """How big each measurement is (full run or ``--quick``)."""

    name: str
    sessions: int
    turns: int
    mixed_runs: int
    small: int
    big: int
    cycles: int
    size_runs: int
    rewrite_runs: int
    gate_spans: int
    gate_low: int
    gate_runs: int
    naive_runs: int
    memory_sessions: int


FULL = Scale(
    name="full",
    sessions=1_000,
    turns=30,
    mixed_runs=3,
    small=100,
    big=10_000,
    cycles=300,
    size_runs=5,
    rewrite_runs=3,
    gate_spans=10_000,
    gate_low=12,
    gate_runs=21,
    naive_runs=5,
    memory_sessions=100,
)
QUICK = Scale(
    name="quick",
    sessions=100,
    turns=20,
    mixed_runs=1,
    small=100,
    big=2_000,
    cycles=60,
    size_runs=3,
    rewrite_runs=1,
    gate_spans=2_000,
    gate_low=12,
    gate_runs=7,
    naive_runs=3,
    memory_sessions=5,
)
