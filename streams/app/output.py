"""The ordering journal: where and when the broker acknowledged each output.

The integration tests prove the contract's ordering rule from it (every fault,
pin and recompute request a decision lists is acknowledged before the decision
is sent); the runtime calls the hook for every acknowledged output.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from spanguard.schemas import ID_FIELD, OutputEvent


@dataclass(frozen=True, slots=True)
class Ack:
    """Where and when the broker acknowledged an output (for the ordering journal)."""

    output_id: str
    type: str
    topic: str
    partition: int
    offset: int
    acked_ns: int
    sent_ns: int


Journal = Callable[[Ack], None]


def file_journal(path: Path) -> Journal:
    """A journal that appends one JSON line per ack to ``path`` (for verification)."""
    handle = path.open("ab", buffering=0)

    def record(ack: Ack) -> None:
        handle.write(orjson.dumps(dataclasses.asdict(ack)) + b"\n")

    return record


def journal_hook(journal: Journal) -> Callable[[OutputEvent, Any, int], None]:
    """The runtime's ``on_ack`` hook that writes ``journal`` entries."""

    def on_ack(event: OutputEvent, metadata: Any, sent_ns: int) -> None:
        journal(
            Ack(
                str(getattr(event, ID_FIELD[event.type])),
                event.type,
                metadata.topic,
                metadata.partition,
                metadata.offset,
                time.monotonic_ns(),
                sent_ns,
            )
        )

    return on_ack
