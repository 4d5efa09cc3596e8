"""spanguard: guards the context of LLM agents, fleet-wide.

The installed import names live under this one package so that a project's own
``schemas.py`` or ``streams/`` can never shadow them: ``spanguard.streams`` (the
engine, the worker, the SDK, the CLI) and ``spanguard.schemas`` (the wire
contract's models). In this repository both are the top-level folders
``streams/`` and ``schemas/``; ``spanguard/streams`` and ``spanguard/schemas``
are links to them, and the wheel holds real copies.
"""
