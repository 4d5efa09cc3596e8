"""``pip install spanguard`` alone, as an agent service installs it: the wheel of this
tree in a fresh venv with its base dependencies only (from PyPI, through pip's cache).

It has no Faust (nor the rest of the ``worker`` extra), yet the OpenAI-style adapter
guards a compaction offline and ``spanguard replay`` runs; ``spanguard worker`` says
which extra to install. And the import names cannot collide: the same adapter runs
from an agent project that has its own ``schemas.py`` and ``streams/`` package at its
root (both raise on import), with this venv's interpreter and with the repository's
editable install.

Slow (a wheel build and a venv install, a minute or two), and part of the default
test command on purpose: it is the only test of what a user's ``pip install`` gets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORKER_DISTRIBUTIONS = {"faust-streaming", "mode-streaming", "prometheus-client", "aiohttp"}
"""What ``spanguard[worker]`` adds; none of it may come with the base install."""
USER_MODULE = 'raise ImportError("user module: not spanguard\'s")\n'

ADAPTER_OFFLINE = """
import asyncio, json, sys

from spanguard.streams.sdk import SpanguardClient
from spanguard.streams.sdk.adapters.openai_chat import ChatGuard

TURNS = [
    "Hi! I need help with a billing problem.",
    "My account 8841-C was charged twice for the same order.",
    "Unrelated: what is a good name for a cat? " * 6,
    "And how warm will it be tomorrow? " * 6,
    "Thanks. Please close that account today.",
]


async def main() -> None:
    client = SpanguardClient.offline()
    session = client.session("light-install", tenant="acme")
    guard = ChatGuard(session)
    messages = [{"role": "system", "content": "You are helpful."}]
    for text in TURNS:
        messages.append({"role": "user", "content": text})
        await guard.observe(messages)
        messages.append({"role": "assistant", "content": "Noted."})
    compacted = [messages[0], {"role": "user", "content": "Summary: cats."}, *messages[-2:]]
    result, outcome = await guard.compact(messages, compacted)
    await session.close()
    await client.close()
    import spanguard
    print(json.dumps({
        "applied": outcome.applied,
        "refused": sorted(set(outcome.refused.values())),
        "contents": [m["content"] for m in result],
        "spanguard": spanguard.__file__,
        "loaded": sorted({m.split(".")[0] for m in sys.modules} & {"faust", "mode", "aiohttp"}),
    }))


asyncio.run(main())
"""
"""An agent service's code: the chat adapter guards a summary that drops the account the
last turn refers to ("that account"), offline (the engine in process)."""


def _env() -> dict[str, str]:
    """The environment without what would lead an interpreter to the repository."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run(
    args: list[str | Path], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )


def _checked(args: list[str | Path], cwd: Path, timeout: float = 120) -> str:
    result = _run(args, cwd, timeout)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel of this tree and its base dependencies: its root."""
    work = tmp_path_factory.mktemp("light-install")
    # A copy of what the wheel is built from (the links followed, as the wheel does), so
    # that setuptools' in-tree build leaves nothing in the repository.
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "spanguard",
        source / "spanguard",
        symlinks=False,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    wheels = work / "wheels"
    pip = [sys.executable, "-m", "pip"]
    _checked([*pip, "wheel", "-q", "--no-deps", "--wheel-dir", wheels, source], work, 600)
    [wheel] = wheels.glob("spanguard-*.whl")
    venv = work / "venv"
    # No pip in the venv (fresh, and faster): this interpreter's pip installs into it.
    _checked([sys.executable, "-m", "venv", "--without-pip", venv], work)
    python = venv / "bin" / "python"
    _checked([*pip, "--python", python, "install", "-q", wheel], work, 600)
    yield venv


def _installed(venv: Path) -> set[str]:
    out = _checked(
        [
            venv / "bin" / "python",
            "-c",
            "import importlib.metadata as m, json; "
            "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))",
        ],
        venv,
    )
    return {name.lower().replace("_", "-") for name in json.loads(out)}


def _user_project(root: Path) -> Path:
    """An agent project with its own ``schemas.py`` and ``streams/`` package at its root,
    both of which raise when imported, and the service's code beside them."""
    root.mkdir()
    (root / "schemas.py").write_text(USER_MODULE)
    (root / "streams").mkdir()
    (root / "streams" / "__init__.py").write_text(USER_MODULE)
    (root / "agent.py").write_text(ADAPTER_OFFLINE)
    return root


def test_the_sdk_install_has_no_worker_packages(sdk_venv: Path) -> None:
    installed = _installed(sdk_venv)
    assert "spanguard" in installed
    assert {"aiokafka", "pydantic", "typer"} <= installed  # the probe reads real names
    assert not installed & WORKER_DISTRIBUTIONS
    probe = "import importlib.util as u; print(u.find_spec('faust'), u.find_spec('mode'))"
    assert _checked([sdk_venv / "bin" / "python", "-c", probe], sdk_venv).split() == [
        "None",
        "None",
    ]


@pytest.mark.parametrize("interpreter", ["sdk venv", "repository venv"])
def test_an_adapter_runs_offline_beside_a_users_schemas_and_streams(
    sdk_venv: Path, tmp_path: Path, interpreter: str
) -> None:
    python = sdk_venv / "bin" / "python" if interpreter == "sdk venv" else Path(sys.executable)
    project = _user_project(tmp_path / "agent-service")
    # The user's modules come first on this path: spanguard's old top-level names
    # (``from schemas import ...``) would have loaded them.
    for name in ("schemas", "streams"):
        shadowed = _run([python, "-c", f"import {name}"], project)
        assert "user module" in shadowed.stderr, name

    result: dict[str, Any] = json.loads(_checked([python, "agent.py"], project))

    assert result["applied"]
    # the account the last turn refers to stays; so does the task (protected)
    assert result["refused"] == ["PINNED", "PROTECTED"]
    assert "My account 8841-C was charged twice for the same order." in result["contents"]
    assert "Summary: cats." in result["contents"]
    assert result["loaded"] == []
    if interpreter == "sdk venv":  # the installed copy, not the repository's
        assert Path(result["spanguard"]).is_relative_to(sdk_venv)


def test_replay_runs_in_the_sdk_install(sdk_venv: Path, tmp_path: Path) -> None:
    spanguard = sdk_venv / "bin" / "spanguard"
    out = tmp_path / "out.jsonl"
    trace = ROOT / "examples" / "healthy.jsonl"
    _checked([spanguard, "replay", trace, "--out", out, "--fail-on", "warning"], tmp_path)
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e for e in events if e["type"] == "integrity.fault"] == []
    assert "COMMIT" in {e["action"] for e in events if e["type"] == "eviction.decided"}
    assert "Usage: spanguard" in _checked([spanguard, "--help"], tmp_path)


def test_the_worker_names_its_extra_in_the_sdk_install(sdk_venv: Path, tmp_path: Path) -> None:
    result = _run([sdk_venv / "bin" / "spanguard", "worker"], tmp_path)
    assert result.returncode == 1
    assert "pip install 'spanguard[worker]'" in result.stderr
    assert "Traceback" not in result.stderr
