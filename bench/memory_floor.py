"""A lower bound of a live simulated session's engine state in CPython (issue 22).

``bench.memory`` measures what the engine holds; this measures what any engine must
hold at least, in the leanest form CPython's own containers give: every string the
engine looks a span, key, name or call up by (live and gone span ids, referent keys,
name-book entries, tool call ids) as a ``bytes`` key of a dict, and every other field
the contract makes a session keep packed in one buffer at a minimal width (a text
digest 32 B, five sequence numbers and counts 4 B each, a score 8 B, a bound score's
id as its UTF-8, 3 B a held key or mention, 2 B a call, answer or parent, 9 B a gone
span, 8 B an event of the duplicate window). It leaves out every per-session object,
index and ordering the gate reads (the context order, rankings, holders), so an
engine at this figure is not possible: it bounds how far a packed, row-per-span state
could go below ``bench.memory``'s figure.

    .venv/bin/python -m bench.memory_floor
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
from collections.abc import Sequence
from datetime import timedelta

from bench.engine.mixed import feed
from bench.memory import open_session_lines
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine
from spanguard.streams.engine.state import SessionState, SpanState

LookedUp = list[str | bytes]


def _utf8(value: str | bytes) -> bytes:
    """A fresh bytes object of ``value`` (a session decodes its own strings)."""
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    return bytes(bytearray(raw))


def _span_bytes(span: SpanState) -> int:
    size = 32 + 5 * 4 + 8 + 1  # digest, tokens/position/arrival/seqs, score, flags
    if span.scored:
        size += 2 + len(_utf8(span.bound_id or ""))
    size += 3 * (len(span.holds) // 2 + len(span.mentions))
    size += 2 * (len(span.calls) + (span.answers is not None) + len(span.derived_from))
    return size


def _session_needs(session: SessionState, events: int) -> tuple[list[LookedUp], int]:
    """The strings ``session`` is looked up by (one list per dict) and its packed bytes."""
    keys = set(session.referents.key_holders)
    packed = sum(_span_bytes(span) for span in session.spans.values())
    for span_id in session.gone:
        gone = session.gone[span_id]
        keys.update(gone.keys)
        packed += 9 + 2 * len(gone.keys)
    packed += 8 * events + 8 * len(session.names.firsts) + 4 * len(session.names.entries)
    looked_up: list[LookedUp] = [
        list(session.spans),
        list(session.gone),
        list(keys),
        list(session.names.entries),
        list(session.call_spans),
    ]
    return looked_up, packed


def measure_floor(sessions: int) -> dict[str, float]:
    """Traced bytes a session of the lean form holds, over ``sessions`` simulated ones."""
    engine = Engine(EngineSettings(idle_timeout=timedelta(0)))
    feed(engine, open_session_lines(sessions))
    needs = [
        _session_needs(session, len(engine.windows[key].ring) if key in engine.windows else 0)
        for key, session in engine.sessions.items()
    ]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = [
        (
            [{_utf8(name): row for row, name in enumerate(names)} for names in looked_up],
            bytes(packed),
        )
        for looked_up, packed in needs
    ]
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del held
    live = len(needs)
    return {
        "sessions": live,
        "lower_bound_bytes_per_session": round(grown / live),
        "packed_bytes_per_session": round(sum(packed for _, packed in needs) / live),
        "looked_up_strings_per_session": round(
            sum(len(names) for looked_up, _ in needs for names in looked_up) / live, 1
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Print the lower bound as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.memory_floor", description=__doc__)
    parser.add_argument("--sessions", type=int, default=1_000, help="simulated sessions")
    args = parser.parse_args(argv)
    print(json.dumps(measure_floor(args.sessions), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
