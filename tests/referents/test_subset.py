"""The benchmark on the SGD subset in ``tests/data/sgd`` and on generated agent runs:
floors on its figures, and a replay of a written trace that gives the same
decisions and pins as the in-process run.

The floors are a little below what the extractor measured when they were set
(commit noted beside each); raise them when the extractor improves.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import orjson
from typer.testing import CliRunner

from bench.referents import agent_traces, sgd
from bench.referents.measure import Tally
from bench.referents.model import Dialogue
from bench.referents.runner import comparable, run_policy, write_settings
from spanguard.streams.cli.main import app

# -- floors (measured on the subset with the extractor of contract 1.2, issue 29) -----
SGD_FLOORS: dict[str, dict[str, float]] = {
    # measured: venue+event 0.85 (11/13), all names 0.75 (18/24), precision 0.87 (20/23)
    "threshold": {"venue_event": 0.80, "names": 0.70, "precision": 0.80},
    # measured: venue+event 0.86 (18/21), all names 0.73 (32/44), precision 0.85 (41/48)
    "keep_top_k": {"venue_event": 0.80, "names": 0.68, "precision": 0.80},
}
SGD_MIN_NAME_CASES = 20
"""At least this many name cases per policy (measured 24 and 44): the floors mean something."""
AGENT_SESSIONS = 40
AGENT_SEED = 7
AGENT_FLOORS: dict[str, float] = {
    # identifiers, phones and JSON values; measured 1.00 (29/29) and 1.00 (112/112)
    "threshold": 0.95,
    "keep_top_k": 0.95,
}
AGENT_MAX_PRICE_PINS = 0
"""Pins whose mention is a price or a rating (the target: none)."""
# -----------------------------------------------------------------------------------

SUBSET = Path(__file__).resolve().parents[1] / "data" / "sgd"
POLICIES = ("threshold", "keep_top_k")


@cache
def subset() -> tuple[Dialogue, ...]:
    return tuple(sgd.load(SUBSET))


@cache
def agents() -> tuple[Dialogue, ...]:
    return tuple(agent_traces.generate(AGENT_SESSIONS, AGENT_SEED))


@cache
def sgd_tally(policy: str) -> Tally:
    return run_policy(subset(), policy)


@cache
def agent_tally(policy: str) -> Tally:
    return run_policy(
        agents(), policy, tenant="agent", wrong_mentions=frozenset(agent_traces.NOT_IDENTIFIERS)
    )


def test_the_subset_is_the_documented_one() -> None:
    dialogues = subset()
    assert len(dialogues) == 37
    assert sum(len(d.turns) for d in dialogues) == 776
    assert (SUBSET / "LICENSE.txt").read_text().startswith("Attribution-ShareAlike 4.0")


def test_sgd_recall_and_precision_stay_above_their_floors() -> None:
    for policy in POLICIES:
        tally = sgd_tally(policy)
        floors = SGD_FLOORS[policy]
        venue_event = tally.group(sgd.VENUE_EVENT)
        names = tally.group(sgd.NAME_CLASSES)
        assert names.cases >= SGD_MIN_NAME_CASES, policy
        assert (venue_event.recall or 0) >= floors["venue_event"], (policy, venue_event)
        assert (names.recall or 0) >= floors["names"], (policy, names)
        assert (tally.precision or 0) >= floors["precision"], (policy, tally.pins_by_verdict)
        # every name kept was kept by a pin: nothing else refuses on honest traffic
        assert names.pinned == names.kept, policy


def test_honest_traffic_raises_no_fault_and_no_rejection() -> None:
    for policy in POLICIES:
        for tally in (sgd_tally(policy), agent_tally(policy)):
            assert not tally.faults, (policy, tally.faults)
            assert not tally.rejected, (policy, tally.rejected)
            assert tally.requests > 0


def test_agent_identifier_recall_and_prices_not_taken_for_identifiers() -> None:
    for policy in POLICIES:
        tally = agent_tally(policy)
        ids = tally.group(agent_traces.ID_CLASSES)
        assert ids.cases >= 20, policy
        assert (ids.recall or 0) >= AGENT_FLOORS[policy], (policy, ids)
        on_values = tally.pins_by_mention_class["amount"] + tally.pins_by_mention_class["rating"]
        assert on_values <= AGENT_MAX_PRICE_PINS, (policy, tally.pins_by_mention_class)


def test_replay_of_a_written_trace_gives_the_in_process_decisions(tmp_path: Path) -> None:
    config = write_settings(tmp_path)
    for name, dialogues, policy in (
        ("sgd", subset()[:12], "threshold"),
        ("sgd", subset()[:12], "keep_top_k"),
        ("agent", agents()[:6], "keep_top_k"),
    ):
        trace = tmp_path / f"{name}-{policy}.jsonl"
        in_process: list[dict[str, object]] = []
        with trace.open("wb") as sink:
            tally = run_policy(dialogues, policy, tenant=name, trace=sink, decisions=in_process)
        assert tally.pins > 0, (name, policy)  # the comparison covers pins too
        out = tmp_path / f"{name}-{policy}.out.jsonl"
        result = CliRunner().invoke(
            app, ["replay", str(trace), "--out", str(out), "--config", str(config), "--quiet"]
        )
        assert result.exit_code == 0, result.output
        replayed = comparable(orjson.loads(line) for line in out.read_bytes().splitlines())
        expected = comparable(in_process)
        assert len(expected) == tally.requests + tally.pins
        assert replayed == expected, (name, policy)
