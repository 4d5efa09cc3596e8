"""A harness's own extractor (for instance a spaCy pipeline it already runs) and the
built-in one's names, client side: what the SDK sends, and the pin it leads to."""

from __future__ import annotations

import asyncio

from spanguard.schemas import MentionIn, Referent
from spanguard.streams.sdk import Message, SpanguardClient
from spanguard.streams.sdk.tracker import FoundReferents, SpanTracker


def stub_ner(text: str) -> FoundReferents:
    """Stands in for a NER model: tags 'Ms Okafor' as a person, 'her' as a mention."""
    introduces = [Referent(key="Ms Okafor", type="person")] if "Okafor" in text else []
    mentions = [MentionIn(type="person")] if " her " in f" {text} " else []
    return FoundReferents(introduces, mentions)


def test_the_harness_extractor_is_sent_beside_the_built_in_one() -> None:
    tracker = SpanTracker("t", "s", extractor=stub_ner)
    event = tracker.added(Message("m1", "Ms Okafor booked the Acorn Guest House."))
    introduced = {(r.key, r.type) for r in event.introduces or []}
    assert introduced == {
        ("Ms Okafor", "person"),  # the harness's
        ("ms okafor", "name"),  # the built-in extractor's
        ("acorn guest house", "house"),
    }


def test_with_text_sent_only_the_harness_findings_travel_with_it() -> None:
    tracker = SpanTracker("t", "s", extractor=stub_ner, send_text=True)
    event = tracker.added(Message("m1", "Ms Okafor called; call her back."))
    assert event.text is not None
    assert [(r.key, r.type) for r in event.introduces or []] == [("Ms Okafor", "person")]
    assert [m.type for m in event.mentions or []] == ["person"]


def test_the_built_in_name_book_turns_a_shortened_repeat_into_the_full_name() -> None:
    tracker = SpanTracker("t", "s")
    tracker.added(Message("m1", "I'd suggest the Acorn Guest House."))
    event = tracker.added(Message("m2", "what's the phone number of the acorn?"))
    assert [(r.key, r.type) for r in event.introduces or []] == [("acorn guest house", "house")]


def test_a_harness_mention_pins_the_span_its_entity_came_from_offline() -> None:
    async def run() -> list[str]:
        client = SpanguardClient.offline(extractor=stub_ner)
        session = client.session("s1")
        await session.add(Message("m1", "Ms Okafor asked for a refund."))
        await session.add(Message("m2", "noted"))
        await session.add(Message("m3", "please email her the form"))
        await session.score({"m1": 0.1, "m2": 0.1, "m3": 0.9}, scorer="r")
        decision = await session.request_eviction(threshold=0.15)
        return sorted(decision.committed)

    assert asyncio.run(run()) == ["m2"]
