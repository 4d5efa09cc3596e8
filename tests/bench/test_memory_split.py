"""bench.memory's halves: the first sessions to start, then the others, each whole."""

from __future__ import annotations

from bench.memory import split_by_start


def line(session: str, n: int) -> bytes:
    return b'{"session_id":"%s","seq":%d}' % (session.encode(), n)


def test_the_first_sessions_to_start_come_first_and_each_session_stays_whole() -> None:
    lines = [line("c", 0), line("a", 0), line("c", 1), b"{broken", line("b", 0), line("a", 1)]
    early, late = split_by_start(lines, 2)
    assert early == [line("c", 0), line("a", 0), line("c", 1), b"{broken", line("a", 1)]
    assert late == [line("b", 0)]
    valid = [raw for raw in lines if raw != b"{broken"]
    assert split_by_start(lines, 0) == ([b"{broken"], valid)
