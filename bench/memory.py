"""Memory per live span and per live session (issue 22, item 2).

Two figures, both the growth of ``tracemalloc``'s traced memory while an engine
processes the input (the input lines are built before tracing starts, the module's
lazily built tables are warmed by a throw-away run first, and the engine's bounded
caches and the module's shares are emptied before tracing starts and again before the
last reading, :meth:`~spanguard.streams.engine.engine.Engine.clear_caches`, so only what
the live state holds is counted, and nothing an earlier run left in a cache is reused
uncounted):

The engine runs as the worker runs it: change tracking on, its changes drained every
:data:`DRAIN_EVERY` records in the per-session rows (since 2026-12-04 night; before,
and in the per-span rows, every ``commit_every`` records of the runtime's defaults: see
:data:`DRAIN_EVERY` for why it matters once sessions go cold) (``--no-changes``: off, the basis of
the figures before 2026-12-04, ~0.5 KB a simulated session less since round 8, ~2 KB
before it).

* **bytes per live span**: one engine holding ``--spans-sessions`` x 1,000 live,
  scored spans (the workload of ``bench.engine``'s memory row,
  :func:`bench.engine_costs.measure_memory`), each session's duplicate window included:
  the average, and the marginal cost of a span (from half the sessions to all of them,
  as for sessions below; since 2026-12-04, and the one its target is read on);
* **bytes per live session**: one engine holding ``--sessions`` simulated sessions
  (``spanguard.streams.sim``, the default fleet's ~60 events a session), none of them
  closed (their ``session.closed`` lines are left out) and idle expiry off, so every
  session stays live: the average, and the marginal cost of a session (what the
  engine's memory grows by per session from half the sessions to all of them; the
  rest, ``fixed_bytes``, is what an engine holds once: its bounded caches). The
  engine's defaults hold a session idle for ``cold_after`` (10 min of event time) packed
  (:mod:`~spanguard.streams.engine.cold`): at the end of the simulated fleet's four
  hours most sessions are, as in a fleet whose sessions live ``idle_timeout`` (24 h)
  past their last event. ``per_hot_session`` is the same measure with ``cold_after`` 0,
  every session held as objects: what a busy session costs. The per-span rows hold
  every session as objects too; ``per_span`` numbers its spans in each session
  (``s00001``: short ids, shared by every session that has them,
  :func:`~spanguard.streams.engine.holdings.share_id`), ``per_span_uuid_ids`` gives
  them random UUIDs, as the SDK's adapters do (each span keeps its own 85 B string).

    .venv/bin/python -m bench.memory             # tracemalloc figures
    .venv/bin/python -m bench.memory --top 30    # and the 30 lines a session costs most at
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import tracemalloc
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import orjson

from bench.engine.mixed import feed
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source

Json = dict[str, Any]
DRAIN_EVERY = 1_000
"""Records between two drains of the per-session rows: a worker at 1,000 events/s under
the default 1 s ``commit_interval``. At ``commit_every``'s 20,000 (a worker at full speed,
or ``bench.engine``'s untimed feed) a session due to go cold while it still owes
changelog records waits for the drain, so a run that ends 10,000 records after its last
drain holds ~45 minutes of simulated sessions hot, a figure of where the run stops."""
TARGET_BYTES_PER_SPAN = 600.0
TARGET_BYTES_PER_SESSION = 12_000.0
SOURCE = Source("spanguard.events", 0, 0)


def open_session_lines(sessions: int, seed: int = 7) -> list[bytes]:
    """The simulated fleet's input lines without its ``session.closed`` events."""
    from spanguard.streams.sim import SimConfig, simulate

    fleet = simulate(SimConfig(sessions=sessions, seed=seed))
    return [line for line in fleet.lines if not _closes(line)]


_SESSION = re.compile(rb'"session_id":"([^"]+)"')


def split_by_start(lines: Sequence[bytes], first: int) -> tuple[list[bytes], list[bytes]]:
    """``lines`` (in time order) as the lines of the ``first`` sessions to start and the
    lines of the others, each in order (a line naming no session goes with the first):
    fed one after the other, the second part moves the partition's clock on, as time
    does, and a session of either goes cold when it falls idle."""
    started: dict[bytes, bool] = {}
    early: list[bytes] = []
    late: list[bytes] = []
    for line in lines:
        found = _SESSION.search(line)
        if found is None:
            early.append(line)
            continue
        is_early = started.setdefault(found.group(1), len(started) < first)
        (early if is_early else late).append(line)
    return early, late


def _closes(line: bytes) -> bool:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(event, dict) and event.get("type") == "session.closed"


def _traced_growth(
    lines: Sequence[bytes], settings: EngineSettings, changes: bool, by_line: bool = False
) -> tuple[Engine, int, dict[str, int]]:
    """An engine fed ``lines``, the traced bytes it grew by and (``by_line``) that
    growth by the source line that allocated it (the first snapshot is taken before
    the growth is counted from, the second after: neither is in the figure, and the
    snapshots' own objects are left out of the lines)."""
    engine = Engine(settings, track_changes=changes)
    engine.clear_caches()  # what an earlier run left in the module's shares is not reused
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.take_snapshot() if by_line else None
    before = tracemalloc.get_traced_memory()[0]
    feed(engine, lines, DRAIN_EVERY)
    engine.clear_caches()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    grown_at: dict[str, int] = {}
    if start is not None:
        own = [tracemalloc.Filter(False, tracemalloc.__file__)]
        end = tracemalloc.take_snapshot().filter_traces(own)
        for stat in end.compare_to(start.filter_traces(own), "lineno"):
            frame = stat.traceback[0]
            grown_at[f"{frame.filename}:{frame.lineno}"] = stat.size_diff
    tracemalloc.stop()
    return engine, after - before, grown_at


