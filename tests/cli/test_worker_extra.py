"""Without the ``worker`` extra, the command line still runs its offline commands, and the
worker's commands say which extra to install (no traceback).

The extra is missing here the way Python sees a missing package: its modules are set
to ``None`` in ``sys.modules`` (an import raises ModuleNotFoundError, ``find_spec``
finds nothing) in a subprocess. tests/sdk/test_light_install.py does the same in a
fresh venv that never had them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spanguard.streams.cli.extras import WORKER_MODULES
from spanguard.streams.localbroker.broker import free_ports

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("faust", "mode", "prometheus_client", "aiohttp", "rocksdict")
"""What the worker imports and the SDK install does not bring (rocksdict: Faust's store)."""


def _spanguard(
    args: list[str], *, missing: tuple[str, ...], cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, str, list[str]]:
    """Run the command line in a subprocess with ``missing`` uninstallable: its exit
    status, its stderr and which of :data:`HEAVY` it loaded."""
    probe = (
        "import atexit, json, sys\n"
        f"for name in {missing!r}: sys.modules[name] = None\n"
        "atexit.register(lambda: print('LOADED', json.dumps(sorted("
        f"n for n in {HEAVY!r} if sys.modules.get(n) is not None)), file=sys.stderr))\n"
        "from spanguard.streams.cli.main import app\n"
        f"app({args!r}, prog_name='spanguard')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    stderr, _, loaded = result.stderr.rpartition("LOADED ")
    return result.returncode, stderr, json.loads(loaded)


@pytest.mark.parametrize("command", [["worker"], ["demo", "--duration", "1"]])
def test_a_worker_command_names_the_extra(command: list[str], tmp_path: Path) -> None:
    status, stderr, _ = _spanguard(command, missing=WORKER_MODULES, cwd=tmp_path)
    assert status == 1
    assert "pip install 'spanguard[worker]'" in stderr
    assert "Traceback" not in stderr
    # it stopped before anything else: no broker started, no data directory made
    assert list(tmp_path.iterdir()) == []


def test_the_message_names_only_what_is_missing(tmp_path: Path) -> None:
    _, stderr, _ = _spanguard(["worker"], missing=("faust",), cwd=tmp_path)
    assert stderr.strip().endswith("missing: faust")


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],  # imports every command's module
        ["--version"],
        ["replay", str(ROOT / "examples" / "healthy.jsonl"), "--out", "out.jsonl"],
        ["simulate", "-n", "3", "--out", "sim.jsonl", "--quiet"],
        ["check-rules", str(ROOT / "examples" / "alert-rules.yaml")],
    ],
    ids=lambda c: c[0],
)
def test_offline_commands_run_without_the_extra(command: list[str], tmp_path: Path) -> None:
    status, stderr, _ = _spanguard(command, missing=WORKER_MODULES, cwd=tmp_path)
    assert status == 0, stderr
    # with the extra installed they still do not load it
    status, stderr, loaded = _spanguard(command, missing=(), cwd=tmp_path)
    assert status == 0, stderr
    assert loaded == []


def test_the_probe_sees_a_loaded_worker_module(tmp_path: Path) -> None:
    # The check above can fail: ``worker`` loads Faust before it finds no broker.
    [port] = free_ports(1)
    status, _, loaded = _spanguard(
        ["worker"], missing=(), cwd=tmp_path, env={"SPANGUARD_BROKER": f"kafka://127.0.0.1:{port}"}
    )
    assert status != 0
    assert "faust" in loaded
