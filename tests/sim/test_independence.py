"""The simulator's truth does not come from the engine: no module of ``spanguard.streams.sim``
imports the engine, but the configuration reading the engine's default settings
(which the truth file records) and the trace builder (``engine.trace``: it writes
events as a harness does, the one event builder of the project, and imports nothing of
the engine)."""

import ast
import subprocess
import sys
from pathlib import Path

import spanguard.streams.engine
import spanguard.streams.sim
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.reference import gate, model, rewrite, state
from spanguard.streams.sim import SimConfig, simulate
from spanguard.streams.sim.config import engine_assumptions

PACKAGE = Path(spanguard.streams.sim.__file__).parent
TRACE = "spanguard.streams.engine.trace"
ALLOWED = {("config.py", "spanguard.streams.engine.config")}


def _engine_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module is not None, path.name
            names = [node.module]
        found.update(
            n
            for n in names
            if n == "spanguard.streams.engine" or n.startswith("spanguard.streams.engine.")
        )
    return found


def test_no_module_of_the_simulator_imports_the_engine() -> None:
    offending = {
        (path.name, module)
        for path in sorted(PACKAGE.glob("*.py"))
        for module in _engine_imports(path)
        if module != TRACE
    }
    assert offending <= ALLOWED, offending - ALLOWED
    assert ("config.py", "spanguard.streams.engine.config") in offending


def test_the_trace_builder_the_simulator_writes_with_knows_nothing_of_the_engine() -> None:
    trace = Path(spanguard.streams.engine.__file__).parent / "trace.py"
    assert _engine_imports(trace) == set()


def test_the_truth_assumes_the_engine_defaults() -> None:
    defaults = EngineSettings()
    assumed = engine_assumptions()
    assert assumed == {name: getattr(defaults, name) for name in assumed}
    assert {"drift_tolerance", "poisoned_at", "stall_after", "poisoned"} <= set(assumed)
    truth = simulate(SimConfig(sessions=1, seed=1)).truth
    assert truth.generator["engine_assumptions"] == assumed


def test_the_reference_reads_the_contract_defaults_as_the_engine_does() -> None:
    # The truth is planned on the reference model with the contract's defaults; the
    # engine's defaults must be the same numbers or the two measure different things.
    defaults = EngineSettings()
    assert defaults.drift_tolerance == model.DRIFT_TOLERANCE
    assert defaults.rewrite_of_rewrite_at == state.REWRITE_OF_REWRITE_AT
    assert defaults.poisoned_at == state.POISONED_AT
    assert defaults.dedup_window == state.DEDUP_WINDOW
    assert defaults.stall_after == gate.STALL_AFTER
    assert defaults.balloon_ratio == rewrite.BALLOON_RATIO
    assert defaults.min_summary_tokens == rewrite.MIN_SUMMARY_TOKENS
    assert defaults.empty_summary_parent_factor == rewrite.EMPTY_PARENT_FACTOR
    assert defaults.lost_keys_min == rewrite.LOST_KEYS_MIN
    assert defaults.lost_keys_kept == rewrite.LOST_KEYS_KEPT
    assert defaults.thrash_after == rewrite.THRASH_AFTER
    assert defaults.thrash_within_turns == rewrite.THRASH_WITHIN_TURNS
    assert defaults.thrash_min_reduction == rewrite.THRASH_MIN_REDUCTION
    assert defaults.poisoned == "drop" and defaults.protect_lineage is False


def test_the_text_generator_imports_nothing_of_the_simulator_or_the_engine() -> None:
    # bench/ and the scenarios import it on its own: no side effect, no heavy import.
    code = (
        "import sys, spanguard.streams.sim.texts, spanguard.streams.sim.vocab; "
        "print(sorted(m for m in sys.modules if m.startswith('spanguard.streams')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert (
        done.stdout.strip()
        == "['spanguard.streams', 'spanguard.streams.sim', 'spanguard.streams.sim.texts',"
        " 'spanguard.streams.sim.vocab']"
    )
