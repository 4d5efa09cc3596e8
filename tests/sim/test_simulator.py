"""``spanguard.streams.sim``: determinism, well-formed traces, texts that say what
they hold, and the generator's own referent truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from spanguard.schemas import INPUT_ADAPTER, FaultKind
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referents import extract
from spanguard.streams.sim import (
    INJECTIONS,
    REGISTRY,
    FleetTruth,
    SimConfig,
    SimulatedFleet,
    parse_fault_mix,
    simulate,
    truth_path_for,
)
from spanguard.streams.sim.injections import LOOKALIKES
from spanguard.streams.sim.texts import Entity, compose

ROOT = Path(__file__).resolve().parents[2]
CONFIG = SimConfig(sessions=30, seed=7, fault_rate=0.6)


@pytest.fixture(scope="module")
def fleet() -> SimulatedFleet:
    return simulate(CONFIG)


def test_same_seed_same_bytes_other_seed_other_bytes(fleet: SimulatedFleet) -> None:
    again = simulate(CONFIG)
    assert again.lines == fleet.lines
    assert again.truth.to_json() == fleet.truth.to_json()
    other = simulate(SimConfig(sessions=30, seed=8, fault_rate=0.6))
    assert other.lines != fleet.lines
    assert other.truth.to_json() != fleet.truth.to_json()


def test_bytes_do_not_depend_on_the_process_hash_seed(tmp_path: Path) -> None:
    # Set iteration order changes with PYTHONHASHSEED; the output must not.
    code = (
        "import sys; from spanguard.streams.sim import simulate, SimConfig; "
        "f = simulate(SimConfig(sessions=12, seed=3, fault_rate=0.8)); "
        "sys.stdout.buffer.write(b''.join(l + b'\\n' for l in f.lines) + f.truth.to_json())"
    )
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, check=True
        )
        runs.append(done.stdout)
    assert runs[0] == runs[1]
    assert len(runs[0]) > 10_000


def test_every_injection_is_placed_and_recorded(fleet: SimulatedFleet) -> None:
    assert fleet.skipped == []
    truth = fleet.truth
    placed = {name for s in truth.sessions for name in s.injections}
    assert placed == set(INJECTIONS)
    kinds = {f.kind for s in truth.sessions for f in s.faults}
    assert kinds == {k.value for k in FaultKind} - {"OUT_OF_ORDER"}
    healthy = [s for s in truth.sessions if s.healthy]
    assert 5 <= len(healthy) <= 20
    assert all(not s.injections for s in healthy)
    for session in truth.sessions:
        for fault in session.faults:
            assert fault.session_id == session.session_id and fault.tenant == session.tenant
            assert fault.at_event_id.startswith(session.session_id + "-e")
    assert len({s.tenant for s in truth.sessions}) == 3


def _identity(line: bytes) -> dict[str, object] | None:
    try:
        # The standard library reads a NaN score (a NON_FINITE_SCORE record has a seq).
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def test_seq_is_contiguous_per_session_except_injected_gaps(fleet: SimulatedFleet) -> None:
    gaps = {
        f.at_event_id for s in fleet.truth.sessions for f in s.faults if f.kind == "SEQUENCE_GAP"
    }
    assert gaps
    last: dict[str, int] = {}
    seen_gaps = set()
    first: dict[str, bytes] = {}
    for line in fleet.lines:
        data = _identity(line)
        if data is None:
            continue  # broken JSON has no seq
        session, seq, event_id = str(data["session_id"]), int(data["seq"]), str(data["event_id"])  # type: ignore[call-overload]
        if event_id in first:
            assert line == first[event_id]  # a re-delivery: the same bytes, seq not moved
            continue
        first[event_id] = line
        if session in last:
            if event_id in gaps:
                assert seq > last[session] + 1
                seen_gaps.add(event_id)
            else:
                assert seq == last[session] + 1, (session, event_id)
        else:
            assert seq == 0
        last[session] = seq
    assert seen_gaps == gaps


def test_every_line_but_the_malformed_ones_validates(fleet: SimulatedFleet) -> None:
    truth = fleet.truth
    malformed = {d.line: d.reason for s in truth.sessions for d in s.deadletters}
    assert malformed and all(line >= 0 for line in malformed)
    assert truth.events_lines == len(fleet.lines)
    for number, line in enumerate(fleet.lines):
        reason = malformed.get(number)
        if reason is None:
            INPUT_ADAPTER.validate_json(line)
        elif reason in ("SPAN_EXISTS", "SESSION_CLOSED"):
            INPUT_ADAPTER.validate_json(line)  # well-formed; wrong only for its session's state
        else:
            with pytest.raises((ValidationError, ValueError)):
                INPUT_ADAPTER.validate_json(line)


def test_sessions_are_interleaved_but_each_in_order(fleet: SimulatedFleet) -> None:
    firsts = _first_deliveries(fleet.lines)
    order = [str(d["session_id"]) for d in firsts]
    switches = sum(1 for a, b in pairwise(order) if a != b)
    assert switches > len(fleet.truth.sessions) * 5
    per_session: dict[str, list[int]] = defaultdict(list)
    for data in firsts:
        per_session[str(data["session_id"])].append(int(data["seq"]))  # type: ignore[call-overload]
    assert all(seqs == sorted(seqs) for seqs in per_session.values())


def _first_deliveries(lines: list[bytes]) -> list[dict[str, object]]:
    """The readable events, each at its first delivery (re-deliveries left out)."""
    seen: set[str] = set()
    found = []
    for line in lines:
        data = _identity(line)
        if data is not None and str(data["event_id"]) not in seen:
            seen.add(str(data["event_id"]))
            found.append(data)
    return found


def test_texts_hold_exactly_what_the_generator_says(fleet: SimulatedFleet) -> None:
    """The truth rests on the generator knowing each text's referents: the
    contract's extractor, run once per text in each session's order with the
    session's name book (contract 1.2), must find exactly those identifiers and
    names, nothing more (no false positives to make healthy sessions noisy)."""
    assert len(fleet.texts) > 500
    anaphors = names = 0
    books: dict[str, NameBook] = defaultdict(NameBook)
    for record in fleet.texts:
        found = extract(record.text, record.known, books[record.session_id])
        held = {(i.key, i.type) for i in found.identifiers} | {(n.key, n.type) for n in found.names}
        assert held == set(record.holds), record
        assert [a.type for a in found.anaphors] == list(record.anaphors), record
        anaphors += len(record.anaphors)
        names += len(found.names)
    assert anaphors > 100
    assert names > 100


def test_compose_records_only_anaphors_of_known_types() -> None:
    account = Entity("account", "8841-C", "id")
    text = compose("Did <a0:that> clear KYC? It is <e0>.", (account,), {"order"})
    assert text.text == "Did that account clear KYC? It is account 8841-C."
    assert text.anaphors == () and text.holds == (("8841-c", "account"),)
    known = compose("Did <a0:that> clear KYC?", (account,), {"account"})
    assert known.anaphors == ("account",)
    # The same text introducing the type first: it refers inside itself.
    inside = compose("<e0> is new; did <a0:that> clear?", (account,), {"account"})
    assert inside.anaphors == ()


def test_fault_mix_parsing() -> None:
    assert parse_fault_mix("all") == tuple((n, 1) for n in INJECTIONS)
    assert parse_fault_mix("stale_score=3, UNGATED_EVICTION") == (
        ("STALE_SCORE", 3),
        ("UNGATED_EVICTION", 1),
    )
    assert parse_fault_mix("STALE_SCORE=0,MALFORMED") == (("MALFORMED", 1),)
    with pytest.raises(ValueError, match="unknown fault"):
        parse_fault_mix("NOT_A_FAULT")
    with pytest.raises(ValueError, match="integer"):
        parse_fault_mix("STALE_SCORE=x")


def test_fault_mix_and_rate_are_obeyed() -> None:
    only = simulate(SimConfig(sessions=20, seed=2, fault_rate=1.0, faults=(("STALE_SCORE", 1),)))
    kinds = {f.kind for s in only.truth.sessions for f in s.faults}
    assert kinds == {"STALE_SCORE"}
    assert all(s.injections == ["STALE_SCORE"] for s in only.truth.sessions)
    none = simulate(SimConfig(sessions=20, seed=2, fault_rate=0.0))
    assert all(s.healthy for s in none.truth.sessions)


def test_truth_file_round_trips(fleet: SimulatedFleet, tmp_path: Path) -> None:
    path = tmp_path / "sim.truth.json"
    path.write_bytes(fleet.truth.to_json())
    loaded = FleetTruth.load(path)
    assert loaded.to_json() == fleet.truth.to_json()
    data = orjson.loads(path.read_bytes())
    assert data["format"] == "spanguard-sim-truth" and data["version"] == 1
    session = data["sessions"][0]
    assert {"session_id", "tenant", "healthy", "faults", "deadletters", "evictions"} <= set(session)
    with pytest.raises(ValueError):
        FleetTruth.from_json(b'{"format": "other"}')
    assert truth_path_for("runs/sim.jsonl") == "runs/sim.truth.json"
    assert truth_path_for("trace") == "trace.truth.json"


def test_eviction_truth_counts_spans_a_naive_pruner_would_have_destroyed(
    fleet: SimulatedFleet,
) -> None:
    requests = [e for s in fleet.truth.sessions for e in s.evictions]
    assert {e.mode for e in requests} == {"threshold", "keep_top_k", "candidates"}
    assert {e.basis for e in requests} == {"score", "recency"}
    needed = [e for e in requests if e.needed]
    assert len(needed) > 12
    for request in requests:
        assert set(request.needed) <= set(request.requested)
        assert not set(request.needed) & set(request.expected_committed)


def test_each_injection_raises_exactly_its_registered_fault_kinds() -> None:
    fleet = simulate(SimConfig(sessions=40, seed=5, fault_rate=1.0, max_injections=1))
    seen: set[str] = set()
    for session in fleet.truth.sessions:
        for name in session.injections:
            seen.add(name)
            expected = {k.value for k in REGISTRY[name].faults}
            assert {f.kind for f in session.faults} == expected, session.session_id
            assert all(f.injection == name for f in session.faults)
            assert bool(session.deadletters) == (name == "MALFORMED")
    assert seen == set(INJECTIONS)


def test_the_docs_list_every_registered_injection_with_its_faults() -> None:
    text = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8")
    section = text.split("## Injected faults", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[3]
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert set(rows) == set(INJECTIONS)
    for name, entry in REGISTRY.items():
        assert all(f"`{kind.value}`" in rows[name] for kind in entry.faults), name


def test_the_docs_list_every_lookalike_with_the_kind_it_resembles() -> None:
    text = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8")
    section = text.split("## Healthy look-alikes", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[2]
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert set(rows) == set(LOOKALIKES)
    for name, entry in LOOKALIKES.items():
        assert f"`{entry.resembles.value}`" in rows[name], name
