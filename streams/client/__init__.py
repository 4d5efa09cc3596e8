"""Client-side helpers: publish traces, read outputs, extract referents like the service."""

from streams.engine.referents import Anaphor, Extraction, Identifier, extract

__all__ = ["Anaphor", "Extraction", "Identifier", "extract"]
