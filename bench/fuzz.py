"""Hostile input at scale: generated garbage interleaved with valid sessions through the engine.

Run from the project root::

    .venv/bin/python -m bench.fuzz                    # 1,000,000 hostile inputs (a few minutes)
    .venv/bin/python -m bench.fuzz --count 20000      # the size tests/reliability runs
    .venv/bin/python -m bench.fuzz --seed 5 --count 1000000

What one run does (everything drawn from ``random.Random(seed)``: the same seed and
count give byte-identical inputs, so a failure reproduces with the same command):

1. **Valid sessions**: a fleet from the simulator (``--valid-sessions`` sessions,
   including its own injected faults and malformed records) is run alone through a
   fresh :class:`~spanguard.streams.engine.engine.Engine`: the *clean run*.
2. **Hostile inputs**: ``--count`` records made by mutating the events of other
   simulated sessions (their own session ids, so they never touch a valid
   session's state): truncated and oversized JSON, deep nesting, huge arrays and
   strings, invalid UTF-8, ``NaN``/``Infinity``, wrong types, missing fields,
   unknown event types and schema versions, duplicate and reordered ``seq``,
   tombstones (empty values), empty and random values, flipped bytes. The
   unmutated events of those sessions are interleaved too, so mutations land on
   live sessions with state.
3. **The mixed run**: valid and hostile records interleaved at random through a
   second engine.

Checked on every record: ``process_raw`` never raises (a *crash*); every output is
a contract event that encodes; a hostile record of a category that must be
rejected is answered by exactly one ``event.rejected`` with a reason from the
category's expected set and a non-empty detail; and the outputs of every valid
record in the mixed run are byte-identical to the clean run's.

Results go to ``bench/results/fuzz.json`` (``fuzz-<count>.json`` for other
counts); inputs that crashed the engine are written to
``bench/results/fuzz-crashes/`` to reproduce them.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from random import Random
from typing import Any

import orjson

from spanguard.schemas import INPUT_TYPES, EventRejected, RejectReason, text_sha256
from spanguard.schemas.codec import encode_output
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.decode import Invalid, decode
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.sim import SimConfig, simulate

RESULTS = Path(__file__).resolve().parent / "results"
#: Small enough that oversized records are cheap to make, large enough for every valid event.
MAX_EVENT_BYTES = 64 * 1024
#: Every record gets this broker time, as the worker passes the record's timestamp.
RECEIVED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

R = RejectReason
Json = dict[str, Any]
Expected = frozenset[RejectReason] | None
"""The reasons a mutation must be rejected with, or None when it may also be accepted."""
Mutation = Callable[[Random, Json, bytes, "FuzzSessions"], tuple[bytes, Expected]]

_ENVELOPE = ("type", "schema_version", "event_id", "session_id", "tenant", "seq", "turn", "ts")
_INVALID_UTF8 = (
    b"\xff",
    b"\xfe\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\x80",
)


# --------------------------------------------------------------------------- mutations


def _dump(data: Any) -> bytes:
    try:
        return orjson.dumps(data)
    except TypeError:  # integers beyond 64 bits: JSON allows them, orjson does not write them
        return json.dumps(data, separators=(",", ":")).encode()


def truncated(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A valid line cut short (a producer that died mid-write)."""
    return raw[: rng.randrange(0, len(raw))], frozenset({R.INVALID_JSON})


