"""The README's Python example runs as written; its three-line fragments (```py) are
Python that compiles."""

import ast
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_python_examples_in_readme_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_the_framework_fragments_compile() -> None:
    # A fragment names the framework's objects without making them (a model, a
    # session): it cannot run alone, but a typo in it must still fail here.
    fragments = re.findall(r"```py\n(.*?)```", README.read_text(), re.S)
    assert len(fragments) >= 2
    for fragment in fragments:
        compile(fragment, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
