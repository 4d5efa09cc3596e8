"""The session inspector: live spans by hash prefix, score status, lineage, the
timeline of recent records with their faults and pins, and never any text."""

from __future__ import annotations

import orjson

from spanguard.streams.fleet.recent import RecentRecords
from spanguard.streams.fleet.session_view import merge_session_views, session_view
from spanguard.streams.sim.scenarios import TURNS, broken, healthy
from tests.fleet.traces import run


def test_broken_session_view_has_spans_counters_lineage_and_timeline() -> None:
    script = broken("sess-b", "acme")
    result = run(script.lines())
    state = result.engine.session("acme", "sess-b")
    view = session_view("acme", "sess-b", state, result.recent.get("acme", "sess-b"))
    assert view is not None and view["status"] == "live"
    assert [s["span_id"] for s in view["spans"]] == [span.span_id for span in state.order]  # type: ignore[union-attr]
    for span in view["spans"]:
        assert len(span["hash"]) == 12
        assert span["score"]["status"] in {"bound", "stale", "unscored"}
    assert view["counters"]["live_spans"] == len(view["spans"])
    timeline = view["timeline"]
    assert [e["seq"] for e in timeline] == [e["seq"] for e in script.raw]
    assert {e["type"] for e in timeline} == {
        "span.added",
        "scores.computed",
        "context.rewritten",
        "eviction.requested",
    }
    fault_kinds = {
        o["kind"] for e in timeline for o in e["outputs"] if o["type"] == "integrity.fault"
    }
    assert {"REWRITE_WITHOUT_INVALIDATION", "POISONED_SPAN", "REFERENT_DROPPED"} <= fault_kinds
    assert len(view["faults"]) == sum(o.type == "integrity.fault" for o in result.outputs)
    edges = {tuple(e) for e in view["lineage"]["edges"]}
    assert {("sum1", "sum2"), ("a1", "sum1"), ("u3", "dig")} <= edges
    nodes = {n["span_id"]: n for n in view["lineage"]["nodes"]}
    assert nodes["dig"]["live"] and not nodes["sum1"]["live"]


def test_pins_appear_in_the_view_of_a_healthy_session() -> None:
    script = healthy("sess-h", "acme")
    result = run(script.lines()[:-1])  # keep it open
    view = session_view(
        "acme",
        "sess-h",
        result.engine.session("acme", "sess-h"),
        result.recent.get("acme", "sess-h"),
    )
    assert view is not None
    assert [p["span_id"] for p in view["pins"]] == ["u2"]
    assert {d["action"] for d in view["decisions"]} <= {"COMMIT", "PARTIAL"}


def test_the_view_holds_no_span_text() -> None:
    script = broken("sess-t", "acme")
    result = run(script.lines())
    view = session_view(
        "acme",
        "sess-t",
        result.engine.session("acme", "sess-t"),
        result.recent.get("acme", "sess-t"),
    )
    text = orjson.dumps(view).decode("utf-8")
    for _, _, turn in TURNS:
        assert turn not in text
    for span_text in script.texts.values():
        assert span_text not in text


def test_closed_and_unknown_sessions() -> None:
    script = healthy("sess-c", "acme")
    result = run(script.lines())
    assert result.engine.session("acme", "sess-c") is None
    view = session_view("acme", "sess-c", None, result.recent.get("acme", "sess-c"), closed=True)
    assert view is not None and view["status"] == "closed" and view["spans"] == []
    assert view["timeline"][-1]["type"] == "session.closed"
    assert session_view("acme", "nobody", None, []) is None


def test_the_ring_is_bounded_per_session_and_in_sessions() -> None:
    ring = RecentRecords(ring_size=3, max_sessions=2)
    for i in range(5):
        ring.record("t", "a", {"seq": i})
    assert [e["seq"] for e in ring.get("t", "a")] == [2, 3, 4]
    ring.record("t", "b", {"seq": 0})
    ring.record("t", "a", {"seq": 5})  # a is the most recent again
    ring.record("t", "c", {"seq": 0})  # evicts b, the least recently active
    assert ring.get("t", "b") == [] and len(ring) == 2
    assert [e["seq"] for e in ring.get("t", "a")] == [3, 4, 5]


def test_views_of_several_workers_join_into_one() -> None:
    """After a rebalance the new owner has the state and the newest records, the
    previous owner the older ones: the inspector shows them as one session."""
    script = broken("sess-m", "acme")
    lines = script.lines()
    result = run(lines)
    everything = result.recent.get("acme", "sess-m")
    state = result.engine.session("acme", "sess-m")
    cut = len(everything) // 2
    before = session_view("acme", "sess-m", None, everything[:cut])
    after = session_view("acme", "sess-m", state, everything[cut - 2 :])  # overlapping
    assert before is not None and after is not None
    joined = merge_session_views([before, after])
    assert joined is not None and joined["status"] == "live"
    assert joined["counters"] == after["counters"]
    assert [e["seq"] for e in joined["timeline"]] == [e["seq"] for e in everything]
    assert len(joined["faults"]) == sum(o.type == "integrity.fault" for o in result.outputs)
    assert merge_session_views([]) is None
