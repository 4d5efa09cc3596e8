"""The SDK examples run (offline here; against `make demo`'s broker by hand, see docs/sdk.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "name", ["sdk_langchain.py", "sdk_langgraph.py", "sdk_openai.py", "sdk_deepagents.py"]
)
def test_example_runs_and_keeps_the_referred_account(name: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--offline"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "applied=True" in result.stdout
    assert "My account 8841-C was charged twice" in result.stdout
    assert "PINNED" in result.stdout or "kept=['" in result.stdout
