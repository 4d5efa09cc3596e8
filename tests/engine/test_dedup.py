"""The duplicate window and the marker store hold exactly what their simple models do."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.dedup import SORTED_FROM, DedupWindow
from spanguard.streams.engine.markers import Marker, Markers

IDS = st.text(alphabet="abcdef", min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3 * SORTED_FROM), st.lists(IDS, max_size=6 * SORTED_FROM), st.lists(IDS))
def test_the_window_holds_the_last_ids_accepted(
    window: int, accepted: list[str], asked: list[str]
) -> None:
    # Below and past SORTED_FROM ids, full or not: the same answers as the last
    # ``window`` ids kept in a queue.
    recent = DedupWindow()
    model: deque[str] = deque(maxlen=window)
    for event_id in accepted:
        recent.add(event_id, window)
        model.append(event_id)
        assert len(recent) == len(model)
    for event_id in [*asked, *accepted]:
        assert (event_id in recent) == (event_id in model)
    if recent.ordered is not None:
        assert list(recent.ordered) == sorted(recent.ring)


AT = datetime(2026, 1, 1, tzinfo=UTC)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([("t", "a"), ("t", "b"), ("u", "a")]),
            st.sampled_from(["closed", "expired"]),
            st.integers(0, 9),
            st.integers(0, 48),
        ),
        max_size=12,
    ),
    st.integers(0, 80),
)
def test_markers_are_kept_for_their_retention_and_closed_ones_are_seen_as_closed(
    ends: list[tuple[tuple[str, str], str, int, int]], clock_hours: int
) -> None:
    markers = Markers(timedelta(hours=24))
    model: dict[tuple[str, str], Marker] = {}
    for key, kind, seq, hours in ends:
        marker = Marker(kind, seq, AT + timedelta(hours=hours))  # type: ignore[arg-type]
        markers.mark(key, marker)
        model[key] = marker
    clock = AT + timedelta(hours=clock_hours)
    forgotten = set(markers.forgotten(clock))
    assert forgotten == {
        key
        for key, marker in model.items()
        if marker.at is not None and marker.at + timedelta(hours=24) < clock
    }
    kept = {key: m for key, m in model.items() if key not in forgotten}
    assert dict(markers.items()) == kept
    assert dict(markers.closed) == {k: m.last_seq for k, m in kept.items() if m.kind == "closed"}
    assert all((key in markers) == (key in kept) for key in model)
