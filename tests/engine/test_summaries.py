"""Contract 1.1: SUMMARY_BALLOONING and EMPTY_SUMMARY, raised by a rewrite."""

from __future__ import annotations

import pytest

from spanguard.schemas import FaultKind, Severity, text_sha256
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.engine.trace import SessionScript


def three_turns(tokens: tuple[int, int, int] = (10, 20, 30)) -> SessionScript:
    s = SessionScript()
    for name, n in zip(("a", "b", "c"), tokens, strict=True):
        s.add(name, f"turn {name}", tokens=n)
    return s


def run(s: SessionScript, **settings: object) -> EngineDriver:
    d = EngineDriver(**settings)
    d.pipe(s)
    return d


def test_summary_longer_than_its_parents_balloons() -> None:
    s = three_turns()
    s.rewrite(
        [
            {"span_id": "c"},
            {"span_id": "sum", "text": "long", "tokens": 31, "derived_from": ["a", "b"]},
        ]
    )
    d = run(s)
    [fault] = d.faults(FaultKind.SUMMARY_BALLOONING)
    assert fault.severity == Severity.WARNING and fault.span_ids == ["sum"]
    [item] = fault.evidence["spans"]
    assert item["tokens"] == 31 and item["source_tokens"] == 30
    assert item["sources"] == {"a": 10, "b": 20} and item["change"] == "created"
    assert fault.evidence["balloon_ratio"] == 1.0


def test_summary_as_long_as_its_parents_is_fine_and_ratio_is_configurable() -> None:
    s = three_turns()
    s.rewrite(
        [
            {"span_id": "c"},
            {"span_id": "sum", "text": "same", "tokens": 30, "derived_from": ["a", "b"]},
        ]
    )
    assert not run(s).faults(FaultKind.SUMMARY_BALLOONING)
    assert run(s, balloon_ratio=0.5).faults(FaultKind.SUMMARY_BALLOONING)


def test_modified_span_that_grows_balloons() -> None:
    s = three_turns()
    s.rewrite(
        [
            {"span_id": "a", "text": "a, at length", "tokens": 11},
            {"span_id": "b"},
            {"span_id": "c"},
        ],
        declared_modified=["a"],
    )
    [fault] = run(s).faults(FaultKind.SUMMARY_BALLOONING)
    [item] = fault.evidence["spans"]
    assert item["change"] == "modified" and item["tokens_before"] == 10
    assert item["source_tokens"] == 10 and item["sources"] == {}


def test_rolling_summary_that_absorbs_new_turns_is_healthy() -> None:
    # "sum" (55 tokens, from 60) later absorbs the new turn d (20 tokens) and grows
    # to 70: more than it was, less than its sources (55 + 20).
    s = three_turns()
    s.rewrite([{"span_id": "sum", "text": "rolled", "tokens": 55, "derived_from": ["a", "b", "c"]}])
    s.add("d", "turn d", tokens=20)
    s.rewrite(
        [{"span_id": "sum", "text": "rolled on", "tokens": 70, "derived_from": ["d"]}],
        declared_modified=["sum"],
    )
    assert not run(s).faults(FaultKind.SUMMARY_BALLOONING)
    # Growing beyond what it absorbed is ballooning.
    s.add("e", "turn e", tokens=5)
    s.rewrite(
        [{"span_id": "sum", "text": "rolled again", "tokens": 76, "derived_from": ["e"]}],
        declared_modified=["sum"],
    )
    [fault] = run(s).faults(FaultKind.SUMMARY_BALLOONING)
    [item] = fault.evidence["spans"]
    assert item["sources"] == {"e": 5} and item["source_tokens"] == 75
    assert item["tokens_before"] == 70


def test_parent_that_already_left_makes_ballooning_unmeasurable() -> None:
    s = three_turns()
    s.evict(["a"], basis="recency")
    s.rewrite(
        [
            {"span_id": "c"},
            {"span_id": "sum", "text": "x", "tokens": 500, "derived_from": ["a", "b"]},
        ]
    )
    assert not run(s).faults(FaultKind.SUMMARY_BALLOONING)


@pytest.mark.parametrize("hash_only", [False, True])
def test_empty_summary_of_two_spans_is_critical(hash_only: bool) -> None:
    s = three_turns((1, 1, 1))
    entry: dict[str, object] = {"span_id": "sum", "tokens": 0, "derived_from": ["a", "b"]}
    entry.update({"text_sha256": text_sha256("")} if hash_only else {"text": ""})
    s.rewrite([{"span_id": "c"}, entry])
    d = run(s)
    [fault] = d.faults(FaultKind.EMPTY_SUMMARY)
    assert fault.severity == Severity.CRITICAL and fault.span_ids == ["sum"]
    [item] = fault.evidence["spans"]
    assert item["empty_text"] is True and item["parents"] == ["a", "b"]
    assert item["parent_tokens"] == 2


def test_empty_summary_of_one_span_is_not_a_summary_failure() -> None:
    s = three_turns()
    s.rewrite(
        [
            {"span_id": "b"},
            {"span_id": "c"},
            {"span_id": "sum", "text": "", "tokens": 0, "derived_from": ["a"]},
        ]
    )
    assert not run(s).faults(FaultKind.EMPTY_SUMMARY)


@pytest.mark.parametrize(
    ("parent_tokens", "summary_tokens", "fires"),
    [
        ((40, 35, 1), 2, True),  # 75 parent tokens = 25 x 3, summary below 3
        ((40, 34, 1), 2, False),  # 74: a short summary of little text is healthy
        ((40, 35, 1), 3, False),  # 3 tokens is a (terse) summary
    ],
)
def test_near_empty_summary_needs_enough_parent_tokens(
    parent_tokens: tuple[int, int, int], summary_tokens: int, fires: bool
) -> None:
    s = three_turns(parent_tokens)
    s.rewrite(
        [
            {"span_id": "c"},
            {"span_id": "sum", "text": "ok", "tokens": summary_tokens, "derived_from": ["a", "b"]},
        ]
    )
    faults = run(s).faults(FaultKind.EMPTY_SUMMARY)
    assert bool(faults) is fires
    if fires:
        assert faults[0].evidence["spans"][0]["parent_tokens"] == 75
        assert faults[0].evidence["min_summary_tokens"] == 3


def test_thresholds_and_severity_are_configuration() -> None:
    s = three_turns((40, 35, 1))
    s.rewrite(
        [
            {"span_id": "c"},
            {"span_id": "sum", "text": "ok", "tokens": 5, "derived_from": ["a", "b"]},
        ]
    )
    assert not run(s).faults(FaultKind.EMPTY_SUMMARY)
    [fault] = run(
        s,
        min_summary_tokens=6,
        empty_summary_parent_factor=10,
        severities={"EMPTY_SUMMARY": "info"},
    ).faults(FaultKind.EMPTY_SUMMARY)
    assert fault.severity == Severity.INFO


def test_summary_faults_come_after_the_contract_1_0_faults_of_the_rewrite() -> None:
    s = three_turns()
    s.rewrite([{"span_id": "sum", "text": "", "tokens": 0, "derived_from": ["a", "b"]}])
    kinds = run(s).fault_kinds()
    assert kinds == [FaultKind.UNGATED_EVICTION, FaultKind.EMPTY_SUMMARY]
