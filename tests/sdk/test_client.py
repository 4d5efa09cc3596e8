"""The SDK's own rules, offline: events it builds, the diff it computes, the gate flow."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from spanguard.schemas import Action, FaultKind, text_sha256
from spanguard.streams.engine.driver import EngineDriver
from spanguard.streams.sdk import (
    CompactionGuard,
    Message,
    SpanguardClient,
    SyncSpanguardClient,
    gate_compaction,
)
from spanguard.streams.sdk.tracker import SpanTracker

SECRET_TEXT = "My account 8841-C was charged twice."


def _tracker() -> SpanTracker:
    return SpanTracker("t", "s")


def test_events_carry_hashes_and_referents_never_the_text() -> None:
    tracker = _tracker()
    event = tracker.added(Message("m1", SECRET_TEXT))
    wire = event.model_dump_json(exclude_none=True)
    assert SECRET_TEXT not in wire and "charged" not in wire
    assert event.text_sha256 == text_sha256(SECRET_TEXT)
    assert [(r.key, r.type) for r in event.introduces or []] == [("8841-c", "account")]
    mention = tracker.added(Message("m2", "Close that account."))
    assert [m.type for m in mention.mentions or []] == ["account"]


def test_send_text_sends_the_text_and_lets_the_service_extract() -> None:
    event = SpanTracker("t", "s", send_text=True).added(Message("m1", SECRET_TEXT))
    assert event.text == SECRET_TEXT and event.introduces is None


def test_seq_event_ids_and_base_seq() -> None:
    tracker = _tracker()
    events = [tracker.added(Message(f"m{i}", f"turn {i}")) for i in range(3)]
    assert [e.seq for e in events] == [0, 1, 2]
    assert len({e.event_id for e in events}) == 3
    rewrite, _ = tracker.rewritten([Message("m0", "turn 0"), Message("m2", "turn 2")])
    assert rewrite.seq == 3 and rewrite.base_seq == 2
    other = SpanTracker("t", "s")  # the same session resumed elsewhere: new ids
    assert other.added(Message("m0", "x")).event_id != events[0].event_id


def test_the_diff_names_modified_created_merged_and_removed() -> None:
    tracker = _tracker()
    for i in range(4):
        tracker.added(Message(f"m{i}", f"turn {i} text"))
    tracker.scored({"m1": 0.9, "m2": 0.8}, scorer="r")
    after = [
        Message("sum", "summary of m0 and m2", derived_from=("m0", "m2")),
        Message("m1", "turn 1 text, condensed"),
    ]
    event, diff = tracker.rewritten(after)
    assert diff.created == ("sum",) and diff.modified == ("m1",)
    assert diff.merged == ("m0", "m2") and diff.removed == ("m3",)
    assert event.declared_modified == ["m1"]
    # The scores of the modified (m1) and merged (m2) spans are invalidated.
    assert (
        sorted(event.scores_invalidated) == sorted(diff.invalidated) and len(diff.invalidated) == 2
    )
    assert diff.kept_scores == ()
    _, carried = tracker.rewritten(after, invalidate_scores=False)
    assert len(carried.kept_scores) == 2


def test_the_same_trace_as_text_and_as_sdk_hashes_gives_the_same_decision() -> None:
    # The client-side extraction stands in for the service's: same pins, same decision.
    texts = [SECRET_TEXT, "Sunny today. " * 10, "Please close that account."]
    tracker = SpanTracker("t", "s", send_text=True)
    with_text = EngineDriver()
    with_text.pipe([tracker.added(Message(f"m{i}", t)) for i, t in enumerate(texts)])
    with_text.pipe([tracker.eviction(["m0", "m1"], basis="recency")])

    client = SpanguardClient.offline()
    session = client.session("s", tenant="t")

    async def run() -> tuple[tuple[str, ...], tuple[str, ...]]:
        await session.observe([Message(f"m{i}", t) for i, t in enumerate(texts)])
        decision = await session.request_eviction(["m0", "m1"], basis="recency")
        return decision.committed, decision.pinned

    committed, pinned = asyncio.run(run())
    [reference] = with_text.decisions()
    assert committed == tuple(reference.committed) == ("m1",)
    assert pinned == tuple(r.span_id for r in reference.refused) == ("m0",)


async def test_offline_decision_and_session_view() -> None:
    session = SpanguardClient.offline().session("s1")
    await session.observe([Message("a", SECRET_TEXT), Message("b", "x " * 40)])
    await session.observe([Message("a", SECRET_TEXT), Message("c", "Close that account.")])
    assert session.live == ["a", "b", "c"]
    decision = await session.request_eviction(["a", "b", "zz"], basis="recency")
    assert decision.action is Action.PARTIAL
    assert decision.committed == ("b",)
    assert decision.refused == {"a": "PINNED", "zz": "UNKNOWN_SPAN"}
    assert session.live == ["a", "c"]


async def test_score_basis_freezes_after_a_modification_and_asks_for_recompute() -> None:
    session = SpanguardClient.offline().session("s1")
    messages = [Message(f"m{i}", f"message {i} " * 5) for i in range(3)]
    await session.observe(messages)
    await session.score({"m0": 0.1, "m1": 0.5, "m2": 0.9}, scorer="r")
    await session.rewrite([messages[0], Message("m1", "shorter"), messages[2]])
    decision = await session.request_eviction(threshold=0.3)
    assert decision.action is Action.FREEZE and decision.evict == ()
    assert "m1" in decision.recompute


async def test_gate_vetoes_a_ballooning_summary() -> None:
    client = SpanguardClient.offline()
    session = client.session("s1")
    before = [Message("a", "short one"), Message("b", "short two"), Message("c", "last")]
    after = [Message("sum", "a very long summary " * 50), before[2]]
    outcome = await gate_compaction(session, before, after)
    assert not outcome.applied and outcome.vetoed_by == (FaultKind.SUMMARY_BALLOONING,)
    assert [m.id for m in outcome.messages] == ["a", "b", "c"]
    assert session.live == ["a", "b", "c"]  # nothing was sent beyond the spans
    assert client.engine is not None
    state = client.engine.session("default", "s1")
    assert state is not None and sorted(state.spans) == ["a", "b", "c"]  # the check left no trace


async def test_poisoned_spans_dropped_by_a_decision_leave_the_compacted_context() -> None:
    session = SpanguardClient.offline().session("s1")
    await session.observe([Message("p", "v0"), Message("q", "other")])
    for n in range(1, 4):  # three rewrites of p without a new score: poisoned
        await session.rewrite([Message("p", f"v{n}"), Message("q", "other")])
    outcome = await gate_compaction(
        session,
        [Message("p", "v3"), Message("q", "other")],
        [Message("p", "v3")],
    )
    assert outcome.decision is not None and outcome.decision.dropped == ("p",)
    assert [m.id for m in outcome.messages] == []


def test_sync_client_wraps_the_same_session() -> None:
    client = SyncSpanguardClient.offline()
    session = client.session("sync-1")
    session.observe([Message("a", SECRET_TEXT), Message("b", "Close that account.")])
    decision = session.request_eviction(["a"], basis="recency")
    assert decision.pinned == ("a",) and session.live == ["a", "b"]


def test_bad_input_gets_a_clear_error() -> None:
    tracker = _tracker()
    tracker.added(Message("m1", "x"))
    with pytest.raises(ValueError, match="already live"):
        tracker.added(Message("m1", "y"))
    with pytest.raises(ValueError, match="not live"):
        tracker.scored({"nope": 0.5}, scorer="r")
    with pytest.raises(ValueError, match="appears twice"):
        tracker.rewritten([Message("m1", "x"), Message("m1", "x")])
    with pytest.raises(ValueError, match="exactly one of candidates or policy"):
        tracker.eviction()
    with pytest.raises(ValueError, match="non-empty id"):
        Message("", "x")
    with pytest.raises(ValueError, match="non-empty"):
        SpanguardClient.offline().session("")
    # Options are keyword arguments: a misspelt one is an error, not ignored.
    with pytest.raises(TypeError, match="thresold"):
        tracker.eviction(thresold=0.3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"veto$"):
        CompactionGuard(SpanguardClient.offline().session("s"), veto=())  # type: ignore[call-arg]


def test_rewrite_event_is_valid_contract_json() -> None:
    tracker = _tracker()
    tracker.added(Message("m1", "x"))
    event, _ = tracker.rewritten([Message("m1", "y")])
    data = orjson.loads(event.model_dump_json(exclude_none=True))
    assert data["type"] == "context.rewritten" and data["context"][0]["span_id"] == "m1"
    assert "text" not in data["context"][0]
