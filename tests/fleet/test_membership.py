"""Workers find each other through heartbeats: live peers, owners, tombstones."""

from __future__ import annotations

from streams.fleet.membership import LIVENESS_TICKS, Members, heartbeat


def test_live_peers_and_partition_owners() -> None:
    members = Members("http://a:6066", tick_seconds=2.0)
    members.record(*heartbeat("http://a:6066", 100.0, [0, 1]))
    members.record(*heartbeat("http://b:6066", 101.0, [2, 3]))
    members.record(*heartbeat("http://c:6066", 100.0 - 2.0 * LIVENESS_TICKS - 1, [4]))
    assert [m.url for m in members.live(101.0)] == ["http://a:6066", "http://b:6066"]
    assert [m.url for m in members.peers(101.0)] == ["http://b:6066"]
    owner = members.owner(3, 101.0)
    assert owner is not None and owner.url == "http://b:6066"
    assert members.owner(4, 101.0) is None  # its worker went quiet
    # b moved partition 3 to a: the newer heartbeat wins.
    members.record(*heartbeat("http://a:6066", 102.0, [0, 1, 3]))
    owner = members.owner(3, 102.0)
    assert owner is not None and owner.url == "http://a:6066"


def test_tombstones_and_garbage() -> None:
    members = Members("http://a:6066", tick_seconds=2.0)
    members.record(*heartbeat("http://b:6066", 100.0, [1]))
    members.record(b"http://b:6066", None)
    members.record(b"http://x", b"{not json")
    members.record(None, b"{}")
    assert members.live(100.0) == []
