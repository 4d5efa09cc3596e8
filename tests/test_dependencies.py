"""Every third-party package the code imports by name is declared in pyproject.toml: the
shipped packages' in the dependencies or an extra, the tests', benchmarks' and scripts' in
those or the ``dev``, ``broker`` and ``maintainer`` groups."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCAL = {"spanguard", "streams", "schemas", "tests", "bench", "scripts", "examples"}
NOT_HERE = {"openhands": ["openhands-sdk"]}
"""Modules whose distribution cannot be installed in this venv (openhands-sdk needs 3.12)."""
TOOLS = ("dev", "broker", "maintainer")
"""Groups for what runs in the repository only."""


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]).lower()


def _declared(groups: list[str]) -> set[str]:
    extras = PROJECT["optional-dependencies"]
    return {_name(r) for r in [*PROJECT["dependencies"], *(r for g in groups for r in extras[g])]}


@cache
def _distributions() -> dict[str, list[str]]:
    return {**metadata.packages_distributions(), **NOT_HERE}


def _imported(folder: str) -> dict[str, set[str]]:
    """Top-level third-party modules imported by the files under ``folder``, and where."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in LOCAL and top != "__future__":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize(
    ("folder", "groups"),
    [
        ("streams", [g for g in PROJECT["optional-dependencies"] if g not in TOOLS]),
        ("schemas", []),
        ("tests", list(PROJECT["optional-dependencies"])),
        ("bench", list(PROJECT["optional-dependencies"])),
        ("scripts", list(PROJECT["optional-dependencies"])),
    ],
)
def test_every_imported_package_is_declared(folder: str, groups: list[str]) -> None:
    declared = _declared(groups)
    undeclared = {
        module: sorted(files)[:3]
        for module, files in _imported(folder).items()
        if not {_name(d) for d in _distributions().get(module, [module])} & declared
    }
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_lint_tools_are_pinned_to_a_range_holding_the_installed_one(tool: str) -> None:
    # a new release's rules cannot fail CI on unchanged code; moving the range is a commit
    [pin] = [Requirement(r) for r in PROJECT["optional-dependencies"]["dev"] if _name(r) == tool]
    assert {s.operator for s in pin.specifier} == {">=", "<"}, pin
    assert pin.specifier.contains(metadata.version(tool)), (pin, metadata.version(tool))
