"""The reference model shares no code with the engine but the extractor the contract names."""

import ast
from pathlib import Path

import spanguard.streams.reference

PACKAGE = Path(spanguard.streams.reference.__file__).parent
ALLOWED = {
    ("spanguard.streams.engine.referents", "extract"),
    ("spanguard.streams.engine.names", "NameBook"),
}
"""The contract: "The project's extractor module is the reference implementation"; the
extractor keeps the session's name book (contract 1.2), so its book comes along."""


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import in ``path``; name ``*`` for ``import module``."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "*") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            assert node.module is not None
            found.extend((node.module, alias.name) for alias in node.names)
    return found


def test_the_package_has_modules() -> None:
    names = {path.name for path in PACKAGE.glob("*.py")}
    assert {"model.py", "extract.py", "gate.py", "rewrite.py"} <= names


def test_no_module_imports_the_engine_but_the_extractor() -> None:
    engine_imports: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for module, name in _imports(path):
            from_engine = module == "spanguard.streams.engine" or module.startswith(
                "spanguard.streams.engine."
            )
            if from_engine and (module, name) not in ALLOWED:
                engine_imports.setdefault(path.name, []).append((module, name))
    assert engine_imports == {}


def test_only_the_extract_module_uses_the_extractor() -> None:
    users = {
        path.name
        for path in PACKAGE.glob("*.py")
        for module, _ in _imports(path)
        if module.startswith("spanguard.streams.engine")
    }
    assert users == {"extract.py"}


def test_no_module_imports_other_project_code() -> None:
    # schemas/ is the contract itself; the rest of streams/ would carry the engine's readings.
    others = {
        (path.name, module)
        for path in PACKAGE.glob("*.py")
        for module, _ in _imports(path)
        if module.startswith("spanguard.streams.")
        and not module.startswith(
            (
                "spanguard.streams.reference",
                "spanguard.streams.engine.referents",
                "spanguard.streams.engine.names",
            )
        )
    }
    assert others == set()
