"""The fleet simulator: synthetic agent sessions with their ground truth.

Modules, by concern: :mod:`.config` (what to generate, the engine settings the
truth assumes), :mod:`.texts` (the agent-text generator) and :mod:`.vocab`
(its domains), :mod:`.events` (the events a harness writes), :mod:`.plan`
(a step planned on a copy of the session, judged by the reference model of
:mod:`spanguard.streams.reference`), :mod:`.steps` (what a harness does) and
:mod:`.session` (one session), :mod:`.injections` (the registry of faults to
inject), :mod:`.fleet` (many sessions, interleaved), :mod:`.truth` (the truth
file), :mod:`.quality` (``spanguard quality``) and :mod:`.scenarios` (the
hand-written example sessions).

The public entry points are re-exported here, loaded on first use, so that
importing one module (say :mod:`.texts`) loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spanguard.streams.sim.config import SimConfig, parse_fault_mix
    from spanguard.streams.sim.fleet import SimulatedFleet, simulate, truth_path_for
    from spanguard.streams.sim.injections import INJECTIONS, REGISTRY, Injection
    from spanguard.streams.sim.truth import FleetTruth

_HOME = {
    "SimConfig": "spanguard.streams.sim.config",
    "parse_fault_mix": "spanguard.streams.sim.config",
    "SimulatedFleet": "spanguard.streams.sim.fleet",
    "simulate": "spanguard.streams.sim.fleet",
    "truth_path_for": "spanguard.streams.sim.fleet",
    "INJECTIONS": "spanguard.streams.sim.injections",
    "REGISTRY": "spanguard.streams.sim.injections",
    "Injection": "spanguard.streams.sim.injections",
    "FleetTruth": "spanguard.streams.sim.truth",
}

__all__ = [
    "INJECTIONS",
    "REGISTRY",
    "FleetTruth",
    "Injection",
    "SimConfig",
    "SimulatedFleet",
    "parse_fault_mix",
    "simulate",
    "truth_path_for",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    if name not in _HOME:
        raise AttributeError(f"module 'spanguard.streams.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
