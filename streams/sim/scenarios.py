"""Hand-written agent sessions: the example traces, and the demo fleet built from them.

Regenerate the examples with ``python -m spanguard.streams.sim.scenarios``.

* ``healthy.jsonl``: a support-triage session whose compactions declare what
  they change, invalidate the scores they break and are re-scored before the
  pruner acts; the gate pins the turn that introduced account 8841-C.
* ``broken.jsonl``: the loop of seed 000 (a summariser that keeps inherited
  scores, re-summarises its own summaries and scores denser text higher), plus
  the eviction of seed 001 and a rewrite that silently drops a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spanguard.streams.engine.trace import SessionScript, interleave
from spanguard.streams.sim.texts import Entity, compose

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ORDER = Entity("order", "55012", "id")
ACCOUNT = Entity("account", "8841-C", "id")
TICKET = Entity("ticket", "INC-4411", "id")
"""The entities of the support-triage story (seed 001's account)."""

_STORY = (
    ("u1", "user", "Hi, I was charged twice for <e0> last week."),
    # The tool writes the bare number and a card ending: not identifiers of the story.
    (
        "t1",
        "tool",
        "lookup_order(55012) -> status shipped, 2 charges of 49.00 EUR, card ending 4421",
    ),
    ("a1", "assistant", "I can see two charges on <a0:that>. Let me check the payment account."),
    ("u2", "user", "It is <e1>, the one flagged last week."),
    ("t2", "tool", "kyc_status(<k1>) -> pending review, opened <e2>"),
    ("a2", "assistant", "Your account is under a routine review; I opened <k2> for the refund."),
    ("u3", "user", "How long does the review usually take?"),
    ("a3", "assistant", "Usually two business days."),
)


def _story() -> list[tuple[str, str, str]]:
    """The story's turns written by the shared text generator (:func:`compose`)."""
    known: set[str] = set()
    turns = []
    for span_id, role, template in _STORY:
        text = compose(template, (ORDER, ACCOUNT, TICKET), frozenset(known))
        known.update(type_ for _, type_ in text.holds)
        turns.append((span_id, role, text.text))
    return turns


TURNS = _story()
"""(span id, role, text) of the support-triage turns both example sessions start with."""


def healthy(session_id: str = "sess-healthy-01", tenant: str = "acme") -> SessionScript:
    """A well-behaved support-triage session (no warning or critical fault)."""
    s = SessionScript(session_id, tenant=tenant)
    for span_id, role, text in TURNS:
        s.add(span_id, text, role=role)
    s.score(
        *[
            (sid, v)
            for sid, v in zip(
                [t[0] for t in TURNS], [0.7, 0.6, 0.3, 0.8, 0.7, 0.5, 0.4, 0.2], strict=True
            )
        ]
    )
    s.next_turn()
    # A compaction that summarises u3/a3 into one span and says so.
    s.rewrite(
        [{"span_id": sid} for sid, _, _ in TURNS[:6]]
        + [
            {
                "span_id": "sum1",
                "text": "User asked how long the review takes: two business days.",
                "derived_from": ["u3", "a3"],
            }
        ],
        declared_modified=[],
        scores_invalidated=[s.score_id(1, 6, "u3"), s.score_id(1, 7, "a3")],
    )
    s.score(("sum1", 0.25))  # relevance stays within 5% of the pre-rewrite mean
    s.next_turn()
    s.add("u4", "Did that account clear KYC yet?", role="user")
    s.score(("u4", 0.9))
    # The pruner wants everything scored below 0.35: a3 and u3 are gone already,
    # a1 (0.3) and sum1 (0.25) qualify. Nothing needs them, so both go.
    s.evict(threshold=0.35)
    s.next_turn()
    s.add("t3", "kyc_status(8841-C) -> cleared", role="tool")
    s.score(("t3", 0.85))
    # A budget compactor asks for the oldest turns; u2 introduced the account that
    # u4 asks about, so the gate pins it and commits the rest.
    s.evict(["u1", "t1", "u2"], basis="recency")
    s.close()
    return s


def broken(session_id: str = "sess-broken-07", tenant: str = "acme") -> SessionScript:
    """The failure modes of both seeds in one session."""
    s = SessionScript(session_id, tenant=tenant)
    for span_id, role, text in TURNS:
        s.add(span_id, text, role=role)
    s.score(*[(sid, 0.4) for sid, _, _ in TURNS], no_hash=["a3"])  # SCORE_PROVENANCE_GAP
    s.next_turn()
    # Rewrite 1: the model summarises a1..a2 into one span, keeps an inherited
    # score inside the snapshot and invalidates nothing (REWRITE_WITHOUT_INVALIDATION),
    # and silently drops a3 (UNGATED_EVICTION).
    s.rewrite(
        [
            {"span_id": "u1"},
            {"span_id": "t1"},
            {
                "span_id": "sum1",
                "text": "Two charges on order 55012; account 8841-C under review, INC-4411.",
                "derived_from": ["a1", "u2", "t2", "a2"],
                "score": {"score_id": "inherited", "score": 0.4},
            },
            {"span_id": "u3", "text": "Asked about review time."},
        ],
        declared_modified=[],
    )
    s.score(("sum1", 0.6), ("u3", 0.5))  # the denser text scores higher
    s.next_turn()
    # Rewrite 2: the summary of the summary (counter 2: REWRITE_OF_REWRITE); scores rise again.
    s.rewrite(
        [
            {"span_id": "u1"},
            {
                "span_id": "sum2",
                "text": "Refund for 55012 pending review.",
                "derived_from": ["sum1", "t1"],
            },
            {"span_id": "u3"},
        ],
        scores_invalidated=[s.score_id(2, 0, "sum1")],
    )
    s.score(("sum2", 0.8), ("u3", 0.6))  # MONOTONIC_DRIFT: two rising rewrites
    s.next_turn()
    # Rewrite 3 and 4 paraphrase sum2 again without a re-score in between:
    # counter 3 poisons it (POISONED_SPAN).
    s.rewrite(
        [{"span_id": "u1"}, {"span_id": "sum2", "text": "Refund pending."}, {"span_id": "u3"}],
        declared_modified=["sum2"],
        scores_invalidated=[s.score_id(3, 0, "sum2")],
    )
    s.rewrite(
        [{"span_id": "u1"}, {"span_id": "sum2", "text": "Refund."}, {"span_id": "u3"}],
        declared_modified=["sum2"],
    )
    s.rewrite(
        [{"span_id": "u1"}, {"span_id": "sum2", "text": "Pending."}, {"span_id": "u3"}],
        declared_modified=["sum2"],
    )
    s.next_turn()
    # The harness writes its own digest of u3 and the pruner then evicts u3 by
    # score: the digest cites it (ORPHANED_PARENT). The poisoned sum2 is dropped.
    s.add("dig", "digest: review time question", derived_from=["u3"])
    s.score(("dig", 0.5), ("u1", 0.3))
    s.evict(["u3"])
    s.next_turn()
    # Seed 001: account 8841-C is introduced, later asked about as "that account";
    # the scorer rates the introduction below the threshold.
    s.add("u5", "Also check account 7731-Q, the joint one.", role="user")
    s.add("a5", "Noted.", role="assistant")
    s.add("u6", "Has that account been verified?", role="user")
    s.score(("u5", 0.11), ("a5", 0.05), ("u6", 0.9))
    s.evict(threshold=0.15)
    # A rewrite that drops u5 anyway (REFERENT_DROPPED, UNGATED_EVICTION), and a gap in seq.
    s.rewrite([{"span_id": "u1"}, {"span_id": "dig"}, {"span_id": "u6"}])
    s.seq += 2
    s.evict(["u1"])
    return s


def demo_fleet(sessions: int, tenants: int = 3, broken_every: int = 4) -> list[bytes]:
    """``sessions`` sessions over ``tenants`` tenants, every ``broken_every``-th one
    broken, interleaved round-robin as a fleet's events would arrive."""
    scripts = []
    for i in range(sessions):
        make: Callable[[str, str], SessionScript] = broken if i % broken_every == 0 else healthy
        kind = "broken" if make is broken else "healthy"
        scripts.append(make(f"sess-{kind}-{i:04d}", f"tenant-{i % tenants}"))
    return interleave(scripts)


def main() -> None:
    """Write both example traces into ``examples/``."""
    for name, script in (("healthy", healthy()), ("broken", broken())):
        (EXAMPLES / f"{name}.jsonl").write_bytes(b"\n".join(script.lines()) + b"\n")
        print(f"wrote examples/{name}.jsonl ({len(script.raw)} events)")


if __name__ == "__main__":
    main()
