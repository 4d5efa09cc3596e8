"""The duplicate window and the marker store hold exactly what their simple models do."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.dedup import SORTED_FROM, DedupWindow, event_digest
from spanguard.streams.engine.markers import Marker, Markers

IDS = st.text(alphabet="abcdef", min_size=1, max_size=3)

ROOT = Path(__file__).resolve().parents[2]

KNOWN_DIGESTS = {
    "acme-s1-e1": -3339125113973003204,
    "s1-e1": -4965951228755417050,
    "": -5426141060434712860,
    "évènement-1": -7934033846510639396,
    "\ud800-e1": 5874243290957595631,  # a lone surrogate: as ``surrogatepass`` encodes it
}
"""Digests the changelog holds: fixed for good (a changed digest would make a restored
window miss the ids of the records written before)."""


def test_the_digest_of_an_event_id_is_a_fixed_constant() -> None:
    for event_id, digest in KNOWN_DIGESTS.items():
        assert event_digest(event_id) == digest, event_id
        # BLAKE2b-64 of the UTF-8 bytes, read as a signed little-endian integer.
        data = event_id.encode("utf-8", "surrogatepass")
        raw = hashlib.blake2b(data, digest_size=8).digest()
        assert digest == int.from_bytes(raw, "little", signed=True)


def test_two_processes_agree_on_digests() -> None:
    # Python's own hash() of a string differs between these two processes; the window's
    # digest must not (restoring a changelog another worker wrote relies on it).
    code = (
        "from spanguard.streams.engine.dedup import event_digest; "
        "print(event_digest('acme-s1-e1'), hash('acme-s1-e1'))"
    )
    seen = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, check=True
        )
        seen.append(tuple(map(int, done.stdout.split())))
    (digest_1, hash_1), (digest_2, hash_2) = seen
    assert hash_1 != hash_2
    assert digest_1 == digest_2 == KNOWN_DIGESTS["acme-s1-e1"]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 3 * SORTED_FROM),
    st.lists(IDS, max_size=6 * SORTED_FROM),
    st.lists(IDS),
    st.lists(st.tuples(st.integers(-5, 3 * SORTED_FROM + 5), st.integers(-5, 3 * SORTED_FROM + 5))),
)
def test_the_window_holds_the_last_ids_accepted(
    window: int, accepted: list[str], asked: list[str], ranges: list[tuple[int, int]]
) -> None:
    # Below and past SORTED_FROM ids, full or not: the same answers as the last
    # ``window`` ids kept in a queue.
    recent = DedupWindow()
    model: deque[str] = deque(maxlen=window)
    for event_id in accepted:
        recent.add(event_digest(event_id), window)
        model.append(event_id)
        assert len(recent) == len(model)
        assert recent.between(0, len(recent)) == [event_digest(i) for i in model]
    for event_id in [*asked, *accepted]:
        assert (event_digest(event_id) in recent) == (event_id in model)
    # Any slice of the ring, oldest first (what the changelog's chunks are read from).
    digests = [event_digest(event_id) for event_id in model]
    for start, stop in ranges:
        assert recent.between(start, stop) == digests[max(0, start) : max(0, stop)]
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
