"""Golden outputs: the engine's bytes on every trace the repository has.

Every speed-up must leave these identical; a deliberate behaviour change
regenerates them in its own commit (``python -m tests.golden.regenerate``).
"""

from __future__ import annotations

import pytest

from tests.golden.traces import SIM_FLEETS, golden_traces, output_path, read_outputs, replay

TRACES = golden_traces()


def test_every_trace_has_checked_in_outputs() -> None:
    assert {"examples-healthy", "examples-broken", "scenarios-demo-fleet", *SIM_FLEETS} <= set(
        TRACES
    )
    missing = [name for name in TRACES if not output_path(name).exists()]
    assert not missing, f"no golden outputs for {missing}: run python -m tests.golden.regenerate"


@pytest.mark.parametrize("name", sorted(TRACES))
def test_outputs_are_byte_identical(name: str) -> None:
    expected = read_outputs(name)
    actual = replay(TRACES[name])
    assert len(actual) == len(expected), f"{name}: {len(actual)} outputs, golden {len(expected)}"
    for i, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got == want, f"{name}: output {i} differs\n got: {got!r}\nwant: {want!r}"
