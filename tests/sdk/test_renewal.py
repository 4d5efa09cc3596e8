"""Contract 1.2's idle expiry, seen from the SDK: a session whose id expired continues
under ``<first id>~2``, its live context reported again, once per expiry (offline, the
real engine; event times set through the tracker's clock)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from spanguard.schemas import EventRejected, RejectReason, SpanAdded
from spanguard.streams.engine.engine import Engine
from spanguard.streams.sdk import Message, Renewal, Session, SpanguardClient, SyncSpanguardClient
from spanguard.streams.sdk.tracker import SpanTracker

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    """The event time the tracker stamps (moved by the test, never by the wall)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def pass_(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def _session(client: SpanguardClient, clock: Clock, session_id: str = "s1") -> Session:
    session = client.session(session_id, tenant="t")
    session.tracker.clock = clock
    return session


def _engine(client: SpanguardClient) -> Engine:
    assert client.engine is not None
    return client.engine


CONTEXT = [
    Message("m0", "You are a support agent.", role="system"),
    Message("m1", "My account 8841-C was charged twice.", role="user"),
    Message("m2", "Unrelated: what is a good name for a cat? " * 4, role="user"),
    Message("m3", "And how warm will it be tomorrow? " * 4, role="user"),
]


async def _open(client: SpanguardClient, clock: Clock) -> Session:
    session = _session(client, clock)
    await session.observe(CONTEXT)
    await session.score({"m2": 0.1, "m3": 0.2}, scorer="rel")
    return session


async def test_an_idle_session_continues_under_a_new_id_with_its_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = SpanguardClient.offline()
    clock = Clock()
    session = await _open(client, clock)
    engine = _engine(client)
    before = engine.session("t", "s1")
    assert before is not None
    protected = {s: span.protected for s, span in before.spans.items()}

    clock.pass_(hours=25)
    with caplog.at_level(logging.WARNING, logger="spanguard.streams.sdk.client"):
        faults = await session.add(Message("m4", "Thanks. Please close that account today."))

    assert faults == []
    assert session.session_id == "s1~2"
    [renewal] = session.renewals
    assert renewal == Renewal(
        "s1", "s1~2", "SESSION_EXPIRED", renewal.detail, renewal.refused_event_id, 4
    )
    assert "expired" in renewal.detail
    refused = [o for o in session.inbox.outputs if isinstance(o, EventRejected)]
    assert [(r.reason, r.session_id, r.caused_by) for r in refused] == [
        (RejectReason.SESSION_EXPIRED, "s1", renewal.refused_event_id)
    ]
    assert "continuing as 's1~2'" in caplog.text
    assert engine.session("t", "s1") is None  # expired: its state was deleted
    state = engine.session("t", "s1~2")
    assert state is not None
    # Nothing lost: every live message, in order, with its protection and its score.
    assert [s.span_id for s in sorted(state.spans.values(), key=lambda s: s.position)] == [
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
    ]
    assert {s: state.spans[s].protected for s in protected} == protected
    assert {s: (b.score if (b := state.spans[s].bound) else None) for s in ("m2", "m3")} == {
        "m2": 0.1,
        "m3": 0.2,
    }
    assert session.faults() == []  # no gap, no ungated eviction, no pair split
    assert session.live == ["m0", "m1", "m2", "m3", "m4"]
    assert client.session("s1", tenant="t") is session  # the old id still finds it

    # The gate works on the new id: the chatter goes, the account's message stays
    # (protected, as the user's first message, and referred to by m4).
    decision = await session.request_eviction(["m1", "m2", "m3"])
    assert not decision.timed_out, decision.note
    assert set(decision.evict) == {"m2", "m3"} and "m1" not in decision.evict
    assert set(state.spans) == {"m0", "m1", "m4"}

    # No second renewal without a second expiry.
    clock.pass_(hours=23)
    await session.add(Message("m5", "Done, thank you."))
    assert len(session.renewals) == 1 and session.session_id == "s1~2"
    assert session.faults() == []


async def test_every_expiry_renews_once_and_never_loops() -> None:
    client = SpanguardClient.offline()
    clock = Clock()
    session = await _open(client, clock)
    for generation in (2, 3):
        clock.pass_(hours=25)
        await session.add(Message(f"late{generation}", f"back after a day, round {generation}"))
        assert session.session_id == f"s1~{generation}"
    assert [(r.old_session_id, r.new_session_id) for r in session.renewals] == [
        ("s1", "s1~2"),
        ("s1~2", "s1~3"),
    ]
    assert [r.spans_reported for r in session.renewals] == [4, 5]
    state = _engine(client).session("t", "s1~3")
    assert state is not None and set(state.spans) == {*session.live}
    assert len(session.live) == 6 and session.faults() == []


async def test_a_refused_request_is_decided_under_the_new_id() -> None:
    client = SpanguardClient.offline()
    clock = Clock()
    session = await _open(client, clock)
    clock.pass_(hours=25)
    decision = await session.request_eviction(threshold=0.5)
    assert session.session_id == "s1~2" and len(session.renewals) == 1
    assert not decision.timed_out, decision.note
    assert set(decision.evict) == {"m2", "m3"}
    assert session.live == ["m0", "m1"]


async def test_a_refused_rewrite_is_applied_under_the_new_id() -> None:
    client = SpanguardClient.offline()
    clock = Clock()
    session = await _open(client, clock)
    base = session.tracker.last_seq
    clock.pass_(hours=25)
    summary = Message("sum", "The user asked about a cat name and the weather.")
    summary = Message(summary.id, summary.text, role="assistant", derived_from=("m2", "m3"))
    report = await session.rewrite([*CONTEXT[:2], summary], base_seq=base)
    assert session.session_id == "s1~2"
    assert report.sent and report.faults == ()
    assert report.diff.merged == ("m2", "m3")
    state = _engine(client).session("t", "s1~2")
    assert state is not None and set(state.spans) == {"m0", "m1", "sum"}
    assert session.live == ["m0", "m1", "sum"]


async def test_closing_an_expired_session_does_not_renew_it() -> None:
    client = SpanguardClient.offline()
    clock = Clock()
    session = await _open(client, clock)
    clock.pass_(hours=25)
    await session.close()
    assert session.renewals == [] and client.sessions == {}


async def test_scores_reported_by_the_refused_event_are_sent_once() -> None:
    client = SpanguardClient.offline()
    clock = Clock()
    session = await _open(client, clock)
    clock.pass_(hours=25)
    await session.score({"m2": 0.9}, scorer="rel")
    state = _engine(client).session("t", "s1~2")
    assert state is not None
    bound = state.spans["m2"].bound
    assert bound is not None and bound.score == 0.9
    assert session.faults() == []


def test_a_tracker_reports_its_context_again_with_referents_and_text() -> None:
    tracker = SpanTracker("t", "s", send_text=True)
    tracker.added(Message("m0", "My account 8841-C was charged twice.", role="user"))
    tracker.added(Message("m1", "Close that account.", role="user"))
    plain = SpanTracker("t", "s")
    first = plain.added(Message("m0", "My account 8841-C was charged twice.", role="user"))
    plain.renew("s~2")
    [again] = plain.rereport()
    assert isinstance(again, SpanAdded)
    assert again.session_id == "s~2" and again.seq == 1 and again.position == 0
    assert again.introduces == first.introduces and again.text is None
    assert again.protected is True
    tracker.renew("s~2")
    texts = [e.text for e in tracker.rereport() if isinstance(e, SpanAdded)]
    assert texts == ["My account 8841-C was charged twice.", "Close that account."]


def test_the_sync_client_says_so() -> None:
    clock = Clock()
    with SyncSpanguardClient.offline() as client:
        session = client.session("s9", tenant="t")
        session.session.tracker.clock = clock
        session.observe(CONTEXT[:2])
        clock.pass_(hours=25)
        session.observe([*CONTEXT[:2], Message("m9", "again")])
        assert [r.new_session_id for r in session.renewals] == ["s9~2"]
        assert session.session_id == "s9~2"
