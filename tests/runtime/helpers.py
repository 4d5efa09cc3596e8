"""Traces and the replay reference shared by the runtime tests.

A plain module the tests import: ``conftest.py`` files hold fixtures only.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.runtime.testing import output_identity
from spanguard.streams.sim import SimConfig, simulate
from spanguard.streams.sim.scenarios import demo_fleet


@cache
def fleet_trace(sessions: int = 12, seed: int = 5) -> tuple[bytes, ...]:
    """A simulated fleet (faults injected, garbage included), interleaved."""
    lines = simulate(SimConfig(sessions=sessions, seed=seed, events_per_session=24)).lines
    return (*lines, *demo_fleet(4), b"{not json", b'{"type": "span.added"}')


def replay_ids(lines: tuple[bytes, ...]) -> Counter[str]:
    """The outputs ``spanguard replay`` makes of ``lines``, by identity."""
    engine = Engine()
    ids: Counter[str] = Counter()
    for n, line in enumerate(lines):
        for output in engine.process_raw(line, Source("replay", -1, n)):
            ids[output_identity(encode_output(output))] += 1
    return ids
