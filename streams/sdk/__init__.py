"""spanguard's client SDK: report an agent's context, ask the gate before evicting.

Imports no Faust (``import spanguard.streams.sdk`` loads neither ``faust`` nor ``mode``
nor ``rocksdict``). Start with :class:`SpanguardClient` (async) or
:class:`SyncSpanguardClient`; framework adapters live in
``spanguard.streams.sdk.adapters`` and import their framework only there. See docs/sdk.md.
"""

from spanguard.streams.sdk.client import (
    DEFAULT_TIMEOUT,
    Renewal,
    RewriteReport,
    Session,
    SpanguardClient,
)
from spanguard.streams.sdk.compaction import (
    DEFAULT_VETO,
    CompactionGuard,
    CompactionOutcome,
    GuardOptions,
    SpanguardFaultError,
    gate_compaction,
)
from spanguard.streams.sdk.decision import Decision, Pin
from spanguard.streams.sdk.kafka_link import KafkaLink, SpanguardUnavailable
from spanguard.streams.sdk.messages import (
    DEFAULT_PROTECT,
    Message,
    Protect,
    ProtectRule,
    TokenCounter,
    approximate_tokens,
)
from spanguard.streams.sdk.sync import SyncSession, SyncSpanguardClient
from spanguard.streams.sdk.tracker import EvictionOptions, RewriteDiff, SpanTracker, Violation

__all__ = [
    "DEFAULT_PROTECT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_VETO",
    "CompactionGuard",
    "CompactionOutcome",
    "Decision",
    "EvictionOptions",
    "GuardOptions",
    "KafkaLink",
    "Message",
    "Pin",
    "Protect",
    "ProtectRule",
    "Renewal",
    "RewriteDiff",
    "RewriteReport",
    "Session",
    "SpanTracker",
    "SpanguardClient",
    "SpanguardFaultError",
    "SpanguardUnavailable",
    "SyncSession",
    "SyncSpanguardClient",
    "TokenCounter",
    "Violation",
    "approximate_tokens",
    "gate_compaction",
]
