"""``EngineDriver``: drive the engine in a test the way Kafka would, no broker.

Modelled on Kafka Streams' ``TopologyTestDriver``: pipe input in, read output
per topic::

    driver = EngineDriver()
    driver.pipe(script)                       # a SessionScript, events or raw lines
    [decision] = driver.decisions()
    assert driver.faults(FaultKind.STALE_SCORE)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from spanguard.schemas import (
    TOPIC_OF,
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    FaultKind,
    InputEvent,
    IntegrityFault,
    OutputEvent,
    ScoresRecomputeRequested,
    SpanPinned,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript

T = TypeVar("T")


class EngineDriver:
    """An :class:`Engine` plus the outputs it produced, readable per topic."""

    def __init__(self, settings: EngineSettings | None = None, **overrides: object) -> None:
        base = settings or EngineSettings()
        self.engine = Engine(base.model_copy(update=overrides) if overrides else base)
        self.outputs: list[OutputEvent] = []
        self._offset = 0

    def pipe(
        self, source: SessionScript | Iterable[InputEvent] | Iterable[bytes]
    ) -> list[OutputEvent]:
        """Process input (a script, validated events or raw records); returns the new outputs."""
        items: Iterable[InputEvent | bytes] = (
            source.lines() if isinstance(source, SessionScript) else source
        )
        produced: list[OutputEvent] = []
        for item in items:
            if isinstance(item, bytes):
                produced.extend(self.engine.process_raw(item, Source("events", 0, self._offset)))
            else:
                produced.extend(self.engine.process(item, Source("events", 0, self._offset)))
            self._offset += 1
        self.outputs.extend(produced)
        return produced

    def _of(self, cls: type[T]) -> list[T]:
        return [o for o in self.outputs if isinstance(o, cls)]

    def faults(self, kind: FaultKind | None = None) -> list[IntegrityFault]:
        """Faults produced so far, optionally of one kind."""
        return [f for f in self._of(IntegrityFault) if kind is None or f.kind == kind]

    def fault_kinds(self) -> list[FaultKind]:
        """The kinds of the faults produced so far, in order."""
        return [f.kind for f in self._of(IntegrityFault)]

    def pins(self) -> list[SpanPinned]:
        """Pins produced so far."""
        return self._of(SpanPinned)

    def compactions(self) -> list[ContextCompacted]:
        """Compaction records produced so far (contract 1.2)."""
        return self._of(ContextCompacted)

    def decisions(self) -> list[EvictionDecided]:
        """Decisions produced so far."""
        return self._of(EvictionDecided)

    def recomputes(self) -> list[ScoresRecomputeRequested]:
        """Recompute requests produced so far."""
        return self._of(ScoresRecomputeRequested)

    def rejections(self) -> list[EventRejected]:
        """Dead-letter records produced so far."""
        return self._of(EventRejected)

    def topic(self, suffix: str) -> list[OutputEvent]:
        """Outputs bound for one topic suffix (``faults``, ``pins``, ``decisions``, ...)."""
        return [o for o in self.outputs if TOPIC_OF[o.type] == suffix]