def measure_sessions(
    sessions: int, top: int = 0, changes: bool = True, cold_after: timedelta | None = None
) -> Json:
    """Traced bytes per live simulated session: the average over ``sessions`` and the
    marginal cost (the growth from half of them to all of them, divided by the other
    half), which leaves out what an engine holds once whatever its number of
    sessions (its bounded caches of recent texts' scans and of keyed hashes). With
    ``top``, the marginal cost of the ``top`` source lines that allocate most of it.
    ``cold_after``: the engine's setting (None: its default; 0: every session is held
    as objects, none packed)."""
    lines = open_session_lines(sessions)
    packing = {} if cold_after is None else {"cold_after": cold_after}
    settings = EngineSettings(idle_timeout=timedelta(0), **packing)
    # Warm the module-level caches (compiled patterns, word lists) on other sessions.
    for line in open_session_lines(20, seed=99):
        Engine(settings).process_raw(line, SOURCE)
    half, _ = split_by_start(lines, sessions // 2)
    half_engine, half_grown, half_at = _traced_growth(half, settings, changes, top > 0)
    half_live = len(half_engine.sessions)
    del half_engine
    engine, grown, grown_at = _traced_growth(lines, settings, changes, top > 0)
    live, cold = len(engine.sessions), engine.sessions.cold
    spans = sum(len(state.spans) for state in engine.sessions.values())
    gone = sum(len(state.gone) for state in engine.sessions.values())
    marginal = (grown - half_grown) / (live - half_live)
    by_line = {
        where: round((size - half_at.get(where, 0)) / (live - half_live))
        for where, size in grown_at.items()
    }
    top_lines = dict(sorted(by_line.items(), key=lambda item: -item[1])[:top])
    return {
        "change_tracking": changes,
        "sessions": live,
        "cold_after_seconds": settings.cold_after.total_seconds(),
        "cold_sessions": cold,
        "events": len(lines),
        "live_spans": spans,
        "gone_spans": gone,
        "traced_bytes": grown,
        "bytes_per_live_session": round(grown / live),
        "marginal_bytes_per_session": round(marginal),
        "fixed_bytes": round(grown - marginal * live),
        "target": TARGET_BYTES_PER_SESSION,
        "met": marginal <= TARGET_BYTES_PER_SESSION,
        **({"marginal_bytes_by_line": top_lines} if top else {}),
    }


def measure_spans(sessions: int, changes: bool = True, uuid_ids: bool = False) -> Json:
    """``bench.engine``'s memory row: traced bytes per live span, 1,000 spans a session
    (``bytes_per_live_span``, what an engine holds once included, as ``bench.engine``
    reports it), and the marginal cost of a span (the growth from half the sessions to
    all of them over the other half's spans: the per-session row's basis, which leaves
    out the engine's bounded caches). ``met`` reads the marginal, as the per-session
    row's does."""
    if sessions < 2:
        raise SystemExit("error: --spans-sessions needs 2 sessions or more (a half to compare)")
    full = _span_row(sessions, changes, uuid_ids)
    half = _span_row(sessions // 2, changes, uuid_ids)
    grown = full["traced_bytes"] - half["traced_bytes"]
    marginal = grown / (full["live_spans"] - half["live_spans"])
    return {
        **full,
        "marginal_bytes_per_live_span": round(marginal, 1),
        "fixed_bytes": round(full["traced_bytes"] - marginal * full["live_spans"]),
        "met": marginal <= TARGET_BYTES_PER_SPAN,
    }


def _span_row(sessions: int, changes: bool, uuid_ids: bool) -> Json:
    """One engine holding ``sessions`` x 1,000 live, scored spans (the same texts for
    the same number of sessions)."""
    from bench.engine.text import TOOL_TEMPLATES, USER_TEMPLATES, TextGen
    from bench.engine_costs import measure_memory

    gen = TextGen(random.Random(5))
    templates = [USER_TEMPLATES, TOOL_TEMPLATES]
    pick = iter(range(10**9))

    def text() -> str:
        return gen.text(templates[next(pick) % 2])

    return measure_memory(text, sessions=sessions, spans=1_000, changes=changes, uuid_ids=uuid_ids)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--sessions", type=int, default=1_000, help="simulated sessions")
    parser.add_argument(
        "--spans-sessions", type=int, default=100, help="sessions of 1,000 spans (per-span row)"
    )
    parser.add_argument(
        "--top",
        type=int,
        default=0,
        help="also list the source lines that allocate most of a session's marginal bytes",
    )
    parser.add_argument(
        "--no-changes",
        action="store_true",
        help="change tracking off (the basis of the figures before 2026-12-04)",
    )
    args = parser.parse_args(argv)
    changes = not args.no_changes
    report: Json = {
        "per_session": measure_sessions(args.sessions, args.top, changes),
        "per_hot_session": measure_sessions(args.sessions, 0, changes, timedelta(0)),
        "per_span": measure_spans(args.spans_sessions, changes),
        "per_span_uuid_ids": measure_spans(args.spans_sessions, changes, uuid_ids=True),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
