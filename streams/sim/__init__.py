"""The fleet simulator: synthetic agent sessions with their ground truth.

Modules, by concern: :mod:`.config` (what to generate, the engine settings the
truth assumes), :mod:`.texts` (the agent-text generator) and :mod:`.vocab`
(its domains), :mod:`.events` (the events a harness writes), :mod:`.plan`
(a step planned on a copy of the session, judged by the reference model of
:mod:`streams.reference`), :mod:`.steps` (what a harness does) and
:mod:`.session` (one session), :mod:`.injections` (the registry of faults to
inject), :mod:`.fleet` (many sessions, interleaved), :mod:`.truth` (the truth
file), :mod:`.quality` (``spanguard quality``) and :mod:`.scenarios` (the
hand-written example sessions).

The public entry points are re-exported here.
"""

from streams.sim.config import SimConfig, parse_fault_mix
from streams.sim.fleet import SimulatedFleet, simulate, truth_path_for
from streams.sim.injections import INJECTIONS, REGISTRY, Injection
from streams.sim.truth import FleetTruth

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
