"""bench.memory_floor on a small fleet: the lower bound counts the packed buffer and
the dicts of looked-up strings, and stays below what the engine holds."""

from __future__ import annotations

from bench.memory import measure_sessions
from bench.memory_floor import measure_floor


def test_the_floor_holds_the_packed_fields_and_is_below_the_engine() -> None:
    floor = measure_floor(40)
    assert floor["sessions"] == 40
    # each looked-up string costs a bytes object and a dict entry over the packed buffer
    assert floor["lower_bound_bytes_per_session"] > (
        floor["packed_bytes_per_session"] + 33 * floor["looked_up_strings_per_session"]
    )
    assert floor["lower_bound_bytes_per_session"] < measure_sessions(40)["bytes_per_live_session"]
