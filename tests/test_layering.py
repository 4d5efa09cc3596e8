"""The package layering of docs/architecture.md, held by the code: which layer may import
which (anywhere in a module, lazy imports included), and no circle between packages."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STREAMS = ROOT / "streams"

# What each layer must never import (its callers, or a sibling it must not know).
FORBIDDEN: dict[str, set[str]] = {
    "engine": {"runtime", "app", "fleet", "sdk", "kafka_io", "cli", "settings", "sim"},
    "runtime": {"app", "fleet", "cli", "sdk", "settings", "sim"},
    "kafka_io": {"settings", "app", "cli", "fleet", "runtime", "sdk"},
    "sdk": {"app", "runtime", "fleet", "cli", "settings"},
    "fleet": {"app", "cli"},
    "reference": {"runtime", "app", "fleet", "sdk", "kafka_io", "cli", "settings", "sim"},
}


def _layer(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported(path: Path) -> Iterator[str]:
    """The project modules ``path`` imports, anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def layer_imports(root: Path = STREAMS) -> dict[str, set[str]]:
    """Layer -> the other layers of ``spanguard.streams`` it imports."""
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        layer = _layer(path, root)
        for module in _imported(path):
            parts = module.split(".")
            if parts[:2] == ["spanguard", "streams"] and len(parts) > 2 and parts[2] != layer:
                edges.setdefault(layer, set()).add(parts[2])
            elif parts[0] == "spanguard" and parts[1:2] == ["schemas"]:
                edges.setdefault(layer, set()).add("schemas")
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import path that comes back to where it started (one per start layer)."""
    found: list[list[str]] = []
    for start in sorted(edges):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        seen: set[str] = set()
        while stack:
            layer, path = stack.pop()
            for nxt in sorted(edges.get(layer, ())):
                if nxt == start:
                    found.append([*path, start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def test_each_layer_imports_only_what_it_may() -> None:
    edges = layer_imports()
    broken = {
        layer: sorted(edges.get(layer, set()) & forbidden)
        for layer, forbidden in FORBIDDEN.items()
        if edges.get(layer, set()) & forbidden
    }
    assert broken == {}
    # The engine and the schemas are the bottom: the contract imports no layer.
    assert not any(
        module.startswith("spanguard.streams")
        for path in (ROOT / "schemas").rglob("*.py")
        for module in _imported(path)
    )


def test_the_layers_form_no_circle() -> None:
    assert circles(layer_imports()) == []


def test_the_checks_see_a_forbidden_import_and_a_circle(tmp_path: Path) -> None:
    # A check that cannot fail proves nothing: a kafka_io module importing the
    # settings, and the settings importing kafka_io back, are both seen.
    (tmp_path / "kafka_io").mkdir()
    (tmp_path / "kafka_io" / "topics.py").write_text(
        "from spanguard.streams.settings import Settings\n"
    )
    (tmp_path / "settings.py").write_text(
        "def f():\n    from spanguard.streams.kafka_io.topics import x\n"
    )
    edges = layer_imports(tmp_path)
    assert edges == {"kafka_io": {"settings"}, "settings": {"kafka_io"}}
    assert circles(edges) == [
        ["kafka_io", "settings", "kafka_io"],
        ["settings", "kafka_io", "settings"],
    ]


def _module(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def module_imports(root: Path = STREAMS) -> dict[str, set[str]]:
    """Module -> the other modules of ``spanguard.streams`` it imports, anywhere in it
    (``TYPE_CHECKING`` blocks and lazy imports included: a circle of annotations is a
    circle of design, even when Python does not trip on it)."""
    modules = {_module(path, root) for path in root.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = _module(path, root)
        for imported in _imported(path):
            parts = imported.split(".")
            target = ".".join(parts[2:])
            if parts[:2] == ["spanguard", "streams"] and target in modules and target != name:
                edges.setdefault(name, set()).add(target)
    return edges


def test_the_modules_form_no_circle() -> None:
    assert circles(module_imports()) == []


def test_the_check_sees_a_circle_of_modules_through_annotations(tmp_path: Path) -> None:
    # The worker's old wiring: the fleet needed the topology (for its type), the
    # topology the fleet, and the web both.
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "fleet.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from spanguard.streams.app.topology import Topology\n"
        "def install():\n"
        "    from spanguard.streams.app.web import install_web\n"
    )
    (tmp_path / "app" / "topology.py").write_text("from spanguard.streams.app.fleet import x\n")
    (tmp_path / "app" / "web.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from spanguard.streams.app.topology import Topology\n"
    )
    edges = module_imports(tmp_path)
    assert edges == {
        "app.fleet": {"app.topology", "app.web"},
        "app.topology": {"app.fleet"},
        "app.web": {"app.topology"},
    }
    assert ["app.fleet", "app.topology", "app.fleet"] in circles(edges)
    assert ["app.web", "app.topology", "app.fleet", "app.web"] in circles(edges)
