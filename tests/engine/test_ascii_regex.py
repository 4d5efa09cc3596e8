"""ASCII twins match an ASCII text exactly where their originals do, and the scan
of an ASCII text finds the same with the twins as with the patterns as written."""

from __future__ import annotations

import re
from dataclasses import fields
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine import referents
from spanguard.streams.engine.ascii_regex import ascii_twin

# Pieces that reach every branch of the scan's patterns: codes, URLs, paths,
# stamps, determiners, requests, type nouns, fillers, gaps and line breaks.
_PIECES = st.sampled_from(
    [
        "0", "12", "5501", "2026-11-20", "10:30", "INV-", "a1", "x", "Acorn", "@",
        "/", "\\", "`", "``", ":", ".", "-", "_", "+", "~", "#", "(", ")", " ", "  ",
        "\n", "\t", '"', "'", "*", "www.", "https://", "C:\\", "the", "This", "same",
        "said", "those", "order", "account", "no.", "what is ", "send me ", "tell ",
        "price", "$", "dollars", "4-star", "1st", "uuid", "me@x.io", "T", "s", "?",
    ]
)  # fmt: skip
_ASCII_TEXTS = st.lists(_PIECES, max_size=24).map("".join) | st.text(
    st.characters(max_codepoint=127), max_size=60
)


@pytest.mark.parametrize("name", [field.name for field in fields(referents._Patterns)])
@given(text=_ASCII_TEXTS, start=st.integers(min_value=0, max_value=8))
@settings(max_examples=150, deadline=None)
def test_a_twin_matches_where_its_original_does(name: str, text: str, start: int) -> None:
    original: re.Pattern[str] = getattr(referents._ANY_TEXT, name)
    twin: re.Pattern[str] = getattr(referents._ASCII_TEXT, name)
    for subject in (text, text[::-1]):  # some patterns run on the reversed text
        assert [(m.span(), m.groups()) for m in twin.finditer(subject, start)] == [
            (m.span(), m.groups()) for m in original.finditer(subject, start)
        ]


@given(_ASCII_TEXTS)
@settings(max_examples=400, deadline=None)
def test_an_ascii_text_scans_the_same_with_the_twins(text: str) -> None:
    with_twins = referents.scan_text(text)
    with patch.object(referents, "_ASCII_TEXT", referents._ANY_TEXT):
        assert referents.scan_text(text) == with_twins


def test_classes_are_spelled_out_and_case_folding_kept() -> None:
    original = re.compile(r"[^\W\d_]+(?i:[a-c]\d)")
    twin = ascii_twin(original)
    assert twin.fullmatch("abC7") is not None and twin.fullmatch("ab_7") is None
    assert twin.fullmatch("abX7") is None
    # Spelled out as ASCII code points: a letter beyond ASCII is no longer one.
    assert original.fullmatch("\u00e9a7") is not None and twin.fullmatch("\u00e9a7") is None
