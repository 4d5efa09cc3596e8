"""Phones and JSON values (streams/engine/typed_values.py): the cheap pre-check of a
phone says what the rule says, on any text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.shape import may_hold_phone, shape_of
from spanguard.streams.engine.typed_values import _TEN_DIGITS, find_typed

# The rule as first written: ten digits, at most two separators between two of them.
_TEN_REFERENCE = re.compile(r"\d(?:[ ().\-]{0,2}+\d){9}")


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("0123456789 ().-+x٣\n"), max_size=40))
def test_the_pre_check_finds_ten_digits_where_the_rule_does(text: str) -> None:
    expected = bool(_TEN_REFERENCE.search(text))
    assert bool(_TEN_DIGITS.search(text)) == expected
    shape = shape_of(text)
    if shape is not None:  # an ASCII text: its shape says it without a regex
        assert may_hold_phone(shape) == expected


def test_a_phone_inside_a_longer_digit_run_is_still_seen() -> None:
    # The search starts only at a run's first digit: a run of twelve digits, a phone
    # written with a country code, and an Arabic-Indic number still pass the check.
    assert _TEN_DIGITS.search("call 441223 456789 now")
    assert [p.digits for p in find_typed("call +44 1223 456789 now").phones] == ["441223456789"]
    assert _TEN_DIGITS.search("رقم ٠١٢٣٤٥٦٧٨٩")
    assert not may_hold_phone(shape_of("order 50020 on 2026-11-28 (#300)") or b"")
