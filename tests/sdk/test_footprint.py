"""``import spanguard.streams.sdk`` loads none of the worker extra (Faust, ``mode``, ``rocksdict``,
prometheus-client, aiohttp), nor a framework."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = [
    "faust",
    "mode",
    "rocksdict",
    "prometheus_client",
    "aiohttp",
    "langchain",
    "langgraph",
    "agents",
    "openai",
]


def _loaded_after(statement: str) -> list[str]:
    probe = (
        f"{statement}\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return list(json.loads(result.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "statement",
    [
        "import spanguard.streams.sdk",
        "from spanguard.streams.sdk import SpanguardClient, SyncSpanguardClient, gate_compaction",
        "import spanguard.streams.sdk.adapters.openai_chat",
    ],
)
def test_sdk_imports_no_faust_and_no_framework(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_the_probe_sees_a_heavy_import() -> None:
    # The check above can fail: importing the worker's topology does load Faust.
    assert "faust" in _loaded_after("import spanguard.streams.app.topology")
