"""Every import of the project goes through the one installed name, ``spanguard``.

The repository's folders are ``streams/`` and ``schemas/``, but the installed package
is ``spanguard.streams`` and ``spanguard.schemas``: a top-level ``import streams`` or
``from schemas import ...`` would work here (the repository root is on the path) and
load a user's own ``schemas.py`` in their project. So no module of the repository
imports those names, nor names them in a string a tool may import (``"streams.sdk.x"``
for ``monkeypatch.setattr``, ``python -m streams.cli.main``); docstrings are prose.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("streams", "schemas", "tests", "bench", "examples", "scripts")
TOP_LEVEL = ("streams", "schemas")
"""The repository's folders that are importable only under ``spanguard.``."""


def _sources() -> list[Path]:
    return sorted(
        path
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts and path != Path(__file__).resolve()
    )


def _is_project_module(dotted: str) -> bool:
    """``streams.sdk.client`` (a module or package of the repository's folders), not
    ``schemas.py`` or ``streams.jsonl``."""
    top, *rest = dotted.split(".")
    if top not in TOP_LEVEL:
        return False
    if not rest:
        return True
    path = ROOT / top / rest[0]
    return path.is_dir() or path.with_suffix(".py").is_file()


DOTTED = re.compile(r"(?<![\w.])((?:streams|schemas)(?:\.\w+)*)")


def bare_imports(source: str) -> list[str]:
    """``line: what`` for each import of, or string naming, a top-level project module."""
    found = []
    tree = ast.parse(source)
    prose = {  # docstrings, of modules, classes, functions and attributes
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if _is_project_module(a.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_project_module(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose  # a stale name there imports nothing
        ):
            for name in DOTTED.findall(node.value):
                if "." in name and _is_project_module(name):
                    found.append(f"{node.lineno}: string {name!r}")
    return found


def test_the_scan_finds_bare_imports() -> None:
    # The check below can fail: each form of a bare import is found, a prefixed one is not.
    source = (
        "import streams.sdk\n"
        "import os, schemas\n"
        "from schemas.codec import decode_output\n"
        "from streams import settings\n"
        "patch('streams.sdk.client.SpanguardClient')\n"
        "cmd = ['python', '-m', 'streams.cli.main']\n"
        "import spanguard.streams.sdk\n"
        "from spanguard.schemas import SpanAdded\n"
        "from . import schemas\n"
        "open('schemas.py'); text = 'spanguard.streams.sdk'\n"
        "def f():\n    'Calls :func:`streams.sdk.client.connect`.'\n"
    )
    assert [f.split(":")[0] for f in bare_imports(source)] == ["1", "2", "3", "4", "5", "6"]


def test_no_module_imports_a_bare_project_name() -> None:
    sources = _sources()
    assert len(sources) > 100  # the folders were found
    found = {str(p.relative_to(ROOT)): bare_imports(p.read_text()) for p in sources}
    assert {path: hits for path, hits in found.items() if hits} == {}
