"""The packed gone spans read exactly as the dict of :class:`GoneSpan` they replace."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.gone import ARRIVAL_BITS, GoneSpan, GoneSpans, pack, unpack

IDS = st.text(alphabet="abc", min_size=1, max_size=2)
KEYS: st.SearchStrategy[list[bytes | str]] = st.lists(
    st.sampled_from([b"\x01" * 32, "clear-key"]), max_size=2
)
ARRIVAL = st.integers(0, (1 << ARRIVAL_BITS) - 1)
GONE = st.builds(
    GoneSpan,
    st.integers(0, 1 << 80),  # seq has no bound in the contract
    st.integers(0, 3),
    ARRIVAL,
    KEYS.map(tuple),
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("leave"), IDS, GONE),
        st.tuples(st.just("set"), IDS, GONE),
        st.tuples(st.just("discard"), IDS, st.none()),
        st.tuples(st.just("del"), IDS, st.none()),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_gone_spans_read_as_the_dict_they_replace(
    ops: list[tuple[str, str, GoneSpan | None]],
) -> None:
    gone = GoneSpans()
    model: dict[str, GoneSpan] = {}
    for op, span_id, entry in ops:
        if op == "leave":
            assert entry is not None
            gone.leave(span_id, entry.seq, entry.stale_rewrites, entry.arrival, entry.keys)
            model[span_id] = entry
        elif op == "set":
            assert entry is not None
            gone[span_id] = entry
            model[span_id] = entry
        elif op == "discard":
            left = model.pop(span_id, None)
            assert gone.discard(span_id) == (None if left is None else left.arrival)
        elif span_id in model:
            del model[span_id]
            del gone[span_id]
        else:
            with pytest.raises(KeyError):
                del gone[span_id]
        assert list(gone.items()) == list(model.items())  # insertion order too
        assert len(gone) == len(model)
        assert all((span_id in gone) == (span_id in model) for span_id in ("a", "b", "ab"))
    assert gone == GoneSpans(model)
    assert gone.get("zz") is None


@given(st.integers(0, 1 << 100), ARRIVAL)
def test_pack_gives_back_what_it_packed(seq: int, arrival: int) -> None:
    assert unpack(pack(seq, arrival)) == (seq, arrival)


@pytest.mark.parametrize("numbers", [(-1, 0), (0, -1), (0, 1 << ARRIVAL_BITS)])
def test_numbers_a_packed_entry_cannot_hold_are_refused(numbers: tuple[int, int]) -> None:
    with pytest.raises(OverflowError):
        pack(*numbers)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-2, 1 << 80),
    st.lists(
        st.tuples(IDS, st.integers(0, 3), st.integers(-1, 1 << (ARRIVAL_BITS + 1)), KEYS.map(tuple))
    ),
)
def test_leave_many_is_leave_for_each(
    seq: int, departed: list[tuple[str, int, int, tuple[bytes | str, ...]]]
) -> None:
    many, each = GoneSpans(), GoneSpans()
    try:
        for span_id, stale_rewrites, arrival, keys in departed:
            each.leave(span_id, seq, stale_rewrites, arrival, keys)
    except OverflowError:
        with pytest.raises(OverflowError):
            many.leave_many(seq, departed)
        return
    many.leave_many(seq, departed)
    assert list(many.items()) == list(each.items())
