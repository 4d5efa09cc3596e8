"""The reference model on the contract's own examples, without the engine."""

from spanguard.streams.reference.model import ReferenceModel
from spanguard.streams.reference.outcome import (
    Compacted,
    Decision,
    Fault,
    Outcome,
    Pin,
    Recompute,
    Rejected,
)
from spanguard.streams.reference.sessions import SessionWriter, named_rewrite, sha


def run(writer: SessionWriter) -> list[list[Outcome]]:
    """Every line's outcomes but the compaction records (see ``test_compaction.py``)."""
    model = ReferenceModel()
    return [
        [o for o in model.process(line) if not isinstance(o, Compacted)] for line in writer.lines
    ]


def decision(outcomes: list[Outcome]) -> Decision:
    (found,) = [o for o in outcomes if isinstance(o, Decision)]
    return found


def test_seed_000_a_rewrite_leaves_a_stale_score_and_the_gate_freezes() -> None:
    w = SessionWriter()
    w.add("a", "turn one", 0)
    w.add("b", "turn two", 1)
    w.add("c", "turn three", 2)
    w.score(("a", 0.2, sha("turn one")), ("b", 0.9, sha("turn two")), ("c", 0.5, sha("turn three")))
    w.rewrite(
        [
            {"span_id": "a", "text": "turn one", "tokens": 10},
            {"span_id": "b", "text": "turn two, shorter", "tokens": 5},
            {"span_id": "c", "text": "turn three", "tokens": 10},
        ],
        declared_modified=["b"],
    )
    w.evict(candidates=["a"])
    *_, rewritten, evicted = run(w)
    assert rewritten == [Fault("REWRITE_WITHOUT_INVALIDATION", frozenset({"b"}))]
    assert Recompute(frozenset({"a", "b", "c"})) in evicted
    assert decision(evicted).action == "FREEZE"
    assert decision(evicted).refused == {("a", "FROZEN")}


def test_seed_001_an_anaphor_pins_its_antecedent() -> None:
    w = SessionWriter()
    w.add("t1", "Customer says account 8841-C was charged twice.", 0)
    w.add("t2", "Checking the ledger now.", 1)
    w.add("t3", "Refund that account today.", 2)
    w.score(("t1", 0.1, sha("Customer says account 8841-C was charged twice.")))
    w.evict(candidates=["t1"], basis="recency")
    outcomes = run(w)[-1]
    assert Pin("t1", frozenset({"t3"})) in outcomes
    assert decision(outcomes).refused == {("t1", "PINNED")}
    assert decision(outcomes).action == "REJECT"


def test_three_rewrites_poison_a_span_and_the_next_decision_drops_it() -> None:
    w = SessionWriter()
    w.add("a", "v0", 0)
    w.add("b", "other", 1)
    for version in ("v1", "v2", "v3"):
        w.rewrite(
            [
                {"span_id": "a", "text": version, "tokens": 1},
                {"span_id": "b", "text": "other", "tokens": 10},
            ],
            declared_modified=["a"],
        )
    w.evict(candidates=[], basis="recency")
    *_, second, third, evicted = run(w)
    assert second == [Fault("REWRITE_OF_REWRITE", frozenset({"a"}))]
    assert third == [Fault("POISONED_SPAN", frozenset({"a"}))]
    assert decision(evicted) == Decision(
        decision(evicted).request_id, "COMMIT", frozenset(), frozenset(), frozenset({"a"})
    )


def test_a_span_missing_from_a_snapshot_without_a_successor_is_an_ungated_eviction() -> None:
    w = SessionWriter()
    w.add("a", "one", 0)
    w.add("b", "two", 1)
    w.add("c", "three", 2)
    w.rewrite(
        [
            {"span_id": "s", "text": "sum", "tokens": 2, "derived_from": ["a"]},
            {"span_id": "c", "text": "three", "tokens": 10},
        ]
    )
    assert run(w)[-1] == [Fault("UNGATED_EVICTION", frozenset({"b"}))]


def test_seq_duplicates_and_closed_sessions() -> None:
    w = SessionWriter()
    first = w.add("a", "one", 0)
    w.lines.append(first)  # a re-delivery: ignored
    w.seq += 1
    w.add("b", "two", 1)  # seq jumped
    w.event("session.closed")
    w.add("c", "late", 2)
    assert run(w) == [
        [],
        [],
        [Fault("SEQUENCE_GAP", frozenset())],
        [],
        [Rejected("SESSION_CLOSED")],
    ]


def test_bad_lines_are_rejected_with_their_reason() -> None:
    model = ReferenceModel()
    assert model.process(b"{") == [Rejected("INVALID_JSON")]
    assert model.process(b"[]") == [Rejected("NOT_AN_OBJECT")]
    assert model.process(b'{"type": "nope", "schema_version": 1}') == [Rejected("UNKNOWN_TYPE")]
    assert model.process(b'{"type": "span.added", "schema_version": 2}') == [
        Rejected("UNSUPPORTED_SCHEMA_VERSION")
    ]
    w = SessionWriter()
    w.add("a", "one", 0, text_sha256=sha("two"))
    assert model.process(w.lines[0]) == [Rejected("HASH_MISMATCH")]


def test_a_rewrite_is_extracted_in_snapshot_order_with_the_name_book() -> None:
    # Contract 1.2: once per text, "a rewrite's entries in snapshot order". The summary
    # before u2 teaches the book "Golden Lodge": u2's "the golden lodge" then repeats
    # it and needs the summary. After u2, the summary comes too late: ordinary words
    # in lower case are no name of their own, and nothing is pinned.
    outcomes = run(named_rewrite(summary_first=True))[-1]
    assert Pin("sum1", frozenset({"u2"})) in outcomes
    assert decision(outcomes).refused == {("sum1", "PINNED")}
    late = run(named_rewrite(summary_first=False))[-1]
    assert not [o for o in late if isinstance(o, Pin)]
    assert decision(late).committed == {"sum1"}


def test_names_in_any_case_and_their_short_forms_pin_the_introduction() -> None:
    w = SessionWriter()
    w.add("a1", "I'd suggest Warkworth House, it is quiet.", 0)
    w.add("t1", 'find_hotel: {"hotel_name": "Allenbell Lodge", "price": 120}', 1)
    w.add("u1", "What is the phone number of warkworth house?", 2)
    w.add("u2", "Does the Allenbell have parking?", 3)
    w.add("u3", "Take a train to Cambridge at 10:30.", 4)
    w.evict(candidates=["a1", "t1", "u3"], basis="recency")
    outcomes = run(w)[-1]
    assert Pin("a1", frozenset({"u1"})) in outcomes
    assert Pin("t1", frozenset({"u2"})) in outcomes
    assert decision(outcomes).committed == {"u3"}  # a city used as a location holds nothing
