"""What a command needs beyond ``pip install spanguard``: the worker's extra.

``pip install spanguard`` is the SDK and the offline commands; ``spanguard worker``
and ``spanguard demo`` run the worker (Faust, the fleet's metrics and web clients),
which come with ``pip install 'spanguard[worker]'``. Without them, those commands
exit with one line naming the extra instead of a traceback.
"""

from __future__ import annotations

import importlib.util

import typer
from rich.console import Console

WORKER_MODULES = ("faust", "mode", "prometheus_client", "aiohttp")
"""What the worker imports that the base install does not bring."""

WORKER_MISSING = (
    "this command runs the worker, which needs the worker extra: "
    "pip install 'spanguard[worker]' (in a checkout: pip install -e '.[worker]')"
)


def missing_worker_modules() -> list[str]:
    """The worker's modules that cannot be imported here (none: the extra is installed)."""
    missing = []
    for name in WORKER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def require_worker() -> None:
    """Exit (status 1) with one line naming the extra when the worker cannot run here."""
    missing = missing_worker_modules()
    if missing:
        Console(stderr=True).print(
            f"error: {WORKER_MISSING}; missing: {', '.join(missing)}",
            style="red",
            markup=False,
            highlight=False,
            soft_wrap=True,  # one line, whatever the terminal's width
        )
        raise typer.Exit(1)
