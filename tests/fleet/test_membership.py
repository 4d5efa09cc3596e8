"""Workers find each other through heartbeats: live peers, owners, tombstones."""

from __future__ import annotations

from spanguard.streams.fleet.membership import LIVENESS_TICKS, Members, heartbeat


def test_live_peers() -> None:
    members = Members("http://a:6066", tick_seconds=2.0)
    members.record(*heartbeat("http://a:6066", 100.0, [0, 1]))
    members.record(*heartbeat("http://b:6066", 101.0, [2, 3]))
    members.record(*heartbeat("http://c:6066", 100.0 - 2.0 * LIVENESS_TICKS - 1, [4]))
    assert [m.url for m in members.live(101.0)] == ["http://a:6066", "http://b:6066"]
    assert [m.url for m in members.peers(101.0)] == ["http://b:6066"]
    assert members.known["http://b:6066"].partitions == {2, 3}


def test_tombstones_and_garbage() -> None:
    members = Members("http://a:6066", tick_seconds=2.0)
    members.record(*heartbeat("http://b:6066", 100.0, [1]))
    members.record(b"http://b:6066", None)
    members.record(b"http://x", b"{not json")
    members.record(None, b"{}")
    assert members.live(100.0) == []
