"""The installed spanguard version: ``spanguard --version``, the metrics' build info and
the OpenTelemetry resource (here, free of their imports: the SDK install has no
prometheus-client)."""

from __future__ import annotations

from importlib import metadata


def build_version() -> str:
    """The installed spanguard version (``0+unknown`` from a bare source tree)."""
    try:
        return metadata.version("spanguard")
    except metadata.PackageNotFoundError:
        return "0+unknown"
