"""The spanguard wire contract, version 1: pydantic models of every event.

Input events arrive on ``spanguard.events``; output events leave on the topics
named by :data:`spanguard.schemas.outputs.TOPIC_OF`. :data:`ContractEvent` is the one
discriminated union on ``type`` over all of them.
"""

from typing import Annotated

from pydantic import Field, TypeAdapter

from spanguard.schemas.common import SCHEMA_VERSION, MentionIn, Referent
from spanguard.schemas.inputs import (
    INPUT_TYPES,
    ContextRewritten,
    EvictionPolicy,
    EvictionRequested,
    InputEnvelope,
    InputEvent,
    ScoreIn,
    ScoresComputed,
    SessionClosed,
    SnapshotEntry,
    SnapshotScore,
    SpanAdded,
    text_sha256,
)
from spanguard.schemas.outputs import (
    DEFAULT_SEVERITY,
    ID_FIELD,
    OUTPUT_SUFFIXES,
    TOPIC_OF,
    Action,
    AlertWindow,
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    FaultKind,
    FleetAlert,
    IntegrityFault,
    OutputEvent,
    PinMention,
    Refusal,
    RefusalReason,
    RejectedHeader,
    RejectReason,
    ScoresRecomputeRequested,
    Severity,
    SpanPinned,
)

ContractEvent = Annotated[
    SpanAdded
    | ScoresComputed
    | ContextRewritten
    | EvictionRequested
    | SessionClosed
    | IntegrityFault
    | SpanPinned
    | ScoresRecomputeRequested
    | EvictionDecided
    | ContextCompacted
    | FleetAlert
    | EventRejected,
    Field(discriminator="type"),
]
"""Every event of the contract, input or output, chosen by ``type``."""

INPUT_ADAPTER: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)
OUTPUT_ADAPTER: TypeAdapter[OutputEvent] = TypeAdapter(OutputEvent)
CONTRACT_ADAPTER: TypeAdapter[ContractEvent] = TypeAdapter(ContractEvent)

__all__ = [
    "CONTRACT_ADAPTER",
    "DEFAULT_SEVERITY",
    "ID_FIELD",
    "INPUT_ADAPTER",
    "INPUT_TYPES",
    "OUTPUT_ADAPTER",
    "OUTPUT_SUFFIXES",
    "SCHEMA_VERSION",
    "TOPIC_OF",
    "Action",
    "AlertWindow",
    "ContextCompacted",
    "ContextRewritten",
    "ContractEvent",
    "EventRejected",
    "EvictionDecided",
    "EvictionPolicy",
    "EvictionRequested",
    "FaultKind",
    "FleetAlert",
    "InputEnvelope",
    "InputEvent",
    "IntegrityFault",
    "MentionIn",
    "OutputEvent",
    "PinMention",
    "Referent",
    "Refusal",
    "RefusalReason",
    "RejectReason",
    "RejectedHeader",
    "ScoreIn",
    "ScoresComputed",
    "ScoresRecomputeRequested",
    "SessionClosed",
    "Severity",
    "SnapshotEntry",
    "SnapshotScore",
    "SpanAdded",
    "SpanPinned",
    "text_sha256",
]
