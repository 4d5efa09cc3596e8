"""The engine against the independent reference model, event by event.

Every input line must cause the same semantic outcomes in both: fault kinds with
the spans they name, pins, recompute requests, decisions (action, committed,
refused with reasons, dropped) and rejection reasons. Where the contract leaves a
choice, the reference follows docs/contract-notes.md ("Readings found by the
differential test").
"""

import random
from collections.abc import Sequence

import pytest

from spanguard.schemas import ContextCompacted, EvictionDecided, IntegrityFault, OutputEvent
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.reference.compare import Producer, first_divergence, shrink
from spanguard.streams.reference.model import ReferenceModel
from spanguard.streams.reference.outcome import Rejected
from spanguard.streams.reference.sessions import (
    SessionWriter,
    interleave,
    named_rewrite,
    random_session,
)
from spanguard.streams.sim import SimConfig, simulate

RANDOM_SESSIONS = 1500
"""Random sessions per CI run (about 60,000 events; a few seconds each way)."""


class EngineFeed:
    """``Engine.process_raw`` as a (index, line) -> outputs callable."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __call__(self, index: int, line: bytes) -> Sequence[OutputEvent]:
        return self.engine.process_raw(line, Source("differential", 0, index))


def _engine(settings: EngineSettings | None = None) -> EngineFeed:
    return EngineFeed(Engine(settings))


def _report(seed: int, lines: list[bytes]) -> str:
    """The shortest trace that still diverges, with the difference (a failure message)."""
    small = shrink(lines, _engine)
    divergence = first_divergence(small, _engine())
    assert divergence is not None
    trace = "\n".join(line.decode(errors="replace") for line in small)
    return f"seed {seed}, minimal trace:\n{trace}\n{divergence.describe()}"


@pytest.mark.parametrize("block", range(5))
def test_engine_agrees_with_the_reference_on_random_sessions(block: int) -> None:
    per_block = RANDOM_SESSIONS // 5
    failures: list[tuple[int, list[bytes]]] = []
    for seed in range(block * per_block, (block + 1) * per_block):
        lines = random_session(random.Random(seed), f"s{seed}", 40)
        if first_divergence(lines, _engine()) is not None:
            failures.append((seed, lines))
    assert failures == [], "\n\n".join(_report(seed, lines) for seed, lines in failures[:3])


def test_sessions_of_one_id_in_several_tenants_stay_apart() -> None:
    # The same session id under three tenants, interleaved in one stream: state is
    # keyed by (tenant, session) and nothing may cross.
    failures: list[tuple[int, list[bytes]]] = []
    for seed in range(100):
        rng = random.Random(seed)
        sessions = [
            random_session(random.Random(seed * 3 + i), "shared", 40, tenant)
            for i, tenant in enumerate(("acme", "globex", "initech"))
        ]
        lines = interleave(rng, sessions)
        if first_divergence(lines, _engine()) is not None:
            failures.append((seed, lines))
    assert failures == [], "\n\n".join(_report(seed, lines) for seed, lines in failures[:3])


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_engine_agrees_with_the_reference_on_simulated_fleets(seed: int) -> None:
    # Every injection, many per session: all the fault kinds the simulator can make.
    fleet = simulate(SimConfig(sessions=25, seed=seed, fault_rate=1.0, max_injections=4))
    divergence = first_divergence(fleet.lines, _engine())
    assert divergence is None, divergence.describe()


def test_long_sessions_agree() -> None:
    failures: list[tuple[int, list[bytes]]] = []
    for seed in range(9000, 9020):
        lines = random_session(random.Random(seed), f"long{seed}", 300)
        if first_divergence(lines, _engine()) is not None:
            failures.append((seed, lines))
    assert failures == [], "\n\n".join(_report(seed, lines) for seed, lines in failures[:3])


@pytest.mark.parametrize(
    "settings",
    [
        EngineSettings(rewrite_of_rewrite_at=5),
        EngineSettings(poisoned="flag"),
        EngineSettings(drift_tolerance=10.0),
        EngineSettings(protect_lineage=True),
        EngineSettings(thrash_after=4),
        EngineSettings(thrash_within_turns=5),
        EngineSettings(lost_keys_kept=0.2),
        EngineSettings(lost_keys_min=4),
    ],
    ids=[
        "late-rewrite-of-rewrite",
        "poison-flag",
        "no-drift",
        "lineage",
        "late-thrashing",
        "slow-thrashing",
        "lax-lost-keys",
        "more-lost-keys",
    ],
)
def test_the_comparison_notices_an_engine_off_the_contract(settings: EngineSettings) -> None:
    # The reference runs the contract's defaults: an engine configured otherwise must
    # be caught somewhere in the same sessions, or the comparison proves nothing.
    caught = any(
        first_divergence(random_session(random.Random(seed), f"s{seed}", 40), _engine(settings))
        is not None
        for seed in range(300)
    )
    assert caught


def test_a_divergence_shrinks_to_a_short_trace_that_still_diverges() -> None:
    def off_contract() -> EngineFeed:
        return _engine(EngineSettings(rewrite_of_rewrite_at=5))

    lines = next(
        lines
        for lines in (random_session(random.Random(seed), f"s{seed}", 40) for seed in range(300))
        if first_divergence(lines, off_contract()) is not None
    )
    small = shrink(lines, off_contract)
    assert len(small) < len(lines)
    assert first_divergence(small, off_contract()) is not None
    assert all(line in lines for line in small)


def test_rare_inputs_agree() -> None:
    # Inputs too costly for every random session: a record over 1 MiB, re-deliveries
    # after a close (at or below its seq: ignored; above it: SESSION_CLOSED).
    rng = random.Random(5)
    lines = [
        line for line in random_session(rng, "rare", 30, "acme") if b"session.closed" not in line
    ]
    big = lines[0].replace(b'"tokens"', b'"padding": "' + b"x" * (1 << 20) + b'", "tokens"')
    closing = SessionWriter("rare", "acme", ids="closing")
    closing.seq = 1000
    closing.event("session.closed")
    late = SessionWriter("rare", "acme", ids="late")
    late.seq = 1001
    late.add("late", "after the close", 0)
    trace = [*lines, big, *closing.lines, lines[3], lines[-1], *late.lines]
    divergence = first_divergence(trace, _engine())
    assert divergence is None, divergence.describe()
    model = ReferenceModel()
    outcomes = [model.process(line) for line in trace]
    assert outcomes[len(lines)] == [Rejected("TOO_LARGE")]
    assert outcomes[-3:] == [[], [], [Rejected("SESSION_CLOSED")]]


def test_past_the_duplicate_window_an_event_id_is_new() -> None:
    # A small window, on both sides, so that re-deliveries fall in and out of it.
    window = 4
    failures = []
    reached = 0  # traces where the small window changes what the contract requires
    for seed in range(200):
        lines = random_session(random.Random(seed), f"s{seed}", 40)
        rng = random.Random(seed)
        replayed = list(lines)
        for _ in range(8):
            at = rng.randrange(len(replayed))
            replayed.insert(at + rng.randint(1, 10), replayed[at])
        engine = _engine(EngineSettings(dedup_window=window))
        divergence = first_divergence(replayed, engine, ReferenceModel(dedup_window=window))
        if divergence is not None:
            failures.append(f"seed {seed}, {divergence.describe()}")
        small, large = ReferenceModel(dedup_window=window), ReferenceModel()
        reached += any(small.process(line) != large.process(line) for line in replayed)
    assert failures == [], "\n\n".join(failures[:3])
    assert reached > 0


@pytest.mark.parametrize("summary_first", [True, False])
def test_a_rewrite_teaches_the_name_book_in_snapshot_order(summary_first: bool) -> None:
    # The engine extracts a rewrite's modified and created entries in snapshot order,
    # as the contract says: a created summary before a modified span that shortens the
    # name it introduces ("the Warkworth") is pinned for it, after it is not.
    lines = named_rewrite(summary_first).lines
    divergence = first_divergence(lines, _engine())
    assert divergence is None, divergence.describe()


def test_names_and_rewrites_in_snapshot_order_agree() -> None:
    # Random sessions whose texts carry names (cased, lower case, shortened), phones,
    # codes and JSON values, with summaries created before modified spans: the engine
    # extracts a rewrite's texts in snapshot order, like the reference.
    named = 0
    failures: list[tuple[int, list[bytes]]] = []
    for seed in range(20000, 20200):
        lines = random_session(random.Random(seed), f"n{seed}", 60)
        named += sum(b"Warkworth" in line or b"warkworth" in line for line in lines)
        if first_divergence(lines, _engine()) is not None:
            failures.append((seed, lines))
    assert named > 100
    assert failures == [], "\n\n".join(_report(seed, lines) for seed, lines in failures[:3])


def _tampered(change: str) -> Producer:
    """The engine, with one thing of contract 1.2 wrong in its outputs."""
    feed = _engine()

    def produce(index: int, line: bytes) -> Sequence[OutputEvent]:
        outputs = list(feed(index, line))
        for at, output in enumerate(outputs):
            if change == "tokens" and isinstance(output, ContextCompacted):
                outputs[at] = output.model_copy(update={"tokens_after": output.tokens_after + 1})
            elif change == "faults" and isinstance(output, ContextCompacted):
                outputs[at] = output.model_copy(update={"faults": output.faults[1:]})
            elif change == "order" and isinstance(output, ContextCompacted) and at:
                outputs.insert(0, outputs.pop(at))
            elif change == "held_by" and isinstance(output, EvictionDecided):
                refused = [r.model_copy(update={"held_by": None}) for r in output.refused]
                outputs[at] = output.model_copy(update={"refused": refused})
            elif (
                change == "split"
                and isinstance(output, IntegrityFault)
                and output.kind.value == "TOOL_PAIR_SPLIT"
            ):
                evidence = {**output.evidence, "tool_call_id": "another"}
                outputs[at] = output.model_copy(update={"evidence": evidence})
        return outputs

    return produce


@pytest.mark.parametrize("change", ["tokens", "faults", "order", "held_by", "split"])
def test_the_comparison_notices_a_wrong_compaction_record_or_pair_refusal(change: str) -> None:
    caught = any(
        first_divergence(random_session(random.Random(seed), f"s{seed}", 40), _tampered(change))
        is not None
        for seed in range(300)
    )
    assert caught
