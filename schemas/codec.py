"""Bytes on the wire for output events: one compact JSON object each."""

from __future__ import annotations

from spanguard.schemas import OUTPUT_ADAPTER, OutputEvent


def encode_output(event: OutputEvent) -> bytes:
    """The exact bytes spanguard writes for an output event (deterministic)."""
    return event.model_dump_json().encode("utf-8")


def decode_output(raw: bytes) -> OutputEvent:
    """Parse output bytes back into their contract model (raises on invalid input)."""
    return OUTPUT_ADAPTER.validate_json(raw)