def oversized(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A line over ``max_event_bytes`` (a huge tool result)."""
    padded = dict(event, text="x" * rng.randint(MAX_EVENT_BYTES, 2 * MAX_EVENT_BYTES))
    return _dump(padded), frozenset({R.TOO_LARGE})


def huge_string(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A string near the size limit, in the text (hash kept right) or in an unknown field."""
    size = rng.randint(MAX_EVENT_BYTES // 4, MAX_EVENT_BYTES - len(raw) - 512)
    blob = "".join(rng.choice("abcdefgh ü€\U0001f600") for _ in range(64)) * (size // 200 + 1)
    blob = blob[: size // 4]
    if event.get("type") == "span.added":
        changed = dict(event, text=blob, text_sha256=text_sha256(blob))
    else:
        changed = dict(event, x_blob=blob)
    return _dump(changed), None


def deep_nesting(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """Arrays or objects nested hundreds to tens of thousands deep, in some field."""
    depth = rng.choice([64, 500, 1023, 1025, 5000, 50_000])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
    nested = opener * depth + b"1" + closer * depth
    name = rng.choice(["x_nested", "mentions", "context", "scores", "derived_from", "seq"])
    body = _dump({k: v for k, v in event.items() if k != name})
    return body[:-1] + b',"' + name.encode() + b'":' + nested + b"}", None


def huge_array(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """Tens of thousands of elements where a list is expected (or in an unknown field)."""
    count = rng.choice([1_000, 10_000, 60_000])
    kind = event.get("type")
    if kind == "span.added":
        changed = dict(event, derived_from=[f"p{i}" for i in range(count)])
    elif kind == "scores.computed":
        scores = [
            {"score_id": f"z{i}", "span_id": f"sp{i}", "score": 0.5, "text_sha256": "0" * 64}
            for i in range(count // 10)
        ]
        changed = dict(event, scores=scores)
    elif kind == "eviction.requested":
        changed = {k: v for k, v in event.items() if k != "policy"}
        changed["candidates"] = [f"c{i}" for i in range(count)]
    else:
        changed = dict(event, x_list=list(range(count)))
    body = _dump(changed)
    if len(body) > MAX_EVENT_BYTES:
        return body, frozenset({R.TOO_LARGE})
    return body, None


def invalid_utf8(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """Bytes that are not UTF-8 inserted anywhere in a valid line."""
    at = rng.randrange(0, len(raw) + 1)
    return raw[:at] + rng.choice(_INVALID_UTF8) + raw[at:], frozenset({R.INVALID_JSON})


def non_finite(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """``NaN`` / ``Infinity`` literals in a score, or in an integer field."""
    literal = rng.choice([float("nan"), float("inf"), float("-inf")])
    scores = event.get("scores")
    if isinstance(scores, list) and scores:
        changed = dict(event, scores=[dict(s) for s in scores])
        changed["scores"][rng.randrange(len(scores))]["score"] = literal
        expected = frozenset({R.NON_FINITE_SCORE})
    else:
        changed = dict(event, **{rng.choice(["turn", "seq"]): literal})
        expected = frozenset({R.INVALID_FIELD})
    return json.dumps(changed, allow_nan=True, separators=(",", ":")).encode(), expected


def wrong_type(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A list or an object where an envelope field wants a string or a number."""
    name = rng.choice(_ENVELOPE)
    changed = dict(event, **{name: rng.choice([[1, 2], {"a": 1}, [], {}])})
    if name == "type":
        return _dump(changed), frozenset({R.UNKNOWN_TYPE})
    if name == "schema_version":
        return _dump(changed), frozenset({R.UNSUPPORTED_SCHEMA_VERSION})
    return _dump(changed), frozenset({R.INVALID_FIELD})


def loose_type(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """Any field replaced by a value of another JSON type (strings of numbers, booleans ...)."""
    name = rng.choice(sorted(event))
    value = rng.choice([True, False, 0, -1, 2**63, 1.5, "1", "", "x" * 300, None, [None], {"": ""}])
    return _dump(dict(event, **{name: value})), None


def missing_field(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A required envelope field left out (or sent as ``null``, which means absent)."""
    name = rng.choice(_ENVELOPE)
    if rng.random() < 0.5:
        changed = {k: v for k, v in event.items() if k != name}
    else:
        changed = dict(event, **{name: None})
    return _dump(changed), frozenset({R.MISSING_FIELD})


def unknown_type(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """An event type the contract does not know."""
    name = rng.choice(["span.exploded", "SPAN.ADDED", "span.added ", "", "eviction", "\u0000"])
    assert name not in INPUT_TYPES
    return _dump(dict(event, type=name)), frozenset({R.UNKNOWN_TYPE})


def wrong_version(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A ``schema_version`` other than the integer 1."""
    version = rng.choice([0, 2, -1, 1.0, "1", True, 10**30])
    return _dump(dict(event, schema_version=version)), frozenset({R.UNSUPPORTED_SCHEMA_VERSION})


def duplicate(
    rng: Random, event: Json, raw: bytes, sessions: FuzzSessions
) -> tuple[bytes, Expected]:
    """An earlier record of the same session, sent again byte for byte (a retrying producer)."""
    return sessions.earlier(rng, event) or raw, None


def reordered(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """The event with a ``seq`` from the past or the future and a fresh id."""
    seq = event.get("seq")
    base = seq if isinstance(seq, int) else 0
    changed = dict(event, seq=max(0, base + rng.choice([-5, -2, -1, 0, 2, 50, 10**6])))
    changed["event_id"] = f"{event.get('event_id')}-r{rng.randrange(10**9)}"
    return _dump(changed), None


def tombstone(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A Kafka tombstone: no value at all."""
    return b"", frozenset({R.INVALID_JSON})


_EMPTY: tuple[tuple[bytes, RejectReason], ...] = (
    (b"{}", R.MISSING_FIELD),
    (b"null", R.NOT_AN_OBJECT),
    (b"[]", R.NOT_AN_OBJECT),
    (b'""', R.NOT_AN_OBJECT),
    (b"0", R.NOT_AN_OBJECT),
    (b"true", R.NOT_AN_OBJECT),
    (b" ", R.INVALID_JSON),
    (b"\n", R.INVALID_JSON),
    (b"\x00", R.INVALID_JSON),
    (b"{", R.INVALID_JSON),
)


def empty_value(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """An empty or trivial value: ``{}``, ``null``, ``[]``, a blank."""
    value, reason = rng.choice(_EMPTY)
    return value, frozenset({reason})


def random_bytes(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """Noise."""
    noise = rng.randbytes(rng.choice([1, 7, 100, 5000]))
    return noise, None


def bit_flips(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A valid line with a few bytes changed (it may still be valid)."""
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data), None


def nested_wrong(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A value deep inside the event (a score, a snapshot entry, a mention) of another type."""
    lists = [k for k, v in event.items() if isinstance(v, list) and v]
    if not lists:
        return _dump(dict(event, x_nested=[{"a": [None, {"b": float("-0.0")}]}])), None
    name = rng.choice(lists)
    items = list(event[name])
    at = rng.randrange(len(items))
    item = items[at]
    junk = rng.choice([None, 0, -1, 1.5, "", "x", [], {}, [[]], {"": None}, True, 2**64 - 1])
    if isinstance(item, dict) and item:
        items[at] = dict(item, **{rng.choice(sorted(item)): junk})
    else:
        items[at] = junk
    return _dump(dict(event, **{name: items})), None


def lone_surrogate(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """An escaped UTF-16 surrogate without its pair (valid JSON, not valid Unicode)."""
    escape = rng.choice([b"\\ud800", b"\\udfff", b"\\udbff\\u0041"])
    name = rng.choice(
        [b'"text":"', b'"span_id":"', b'"session_id":"', b'"tenant":"', b'"event_id":"']
    )
    at = raw.find(name)
    if at < 0:
        return raw[:-1] + b',"x_s":"' + escape + b'"}', None
    at += len(name)
    return raw[:at] + escape + raw[at:], None


def duplicate_keys(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """A key given twice with different values (JSON parsers keep one, silently)."""
    name = rng.choice(sorted(event))
    other = rng.choice([None, 0, "dup", [], {}, 7])
    return raw[:-1] + b',"' + name.encode() + b'":' + _dump(other) + b"}", None


def big_number(rng: Random, event: Json, raw: bytes, _: FuzzSessions) -> tuple[bytes, Expected]:
    """An integer field beyond 64 bits, or a float that overflows to infinity."""
    name = rng.choice(["seq", "turn"])
    literal = rng.choice([b"18446744073709551616", b"-9223372036854775809", b"1e400", b"-1e400"])
    body = _dump({k: v for k, v in event.items() if k != name})
    return body[:-1] + b',"' + name.encode() + b'":' + literal + b"}", frozenset({R.INVALID_FIELD})


MUTATIONS: dict[str, tuple[Mutation, int]] = {
    # name: (mutation, weight); the expensive ones are rare
    "truncated": (truncated, 12),
    "oversized": (oversized, 1),
    "huge_string": (huge_string, 1),
    "deep_nesting": (deep_nesting, 1),
    "huge_array": (huge_array, 1),
    "invalid_utf8": (invalid_utf8, 10),
    "non_finite": (non_finite, 8),
    "wrong_type": (wrong_type, 10),
    "loose_type": (loose_type, 10),
    "missing_field": (missing_field, 8),
    "unknown_type": (unknown_type, 6),
    "wrong_version": (wrong_version, 6),
    "duplicate": (duplicate, 8),
    "reordered": (reordered, 8),
    "tombstone": (tombstone, 4),
    "empty_value": (empty_value, 6),
    "random_bytes": (random_bytes, 4),
    "bit_flips": (bit_flips, 10),
    "nested_wrong": (nested_wrong, 8),
    "lone_surrogate": (lone_surrogate, 4),
    "duplicate_keys": (duplicate_keys, 4),
    "big_number": (big_number, 4),
}


# --------------------------------------------------------------------------- input streams


class FuzzSessions:
    """Events of simulated sessions used as material, renamed per cycle so that each
    cycle's sessions are new; remembers each session's lines for duplicates."""

    def __init__(self, seed: int, sessions: int) -> None:
        self._lines = simulate(SimConfig(sessions=sessions, seed=seed, events_per_session=40)).lines
        self._seen: dict[str, list[bytes]] = {}

    def events(self) -> Iterator[tuple[Json, bytes]]:
        """(event, raw) forever. The simulator's own malformed records come with an empty
        event: they are passed through but not mutated (a mutation of an already invalid
        record could not say which reason it must get)."""
        cycle = 0
        while True:
            self._seen.clear()  # sessions of an earlier cycle are never continued
            for line in self._lines:
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    yield {}, line
                    continue
                if not isinstance(event, dict):
                    yield {}, line
                    continue
                if isinstance(event.get("session_id"), str):
                    event["session_id"] = f"fz{cycle}-{event['session_id']}"
                raw = orjson.dumps(event)
                self._seen.setdefault(str(event.get("session_id")), []).append(raw)
                valid = not isinstance(decode(raw, MAX_EVENT_BYTES), Invalid)
                yield (event if valid else {}), raw
            cycle += 1

    def earlier(self, rng: Random, event: Json) -> bytes | None:
        """A record this session already sent, if any."""
        lines = self._seen.get(str(event.get("session_id")))
        return rng.choice(lines) if lines else None


@dataclass(frozen=True, slots=True)
class Hostile:
    """One generated hostile record."""

    index: int
    category: str
    raw: bytes
    expected: Expected


def hostile_records(seed: int, count: int, per_event: int = 6) -> Iterator[Hostile | bytes]:
    """``count`` hostile records, each after the live fuzz-session event it mutates.

    Yields :class:`Hostile` for a mutation and plain ``bytes`` for the unmutated
    events of the fuzz sessions (they give the mutations live state to hit).
    """
    rng = Random(seed)
    names = list(MUTATIONS)
    weights = [MUTATIONS[name][1] for name in names]
    sessions = FuzzSessions(seed + 1, sessions=max(20, min(400, count // (per_event * 40) + 1)))
    made = 0
    for event, raw in sessions.events():
        if made >= count:
            return
        yield raw
        if not event:
            continue
        for _ in range(min(per_event, count - made)):
            name = rng.choices(names, weights)[0]
            mutated, expected = MUTATIONS[name][0](rng, event, raw, sessions)
            yield Hostile(made, name, mutated, expected)
            made += 1


def garbage_mix(
    valid: list[bytes], share: float = 0.1, seed: int = 1, too_large: bool = True
) -> tuple[list[bytes], list[Hostile]]:
    """``valid`` with garbage interleaved so that ``share`` of the result is garbage.

    The garbage is only of the categories that must be rejected (each record becomes
    exactly one dead letter, with a reason from its ``expected`` set) and never names
    a session of ``valid``, so the valid records' outputs must equal a replay of
    ``valid`` alone. For the through-Kafka test and benchmark of a garbage mix.

    ``TOO_LARGE`` garbage is over :data:`MAX_EVENT_BYTES` (64 KiB): run the worker
    with ``max_event_bytes`` = that, or pass ``too_large=False`` to leave it out.

    Returns:
        (the mixed lines in order, the garbage records in order).
    """
    if not 0.0 <= share < 1.0:
        raise ValueError("share must be in [0, 1)")
    wanted = round(len(valid) * share / (1.0 - share))
    garbage = [
        item
        for item in hostile_records(seed, wanted * 4)
        if isinstance(item, Hostile)
        and item.expected is not None
        and (too_large or RejectReason.TOO_LARGE not in item.expected)
    ][:wanted]
    rng = Random(seed)
    slots = sorted(rng.sample(range(len(valid) + len(garbage)), len(garbage)))
    mixed: list[bytes] = []
    pending = iter(valid)
    queue = iter(garbage)
    slot_set = set(slots)
    for index in range(len(valid) + len(garbage)):
        mixed.append(next(queue).raw if index in slot_set else next(pending))
    return mixed, garbage


# --------------------------------------------------------------------------- the run


@dataclass
class FuzzReport:
    """What a run found. ``ok`` when nothing crashed, every must-reject record was
    answered as expected and the valid records' outputs equal the clean run's."""

    seed: int
    hostile: int
    fuzz_session_events: int
    valid_records: int
    valid_sessions: int
    crashes: list[dict[str, Any]] = field(default_factory=list)
    unanswered: list[dict[str, Any]] = field(default_factory=list)
    valid_mismatches: list[int] = field(default_factory=list)
    by_category: dict[str, dict[str, int]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the run found nothing wrong."""
        return not (self.crashes or self.unanswered or self.valid_mismatches)


def _engine() -> Engine:
    return Engine(EngineSettings(max_event_bytes=MAX_EVENT_BYTES))


def _outputs(engine: Engine, raw: bytes, source: Source) -> list[bytes]:
    return [encode_output(event) for event in engine.process_raw(raw, source)]


def clean_run(lines: list[bytes]) -> list[list[bytes]]:
    """The encoded outputs of each valid line, run alone."""
    engine = _engine()
    return [_outputs(engine, line, Source("valid", 0, i, RECEIVED)) for i, line in enumerate(lines)]


def run_fuzz(count: int, seed: int = 1, valid_sessions: int = 60) -> FuzzReport:
    """Run ``count`` hostile records interleaved with a valid fleet; see the module docs."""
    started = time.perf_counter()
    valid = simulate(SimConfig(sessions=valid_sessions, seed=seed * 1000 + 7)).lines
    expected_valid = clean_run(valid)
    report = FuzzReport(seed, 0, 0, len(valid), valid_sessions)
    categories: dict[str, Counter[str]] = {name: Counter() for name in MUTATIONS}
    reasons: Counter[str] = Counter()
    engine = _engine()
    mix = Random(seed ^ 0x5EED)
    hostile = hostile_records(seed, count)
    share = len(valid) / (len(valid) + count * 7 / 6)  # valid records spread over the whole run
    next_valid = 0
    fuzz_offset = 0
    while True:
        if next_valid < len(valid) and mix.random() < share:
            source = Source("valid", 0, next_valid, RECEIVED)
            try:
                got = _outputs(engine, valid[next_valid], source)
            except Exception as exc:
                report.crashes.append(_crash(-1 - next_valid, "valid", valid[next_valid], exc))
                got = []
            if got != expected_valid[next_valid]:
                report.valid_mismatches.append(next_valid)
            next_valid += 1
            continue
        item = next(hostile, None)
        if item is None:
            if next_valid >= len(valid):
                break
            share = 1.0
            continue
        raw = item.raw if isinstance(item, Hostile) else item
        source = Source("fuzz", 0, fuzz_offset, RECEIVED)
        fuzz_offset += 1
        try:
            outputs = engine.process_raw(raw, source)
            for event in outputs:
                encode_output(event)
        except Exception as exc:
            category = item.category if isinstance(item, Hostile) else "fuzz_session"
            index = item.index if isinstance(item, Hostile) else -1
            report.crashes.append(_crash(index, category, raw, exc))
            continue
        if not isinstance(item, Hostile):
            report.fuzz_session_events += 1
            continue
        report.hostile += 1
        rejected = [e for e in outputs if isinstance(e, EventRejected)]
        tally = categories[item.category]
        tally["records"] += 1
        tally["rejected" if rejected else "accepted"] += 1
        for event in rejected:
            reasons[event.reason.value] += 1
        if item.expected is not None and not (
            len(outputs) == 1
            and len(rejected) == 1
            and rejected[0].reason in item.expected
            and rejected[0].detail
            and rejected[0].raw_size == len(raw)
        ):
            report.unanswered.append(
                {
                    "index": item.index,
                    "category": item.category,
                    "expected": sorted(r.value for r in item.expected),
                    "got": [getattr(e, "reason", None) or getattr(e, "type", "?") for e in outputs],
                    "raw_head": raw[:200].decode("utf-8", "backslashreplace"),
                }
            )
    report.by_category = {name: dict(tally) for name, tally in categories.items()}
    report.reasons = dict(sorted(reasons.items()))
    report.seconds = round(time.perf_counter() - started, 1)
    return report


def _crash(index: int, category: str, raw: bytes, exc: Exception) -> dict[str, Any]:
    return {
        "index": index,
        "category": category,
        "error": f"{type(exc).__name__}: {exc}"[:500],
        "where": traceback.format_exception(exc)[-2].strip()[:500],
        "raw": raw,
    }


# --------------------------------------------------------------------------- command line


def _save(report: FuzzReport, count: int) -> Path:
    RESULTS.mkdir(exist_ok=True)
    crashes_dir = RESULTS / "fuzz-crashes"
    crash_rows = []
    for crash in report.crashes:
        raw = crash.pop("raw")
        crashes_dir.mkdir(exist_ok=True)
        path = crashes_dir / f"seed{report.seed}-{crash['category']}-{crash['index']}.bin"
        path.write_bytes(raw)
        crash_rows.append(dict(crash, input=str(path.relative_to(RESULTS.parent.parent))))
    data = asdict(report)
    data["crashes"] = crash_rows
    data["unanswered"] = report.unanswered[:50]
    data["valid_mismatches"] = report.valid_mismatches[:50]
    data["ok"] = report.ok
    data["command"] = f"python -m bench.fuzz --count {count} --seed {report.seed}"
    data["machine"] = {"python": platform.python_version(), "platform": platform.platform()}
    name = "fuzz.json" if count == 1_000_000 else f"fuzz-{count}.json"
    path = RESULTS / name
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the fuzzer, print a summary, write the results; exit 1 when it found a problem."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="hostile records")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--valid-sessions", type=int, default=100)
    args = parser.parse_args(argv)
    report = run_fuzz(args.count, args.seed, args.valid_sessions)
    path = _save(report, args.count)
    print(f"hostile records:        {report.hostile:,} (seed {report.seed})")
    print(f"fuzz-session events:    {report.fuzz_session_events:,}")
    print(f"valid records:          {report.valid_records:,} ({report.valid_sessions} sessions)")
    print(f"crashes:                {len(report.crashes)}")
    print(f"unanswered bad records: {len(report.unanswered)}")
    print(f"valid outputs changed:  {len(report.valid_mismatches)}")
    print(f"time:                   {report.seconds} s")
    for name, tally in report.by_category.items():
        print(f"  {name:<14} {tally}")
    print(f"results: {path}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
