"""What ``spanguard simulate`` generates: :class:`SimConfig`, the fault mix, and the
engine settings the truth assumes.

The engine defaults come from :class:`spanguard.streams.engine.config.EngineSettings` (one
source; a test checks that the reference model that makes the truth reads the
contract's defaults the same way). They are written into the truth file so that
a replay with other settings can be told apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.sim.injections import INJECTIONS

ASSUMED_SETTINGS = (
    "drift_tolerance",
    "rewrite_of_rewrite_at",
    "poisoned_at",
    "poisoned",
    "stall_after",
    "protect_lineage",
    "balloon_ratio",
    "min_summary_tokens",
    "empty_summary_parent_factor",
    "lost_keys_min",
    "lost_keys_kept",
    "thrash_after",
    "thrash_within_turns",
    "thrash_min_reduction",
    "dedup_window",
)
"""The engine settings the truth depends on."""


LONG_SESSION_EVENTS = 3200
"""Target events of a long session: more than 500 turns of the agent loop."""


def engine_assumptions() -> dict[str, Any]:
    """The engine's default settings the truth assumes (written into the truth file)."""
    defaults = EngineSettings()
    return {name: getattr(defaults, name) for name in ASSUMED_SETTINGS}


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What ``spanguard simulate`` generates."""

    sessions: int = 50
    tenants: int = 3
    events_per_session: int = 60
    seed: int = 7
    fault_rate: float = 0.3
    faults: tuple[tuple[str, int], ...] = tuple((name, 1) for name in INJECTIONS)
    max_injections: int = 2
    long_every: int = 0
    """Every ``long_every``-th session is a long one (:data:`LONG_SESSION_EVENTS`); 0: none."""
    lookalike_rate: float = 0.5
    """Share of the sessions without injections that get a healthy look-alike of a
    contract 1.2 fault (a step that resembles an injection and must raise nothing)."""

    def describe(self) -> dict[str, Any]:
        """The configuration as it is written into the truth file."""
        return {
            "sessions": self.sessions,
            "tenants": self.tenants,
            "events_per_session": self.events_per_session,
            "seed": self.seed,
            "fault_rate": self.fault_rate,
            "faults": dict(self.faults),
            "max_injections": self.max_injections,
            "long_every": self.long_every,
            "lookalike_rate": self.lookalike_rate,
            "engine_assumptions": engine_assumptions(),
        }


def parse_fault_mix(text: str) -> tuple[tuple[str, int], ...]:
    """``"STALE_SCORE=2,UNGATED_EVICTION"`` -> ``(("STALE_SCORE", 2), ("UNGATED_EVICTION", 1))``.

    ``all`` (or an empty string) is every injection once; raises ``ValueError``
    on an unknown name or a weight that is not a positive integer.
    """
    if not text.strip() or text.strip().lower() == "all":
        return tuple((name, 1) for name in INJECTIONS)
    mix: dict[str, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, _, weight = item.partition("=")
        name = name.strip().upper()
        if name not in INJECTIONS:
            raise ValueError(f"unknown fault {name!r}; choose from {', '.join(INJECTIONS)}")
        try:
            value = int(weight) if weight.strip() else 1
        except ValueError as exc:
            raise ValueError(f"weight of {name} must be an integer, got {weight!r}") from exc
        if value < 0:
            raise ValueError(f"weight of {name} must be >= 0")
        mix[name] = mix.get(name, 0) + value
    return tuple((name, weight) for name, weight in mix.items() if weight > 0)
