"""The benchmark's BM25 scorer, against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from bench.referents.bm25 import bm25, normalised, score_pass, tokenize


def test_tokens_are_folded_words_without_stop_words() -> None:
    assert tokenize("What's the PHONE number of Warkworth-House?") == [
        "s",
        "phone",
        "number",
        "warkworth",
        "house",
    ]


def test_one_term_one_match_scores_its_idf() -> None:
    # N = 2, n = 1: idf = ln(1 + 1.5 / 1.5) = ln 2; both documents have the average
    # length, so the tf part is f (k1 + 1) / (f + k1) = 1.
    scores = bm25("cat", {"a": "cat", "b": "dog"})
    assert scores["a"] == pytest.approx(math.log(2))
    assert scores["b"] == 0.0


def test_a_rarer_term_weighs_more_and_a_longer_document_less() -> None:
    docs = {
        "rare": "acorn lodge",
        "common": "room view",
        "other": "room service",
        "more": "room night",
        "long": "acorn lodge with garden car park near river",
    }
    scores = bm25("acorn room", docs)
    assert scores["rare"] > scores["common"]  # "acorn" is in 2 of 5 spans, "room" in 3
    assert scores["rare"] > scores["long"]  # the same match in a longer span
    idf_acorn = math.log(1 + (5 - 2 + 0.5) / (2 + 0.5))
    avg = (2 + 2 + 2 + 2 + 7) / 5  # "with" is a stop word
    expected = idf_acorn * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / avg))
    assert scores["rare"] == pytest.approx(expected)


def test_a_pass_is_normalised_to_its_best_span() -> None:
    scores = score_pass(
        "acorn guest house", {"q": "acorn guest house", "x": "the acorn", "y": "no"}
    )
    assert scores["q"] == 1.0
    assert 0.0 < scores["x"] < 1.0
    assert scores["y"] == 0.0


def test_a_query_of_stop_words_scores_everything_zero() -> None:
    assert score_pass("is it that?", {"a": "acorn", "b": "is it"}) == {"a": 0.0, "b": 0.0}
    assert normalised({}) == {}
