"""The compaction failures agent teams hit in 2026, each as a session with its healthy
counterpart (contract 1.2): what ``examples/compactions.jsonl`` holds, what the Kafka
tests feed the workers beside the other scenarios, and what a user can replay.

Every session is an agent loop with a protected system prompt and task, and a tool
call with its result; each pair differs in one thing only:

* ``split-pair`` / ``absorbed-pair``: a summary replaces a tool result and leaves its
  call live (the provider would reject the next request), or absorbs both halves;
* ``rewritten-prompt`` / ``kept-prompt``: a compaction rewrites the system prompt, or
  keeps it verbatim;
* ``lost-keys`` / ``kept-keys``: a summary of a tool call, its result and a reply
  (holding an order, a tracking number and a ticket) keeps none of them, or two;
* ``thrashing`` / ``shrinking``: compactions turn after turn that fold two history
  turns into a summary (under 10% less context), or eight;
* ``half-pair-eviction`` / ``whole-pair-eviction``: a pruner asks to evict a tool
  call without its result, or the whole pair (the gate refuses the first with
  ``TOOL_PAIR``), and the system prompt (refused ``PROTECTED``).
"""

from __future__ import annotations

from collections.abc import Callable

from spanguard.streams.engine.trace import SessionScript, interleave

SYSTEM = "You are the support agent of Acme. Never share card numbers."
TASK = "My order 55012 arrived broken; I want a refund to account 8841-C."


def _agent(session_id: str) -> SessionScript:
    s = SessionScript(session_id=session_id, tenant="acme")
    s.add("sys", SYSTEM, role="system", protected=True)
    s.add("u1", TASK, role="user", protected=True)
    s.add("a1", "Let me look that order up.", role="assistant", tool_call_ids=["call-1"])
    s.add(
        "t1",
        '{"order_id": "55012", "tracking_id": "1Z999AA10123456784", "ticket_id": "INC-4411"}',
        role="tool",
        tool_call_id="call-1",
    )
    s.add("a2", "Found it: it was delivered last week.", role="assistant")
    s.add("u2", "ok, go ahead", role="user")
    return s


def _summarise(s: SessionScript, keep: list[str], text: str, parents: list[str]) -> None:
    s.next_turn()
    entries: list[dict[str, object]] = [{"span_id": span_id} for span_id in keep]
    entries.append({"span_id": "sum", "text": text, "derived_from": parents})
    s.rewrite(entries, strategy="summarize", trigger="threshold")


def split_pair() -> SessionScript:
    """A summary replaces the tool result; its call stays live: ``TOOL_PAIR_SPLIT``."""
    s = _agent("split-pair")
    _summarise(s, ["sys", "u1", "a1", "a2", "u2"], "order 55012: INC-4411", ["t1"])
    return s


def absorbed_pair() -> SessionScript:
    """A rolling summary absorbs both halves of the pair: healthy."""
    s = _agent("absorbed-pair")
    _summarise(s, ["sys", "u1", "a2", "u2"], "looked up order 55012: INC-4411", ["a1", "t1"])
    return s


def rewritten_prompt() -> SessionScript:
    """A compaction rewrites the system prompt: ``PROTECTED_SPAN_REWRITTEN``."""
    s = _agent("rewritten-prompt")
    s.next_turn()
    s.rewrite(
        [{"span_id": "sys", "text": "You are an agent."}]
        + [{"span_id": span_id} for span_id in ("u1", "a1", "t1", "a2", "u2")],
        declared_modified=["sys"],
        strategy="summarize",
        trigger="overflow",
    )
    return s


def kept_prompt() -> SessionScript:
    """A compaction that keeps the system prompt and the task verbatim: healthy."""
    s = _agent("kept-prompt")
    _summarise(s, ["sys", "u1", "u2"], "looked up 55012: INC-4411 open", ["a1", "t1", "a2"])
    return s


def lost_keys() -> SessionScript:
    """A summary keeps none of the identifiers its parents held (the task, still live,
    keeps the order's): ``SUMMARY_LOST_KEYS``."""
    s = _agent("lost-keys")
    _summarise(s, ["sys", "u1", "u2"], "The lookup found the parcel.", ["a1", "t1", "a2"])
    return s


def kept_keys() -> SessionScript:
    """The same summary keeps the tracking number and the ticket: healthy."""
    s = _agent("kept-keys")
    text = "The lookup found parcel 1Z999AA10123456784; ticket INC-4411 is open."
    _summarise(s, ["sys", "u1", "u2"], text, ["a1", "t1", "a2"])
    return s


def _rolling(session_id: str, merged: int) -> SessionScript:
    """Four compactions a turn apart, each folding the ``merged`` oldest turns of the
    history into a five-word summary."""
    s = _agent(session_id)
    for i in range(32):
        s.add(f"h{i}", f"history turn {i}: the customer and the agent talked about it", role="user")
    live = [f"h{i}" for i in range(32)]
    kept = ["sys", "u1", "a1", "t1", "a2", "u2"]
    for round_ in range(4):
        s.next_turn()
        folded, live = live[:merged], live[merged:]
        summary = f"sum{round_}"
        entries: list[dict[str, object]] = [{"span_id": span_id} for span_id in kept]
        entries.append(
            {"span_id": summary, "text": "they talked about the order", "derived_from": folded}
        )
        entries += [{"span_id": span_id} for span_id in live]
        s.rewrite(entries, strategy="summarize", trigger="threshold")
        kept.append(summary)
    return s


def thrashing() -> SessionScript:
    """Compactions turn after turn that fold two turns into one: less than 10% each,
    ``COMPACTION_THRASHING`` at the third."""
    return _rolling("thrashing", 2)


def shrinking() -> SessionScript:
    """The same loop folding eight turns each time: healthy."""
    return _rolling("shrinking", 8)


def half_pair_eviction() -> SessionScript:
    """A pruner asks to evict a tool call without its result, and the system prompt:
    both refused (``TOOL_PAIR`` held by the result, ``PROTECTED``)."""
    s = _agent("half-pair-eviction")
    s.evict(["sys", "a1", "u2"], basis="recency")
    return s


def whole_pair_eviction() -> SessionScript:
    """The whole pair leaves together."""
    s = _agent("whole-pair-eviction")
    s.evict(["a1", "t1", "u2"], basis="recency")
    return s


SCENARIOS: dict[str, Callable[[], SessionScript]] = {
    "split-pair": split_pair,
    "absorbed-pair": absorbed_pair,
    "rewritten-prompt": rewritten_prompt,
    "kept-prompt": kept_prompt,
    "lost-keys": lost_keys,
    "kept-keys": kept_keys,
    "thrashing": thrashing,
    "shrinking": shrinking,
    "half-pair-eviction": half_pair_eviction,
    "whole-pair-eviction": whole_pair_eviction,
}
"""Session id -> its scenario, failures and healthy counterparts in pairs."""


def compaction_fleet() -> list[bytes]:
    """Every scenario in one interleaved trace (the session id is the scenario's name)."""
    return interleave([build() for build in SCENARIOS.values()])
