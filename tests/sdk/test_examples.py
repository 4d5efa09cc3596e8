"""The SDK examples run (offline here; against `make demo`'s broker by hand, see docs/sdk.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = [
    "sdk_langchain.py",
    "sdk_langgraph.py",
    "sdk_openai.py",
    "sdk_deepagents.py",
    "sdk_adk.py",
    "sdk_agent_framework.py",
    "sdk_pydantic_ai.py",
]
# openhands-sdk installs on Python 3.12 or newer only: its example runs in a 3.12
# environment (scripts/ci_openhands.sh), not in the repository's 3.11 one.
NAMES_312 = ["sdk_openhands.py"]


@pytest.mark.parametrize("name", NAMES + (NAMES_312 if sys.version_info >= (3, 12) else []))
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
