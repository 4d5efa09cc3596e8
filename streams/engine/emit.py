"""Building the output events of one input event, with deterministic ids.

An id is a hash of (tenant, session, event id, the session's count of
accepted events, the output's ordinal within this input), so replaying the
same input gives the same ids, and an event id that comes back after it has
left the duplicate window (and is processed as new) still gets new ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from spanguard.schemas import (
    Action,
    ContextCompacted,
    EvictionDecided,
    FaultKind,
    IntegrityFault,
    OutputEvent,
    PinMention,
    Refusal,
    RefusalReason,
    ScoresRecomputeRequested,
    SpanPinned,
)
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.construct import construct

M = TypeVar("M", bound=BaseModel)
_FIELD_NAMES: dict[type[BaseModel], tuple[str, ...]] = {}


def build(cls: type[M], **fields: Any) -> M:
    """An output model from trusted values, without validation. Every field must be
    given (the round-trip test in ``tests/engine/test_properties.py`` checks each
    output against its schema)."""
    # In declaration order, as validation would store them; a missing field is a KeyError.
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(cls.model_fields)  # a slow class property
    return construct(cls, {name: fields[name] for name in names})


assemble = construct
"""An output model whose ``values`` are trusted and already hold every field in
declaration order (what :func:`build` checks; the hot outputs of :class:`Emission`
write their dicts in that order, and the property tests compare every output with
its validated round trip). See :mod:`~spanguard.streams.engine.construct`."""


def output_id(prefix: str, *parts: object) -> str:
    """``<prefix>-<32 hex>``: a stable id from the parts that identify an output."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass"))
    return f"{prefix}-{digest.hexdigest()[:32]}"


class Emission:
    """Collects the outputs one input event causes, in the order they must be produced.

    Faults come first, then pins, then the recompute request, then the decision,
    so that everything a decision lists is produced before it.
    """

    __slots__ = (
        "_anchor",
        "_ordinal",
        "_prefix",
        "caused_by",
        "outputs",
        "session_id",
        "settings",
        "tenant",
        "ts",
    )

    def __init__(
        self,
        settings: EngineSettings,
        tenant: str,
        session_id: str,
        caused_by: str,
        accepted: int,
        ts: datetime,
    ) -> None:
        self.settings = settings
        self.tenant = tenant
        self.session_id = session_id
        self.caused_by = caused_by
        self.ts = ts
        self.outputs: list[OutputEvent] = []
        self._anchor = (tenant, session_id, caused_by, accepted)
        self._ordinal = 0
        self._prefix: bytes | None = None

    def _next_id(self, prefix: str) -> str:
        # The same digest as ``output_id(prefix, *anchor, ordinal)``; the anchor's part
        # of the hashed text is joined once per input, not once per output.
        self._ordinal += 1
        joined = self._prefix
        if joined is None:
            text = "\x1f".join(str(part) for part in self._anchor) + "\x1f"
            joined = self._prefix = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(joined + str(self._ordinal).encode())
        return f"{prefix}-{digest.hexdigest()[:32]}"

    def fault(self, kind: FaultKind, span_ids: Sequence[str], evidence: dict[str, Any]) -> str:
        """Emit an ``integrity.fault`` at the configured severity; returns its id."""
        fault_id = self._next_id("flt")
        self.outputs.append(
            assemble(
                IntegrityFault,
                {
                    "schema_version": 1,
                    "session_id": self.session_id,
                    "tenant": self.tenant,
                    "caused_by": self.caused_by,
                    "ts": self.ts,
                    "type": "integrity.fault",
                    "fault_id": fault_id,
                    "kind": kind,
                    "severity": self.settings.severity(kind),
                    "span_ids": list(span_ids),
                    "evidence": evidence,
                },
            )
        )
        return fault_id

    def pin(
        self,
        span_id: str,
        request_id: str,
        pinned_for: list[str],
        mention: PinMention,
        path: list[str],
    ) -> str:
        """Emit a ``span.pinned``; returns its id."""
        pin_id = self._next_id("pin")
        self.outputs.append(
            assemble(
                SpanPinned,
                {
                    "schema_version": 1,
                    "session_id": self.session_id,
                    "tenant": self.tenant,
                    "caused_by": self.caused_by,
                    "ts": self.ts,
                    "type": "span.pinned",
                    "pin_id": pin_id,
                    "span_id": span_id,
                    "request_id": request_id,
                    "pinned_for": pinned_for,
                    "mention": mention,
                    "path": path,
                },
            )
        )
        return pin_id

    def recompute(self, span_ids: list[str], reason: str) -> str:
        """Emit a ``scores.recompute_requested``; returns its id."""
        recompute_id = self._next_id("rcp")
        self.outputs.append(
            assemble(
                ScoresRecomputeRequested,
                {
                    "schema_version": 1,
                    "session_id": self.session_id,
                    "tenant": self.tenant,
                    "caused_by": self.caused_by,
                    "ts": self.ts,
                    "type": "scores.recompute_requested",
                    "recompute_id": recompute_id,
                    "span_ids": span_ids,
                    "reason": reason,
                },
            )
        )
        return recompute_id

    def compacted(self, record: dict[str, Any]) -> None:
        """Emit the ``context.compacted`` of a rewrite (``record`` holds its own fields
        in declaration order, from ``rewrite_id`` on)."""
        self.outputs.append(
            assemble(
                ContextCompacted,
                {
                    "schema_version": 1,
                    "session_id": self.session_id,
                    "tenant": self.tenant,
                    "caused_by": self.caused_by,
                    "ts": self.ts,
                    "type": "context.compacted",
                    "compaction_id": self._next_id("cmp"),
                    **record,
                },
            )
        )

    def decision(
        self,
        request_id: str,
        basis: Literal["score", "recency"],
        action: Action,
        committed: list[str],
        refused: list[tuple[str, RefusalReason]],
        dropped: list[str],
        recompute_id: str | None,
        held_by: dict[str, str] | None = None,
    ) -> None:
        """Emit the ``eviction.decided``, listing every fault and pin emitted before it.
        ``held_by`` names, for a ``TOOL_PAIR`` refusal, the span of the group that
        holds it back."""
        faults = [o.fault_id for o in self.outputs if isinstance(o, IntegrityFault)]
        pins = [o.pin_id for o in self.outputs if isinstance(o, SpanPinned)]
        self.outputs.append(
            assemble(
                EvictionDecided,
                {
                    "schema_version": 1,
                    "session_id": self.session_id,
                    "tenant": self.tenant,
                    "caused_by": self.caused_by,
                    "ts": self.ts,
                    "type": "eviction.decided",
                    "decision_id": self._next_id("dec"),
                    "request_id": request_id,
                    "basis": basis,
                    "action": action,
                    "committed": committed,
                    "refused": [_refusal(s, r, held_by) for s, r in refused],
                    "dropped": dropped,
                    "pins": pins,
                    "faults": faults,
                    "recompute_id": recompute_id,
                },
            )
        )


def _refusal(span_id: str, reason: RefusalReason, held_by: dict[str, str] | None) -> Refusal:
    holder = held_by.get(span_id) if held_by and reason is RefusalReason.TOOL_PAIR else None
    values = {"span_id": span_id, "reason": reason, "held_by": holder}
    if holder is None:
        # As a refusal read back from its JSON (no held_by there): the same fields set.
        return assemble(Refusal, values, {"span_id", "reason"})
    return assemble(Refusal, values)
