"""The simulated fleet: sessions of several tenants, interleaved like live traffic.

:func:`simulate` draws each session's domain, length, start and pace from the
seed, hands it its injections (a share ``fault_rate`` of the sessions gets 1 to
``max_injections`` of them, in the fault mix's rotation), plays it
(:class:`~spanguard.streams.sim.session.SessionGenerator`) and merges all sessions by
event time, each in its own order. The result is the events file's lines and
the truth (:class:`~spanguard.streams.sim.truth.FleetTruth`).
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import orjson

from spanguard.streams.sim.config import LONG_SESSION_EVENTS, SimConfig
from spanguard.streams.sim.injections import LOOKALIKES, REGISTRY
from spanguard.streams.sim.plan import Record, TextRecord
from spanguard.streams.sim.session import SessionGenerator
from spanguard.streams.sim.truth import DeadLetterTruth, FleetTruth, SessionTruth
from spanguard.streams.sim.vocab import DOMAIN_WEIGHTS, DOMAINS

TENANT_NAMES = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell")
EPOCH = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
"""Sessions start within a spread after this time."""


@dataclass(slots=True)
class SimulatedFleet:
    """A generated fleet: its input lines (interleaved), its truth, and the texts
    with what the generator says they hold (for tests)."""

    lines: list[bytes]
    truth: FleetTruth
    texts: list[TextRecord]
    skipped: list[tuple[str, str]]
    """(session id, injection) that could not be placed before the session ended."""


def _assign_injections(config: SimConfig, rng: random.Random) -> list[list[str]]:
    pool = [name for name, weight in config.faults for _ in range(weight)]
    rng.shuffle(pool)
    cursor = 0
    plans: list[list[str]] = []
    for _ in range(config.sessions):
        chosen: list[str] = []
        if pool and rng.random() < config.fault_rate:
            wanted = rng.randint(1, max(1, config.max_injections))
            for _ in range(len(pool)):
                name = pool[cursor % len(pool)]
                cursor += 1
                if name not in chosen:
                    chosen.append(name)
                if len(chosen) >= wanted:
                    break
        plans.append(chosen)
    return plans


def simulate(config: SimConfig) -> SimulatedFleet:
    """Generate a fleet. Deterministic: the same config gives the same fleet."""
    if config.sessions < 0 or config.tenants < 1 or config.events_per_session < 12:
        raise ValueError("need sessions >= 0, tenants >= 1 and events per session >= 12")
    if not 0.0 <= config.fault_rate <= 1.0:
        raise ValueError("fault rate must be between 0 and 1")
    rng = random.Random(config.seed)
    tenants = [
        TENANT_NAMES[i] if i < len(TENANT_NAMES) else f"tenant-{i}" for i in range(config.tenants)
    ]
    plans = _assign_injections(config, rng)
    spread_ms = max(60_000, config.sessions * 15_000)
    generators: list[SessionGenerator] = []
    lookalikes = list(LOOKALIKES.values())
    placed = 0
    for index, injections in enumerate(plans):
        session_rng = random.Random(rng.getrandbits(64))
        domain = session_rng.choices(DOMAINS, weights=DOMAIN_WEIGHTS)[0]
        entries = [REGISTRY[name] for name in injections]
        if any(e.dense_only for e in entries) and not domain.referent_dense:
            domain = session_rng.choice([d for d in DOMAINS if d.referent_dense])
        length = max(12, round(config.events_per_session * session_rng.uniform(0.8, 1.2)))
        if config.long_every and index % config.long_every == config.long_every - 1:
            length = LONG_SESSION_EVENTS
        start = EPOCH + timedelta(milliseconds=session_rng.randint(0, spread_ms))
        # Sessions without injections take the healthy look-alikes in turn.
        alike = []
        if not injections and session_rng.random() < config.lookalike_rate:
            alike = [lookalikes[placed % len(lookalikes)]]
            placed += 1
        generator = SessionGenerator(
            session_rng,
            f"s{config.seed}-{index:05d}",
            tenants[index % len(tenants)],
            domain,
            length,
            entries,
            start,
            int((start - EPOCH).total_seconds() * 1000),
            session_rng.randint(400, 3000),
            alike,
        )
        generator.run()
        generators.append(generator)
    lines, sessions = _interleave(generators)
    digest = hashlib.sha256(b"".join(line + b"\n" for line in lines)).hexdigest()
    truth = FleetTruth(
        generator=config.describe(),
        sessions=sessions,
        events_lines=len(lines),
        events_sha256=digest,
    )
    texts = [t for g in generators for t in g.texts]
    skipped = [(g.session_id, i.name) for g in generators for i in g.pending]
    return SimulatedFleet(lines, truth, texts, skipped)


def _interleave(generators: Sequence[SessionGenerator]) -> tuple[list[bytes], list[SessionTruth]]:
    """Merge the sessions by event time, each session in its own order (a live fleet)."""

    def stream(index: int, gen: SessionGenerator) -> Iterator[tuple[int, int, int, Record]]:
        for position, record in enumerate(gen.records):
            yield record.ms, index, position, record

    merged = heapq.merge(*(stream(i, g) for i, g in enumerate(generators)))
    lines: list[bytes] = []
    located: dict[int, DeadLetterTruth] = {}
    for line_no, (_, _, _, record) in enumerate(merged):
        data = record.data
        lines.append(data if isinstance(data, bytes) else orjson.dumps(data))
        if record.deadletter is not None:
            located[id(record.deadletter)] = replace(record.deadletter, line=line_no)
    sessions = []
    for gen in generators:
        gen.truth.deadletters = [located.get(id(d), d) for d in gen.truth.deadletters]
        sessions.append(gen.truth)
    return lines, sessions


def truth_path_for(out: str) -> str:
    """``sim.jsonl`` -> ``sim.truth.json`` (beside the events file)."""
    base = out[: -len(".jsonl")] if out.endswith(".jsonl") else out
    return f"{base}.truth.json"
