"""The SDK's inbox stays bounded over a long session and keeps what waiters need."""

from __future__ import annotations

from spanguard.schemas import ID_FIELD, EvictionDecided, OutputEvent
from spanguard.streams.engine.engine import Engine
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.sdk.inbox import Inbox


def outputs_of_a_long_session(requests: int) -> list[OutputEvent]:
    s = SessionScript()
    for n in range(requests):
        s.add(f"s{n}", f"order {10000 + n} for account A{n}-X")
        s.add(f"r{n}", f"that account again, order {10000 + n}")
        s.evict([f"s{n}"], basis="recency")  # pinned by r{n}: a pin, then the decision
    return Engine().process_many(s.events())


def ident(output: OutputEvent) -> str:
    return str(getattr(output, ID_FIELD[output.type]))


def test_an_inbox_keeps_its_newest_outputs_and_their_decisions() -> None:
    outputs = outputs_of_a_long_session(40)
    inbox = Inbox("acme", "s1", limit=10)
    for output in outputs:
        inbox.deliver(output)
        assert len(inbox.outputs) <= 10 + 10 // 4
    assert inbox.outputs == outputs[-len(inbox.outputs) :]
    assert set(inbox.by_id) == {ident(o) for o in inbox.outputs}
    kept = {o.request_id for o in inbox.outputs if isinstance(o, EvictionDecided)}
    assert set(inbox.decisions) == kept and "req-40" in kept and "req-1" not in kept


def test_a_recent_repeat_is_ignored_an_old_one_is_taken_again() -> None:
    outputs = outputs_of_a_long_session(20)
    inbox = Inbox("acme", "s1", limit=10)
    for output in outputs:
        inbox.deliver(output)
    held = len(inbox.outputs)
    inbox.deliver(outputs[-1])
    assert len(inbox.outputs) == held
    inbox.deliver(outputs[0])
    assert inbox.outputs[-1] is outputs[0]


def test_late_decisions_are_bounded_and_leave_given_up() -> None:
    outputs = outputs_of_a_long_session(30)
    inbox = Inbox("acme", "s1", limit=5)
    for n in range(1, 31):
        inbox.give_up(f"req-{n}")
    for output in outputs:
        inbox.deliver(output)
    assert inbox.given_up == set()
    assert len(inbox.late) <= 5 + 5 // 4
    assert inbox.late[-1].request_id == "req-30"
