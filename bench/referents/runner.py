"""Running corpora through the engine and collecting the figures."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from bench.referents.drive import SETTINGS_TOML, new_engine, run_dialogue
from bench.referents.measure import Tally, count_session
from bench.referents.model import Dialogue


def run_policy(
    dialogues: Iterable[Dialogue],
    policy: str,
    *,
    tenant: str = "sgd",
    wrong_mentions: frozenset[str] = frozenset(),
    trace: IO[bytes] | None = None,
    decisions: list[dict[str, Any]] | None = None,
) -> Tally:
    """Every dialogue as one session of a fresh engine under ``policy``; the summed
    figures. ``trace`` receives the input lines (JSONL, as ``spanguard replay``
    reads them), ``decisions`` every ``eviction.decided`` and ``span.pinned``."""
    engine = new_engine()
    tally = Tally()
    keep = trace is not None or decisions is not None
    for dialogue in dialogues:
        run = run_dialogue(engine, dialogue, policy, tenant=tenant, keep_lines=keep)
        if trace is not None:
            for line in run.lines:
                trace.write(line + b"\n")
        if decisions is not None:
            decisions.extend(run.decisions)
        tally.add(count_session(run, wrong_mentions))
    return tally


def write_settings(directory: Path) -> Path:
    """``spanguard.toml`` for ``spanguard replay --config`` with the benchmark's
    engine settings (keys in clear, surfaces in pins); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spanguard.toml"
    path.write_text(SETTINGS_TOML, encoding="utf-8")
    return path


def comparable(outputs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``eviction.decided`` and ``span.pinned`` events of ``outputs`` (JSON
    data) without their ``ts``: what an in-process run and a replay of its trace
    must agree on."""
    return [
        {k: v for k, v in event.items() if k != "ts"}
        for event in outputs
        if event.get("type") in ("eviction.decided", "span.pinned")
    ]
