"""Output events: what spanguard produces, one topic per kind (see ``TOPIC_OF``).

Every id (``fault_id``, ``pin_id``, ...) is deterministic: derived from the
input that caused it, so a replay gives the same output and consumers can
deduplicate. Outputs never hold span text: hashes and keyed-hash referent keys.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from spanguard.schemas.common import ClosedModel, Timestamp


class FaultKind(StrEnum):
    """The contract's fault kinds (default severities in ``DEFAULT_SEVERITY``)."""

    SCORE_PROVENANCE_GAP = "SCORE_PROVENANCE_GAP"
    STALE_SCORE = "STALE_SCORE"
    REWRITE_WITHOUT_INVALIDATION = "REWRITE_WITHOUT_INVALIDATION"
    UNDECLARED_MODIFICATION = "UNDECLARED_MODIFICATION"
    MONOTONIC_DRIFT = "MONOTONIC_DRIFT"
    ORPHANED_PARENT = "ORPHANED_PARENT"
    REWRITE_OF_REWRITE = "REWRITE_OF_REWRITE"
    POISONED_SPAN = "POISONED_SPAN"
    UNGATED_EVICTION = "UNGATED_EVICTION"
    REFERENT_DROPPED = "REFERENT_DROPPED"
    SEQUENCE_GAP = "SEQUENCE_GAP"
    OUT_OF_ORDER = "OUT_OF_ORDER"
    PRUNING_STALLED = "PRUNING_STALLED"
    SUMMARY_BALLOONING = "SUMMARY_BALLOONING"
    """Contract 1.1: a rewrite made a span longer than what it replaces."""
    EMPTY_SUMMARY = "EMPTY_SUMMARY"
    """Contract 1.1: a rewrite created an empty (or near-empty) summary of 2+ spans."""
    PROTECTED_SPAN_REWRITTEN = "PROTECTED_SPAN_REWRITTEN"
    """Contract 1.2: a rewrite modified or left out a protected span."""
    TOOL_PAIR_SPLIT = "TOOL_PAIR_SPLIT"
    """Contract 1.2: a rewrite left half of a whole tool pair live without the other."""
    SUMMARY_LOST_KEYS = "SUMMARY_LOST_KEYS"
    """Contract 1.2: a summary's parents held >= 3 keys; fewer than half stay held."""
    COMPACTION_THRASHING = "COMPACTION_THRASHING"
    """Contract 1.2: rewrites in a row, close together, that do not shrink the context."""


class Severity(StrEnum):
    """Fault and alert severity, ordered info < warning < critical."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0, 1, 2 for info, warning, critical."""
        return ("info", "warning", "critical").index(self.value)


DEFAULT_SEVERITY: dict[FaultKind, Severity] = {
    FaultKind.SCORE_PROVENANCE_GAP: Severity.WARNING,
    FaultKind.STALE_SCORE: Severity.WARNING,
    FaultKind.REWRITE_WITHOUT_INVALIDATION: Severity.CRITICAL,
    FaultKind.UNDECLARED_MODIFICATION: Severity.WARNING,
    FaultKind.MONOTONIC_DRIFT: Severity.CRITICAL,
    FaultKind.ORPHANED_PARENT: Severity.WARNING,
    FaultKind.REWRITE_OF_REWRITE: Severity.WARNING,
    FaultKind.POISONED_SPAN: Severity.CRITICAL,
    FaultKind.UNGATED_EVICTION: Severity.CRITICAL,
    FaultKind.REFERENT_DROPPED: Severity.CRITICAL,
    FaultKind.SEQUENCE_GAP: Severity.WARNING,
    FaultKind.OUT_OF_ORDER: Severity.WARNING,
    FaultKind.PRUNING_STALLED: Severity.CRITICAL,
    FaultKind.SUMMARY_BALLOONING: Severity.WARNING,
    FaultKind.EMPTY_SUMMARY: Severity.CRITICAL,
    FaultKind.PROTECTED_SPAN_REWRITTEN: Severity.CRITICAL,
    FaultKind.TOOL_PAIR_SPLIT: Severity.CRITICAL,
    FaultKind.SUMMARY_LOST_KEYS: Severity.WARNING,
    FaultKind.COMPACTION_THRASHING: Severity.CRITICAL,
}


class RefusalReason(StrEnum):
    """Why the gate refused a candidate.

    ``STALE_SCORE`` is given (instead of ``FROZEN``) to a candidate of a frozen
    request whose own score is stale, so the pruner sees which spans need a
    recompute; ``FROZEN`` to the other candidates of a frozen request.
    """

    UNKNOWN_SPAN = "UNKNOWN_SPAN"
    ALREADY_EVICTED = "ALREADY_EVICTED"
    PINNED = "PINNED"
    STALE_SCORE = "STALE_SCORE"
    UNSCORED = "UNSCORED"
    FROZEN = "FROZEN"
    LINEAGE = "LINEAGE"
    PROTECTED = "PROTECTED"
    """Contract 1.2: a protected span is never evicted, whatever the basis."""
    TOOL_PAIR = "TOOL_PAIR"
    """Contract 1.2: half of a tool pair whose other half stays (see ``held_by``)."""


class Action(StrEnum):
    """``COMMIT``: nothing refused; ``PARTIAL``: some of each; ``FREEZE``: stale
    spans hold the gate; ``REJECT``: nothing committed for any other reason."""

    COMMIT = "COMMIT"
    PARTIAL = "PARTIAL"
    FREEZE = "FREEZE"
    REJECT = "REJECT"


class RejectReason(StrEnum):
    """Why an input became ``event.rejected`` on the dead-letter topic."""

    INVALID_JSON = "INVALID_JSON"
    NOT_AN_OBJECT = "NOT_AN_OBJECT"
    MISSING_FIELD = "MISSING_FIELD"
    INVALID_FIELD = "INVALID_FIELD"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    UNSUPPORTED_SCHEMA_VERSION = "UNSUPPORTED_SCHEMA_VERSION"
    HASH_MISMATCH = "HASH_MISMATCH"
    NON_FINITE_SCORE = "NON_FINITE_SCORE"
    SPAN_EXISTS = "SPAN_EXISTS"
    SESSION_CLOSED = "SESSION_CLOSED"
    SESSION_EXPIRED = "SESSION_EXPIRED"
    """Contract 1.2: the session was expired after ``idle_timeout`` without events."""
    TOO_LARGE = "TOO_LARGE"
    LIMIT_REACHED = "LIMIT_REACHED"
    """spanguard's extension of 1.2: the event would take its session past
    ``max_live_spans``, or is the first of a session beyond the partition's
    ``max_live_sessions``; nothing of it is applied (``docs/contract-notes.md``)."""


class OutputEnvelope(ClosedModel):
    """Fields every output carries; ``caused_by`` is the input ``event_id``."""

    schema_version: Literal[1] = 1
    session_id: str
    tenant: str
    caused_by: str | None
    ts: Timestamp


class IntegrityFault(OutputEnvelope):
    """A broken invariant; ``evidence`` holds what proves it (hashes, counts, series).

    Contract 1.1's kinds carry ``rewrite_id`` and one item per span in ``spans``:
    ``SUMMARY_BALLOONING`` items hold ``span_id``, ``change`` (``created`` |
    ``modified``), ``tokens``, ``tokens_before`` (modified only), ``sources``
    (span id -> tokens: a created span's parents; the spans a modified span
    absorbed), ``source_tokens`` (for a modified span its own tokens before plus
    what it absorbed) and ``ratio``, next to the configured ``balloon_ratio``.
    ``EMPTY_SUMMARY`` items hold ``span_id``, ``tokens``, ``empty_text``,
    ``parents``, ``parent_tokens`` (of the parents live before the rewrite) and
    ``unknown_parents`` (already gone: no tokens in state), next to the
    configured ``min_summary_tokens`` and ``parent_factor``.
    """

    type: Literal["integrity.fault"] = "integrity.fault"
    fault_id: str
    kind: FaultKind
    severity: Severity
    span_ids: list[str]
    evidence: dict[str, Any]


class PinMention(ClosedModel):
    """The mention that needs the pinned span: keyed-hash ``key`` and/or ``type``;
    ``surface`` (the text of the mention) only when configured."""

    key: str | None = None
    type: str | None = None
    surface: str | None = None


class SpanPinned(OutputEnvelope):
    """A candidate kept because a retained span's mention needs it.

    ``pinned_for`` lists the span ids whose mentions resolve to it (retained
    spans, or spans pinned before it in the transitive closure); ``path`` is the
    chain from a retained span to this one, this one last.
    """

    type: Literal["span.pinned"] = "span.pinned"
    pin_id: str
    span_id: str
    request_id: str
    pinned_for: list[str]
    mention: PinMention
    path: list[str]


class ScoresRecomputeRequested(OutputEnvelope):
    """The harness must re-score ``span_ids`` (stale spans and their one-hop
    neighbours) before the gate will commit anything."""

    type: Literal["scores.recompute_requested"] = "scores.recompute_requested"
    recompute_id: str
    span_ids: list[str]
    reason: str


class Refusal(ClosedModel):
    """A candidate the gate did not commit, and why. ``held_by``, with ``TOOL_PAIR``
    only, names the span of the tool-pair group that holds it back for a reason of
    its own (the first by position)."""

    span_id: str
    reason: RefusalReason
    held_by: str | None = Field(None, exclude_if=lambda holder: holder is None)
    """Absent from the JSON when there is none, so a 1.1 refusal reads as before."""


class EvictionDecided(OutputEnvelope):
    """The only thing a compactor may act on: evict exactly ``committed`` and
    ``dropped`` (poisoned spans). ``pins``, ``faults`` and ``recompute_id`` are the
    ids of what this request caused; they were acknowledged before this."""

    type: Literal["eviction.decided"] = "eviction.decided"
    decision_id: str
    request_id: str
    basis: Literal["score", "recency"]
    action: Action
    committed: list[str]
    refused: list[Refusal]
    dropped: list[str]
    pins: list[str]
    faults: list[str]
    recompute_id: str | None


class ContextCompacted(OutputEnvelope):
    """The record of one accepted ``context.rewritten`` (contract 1.2), on
    ``<prefix>.compactions``, produced after every fault it lists.

    ``tokens_*`` and ``spans_*`` are the live tokens and live spans just before and
    just after the rewrite; ``modified``, ``created``, ``merged`` and ``removed``
    (gone with no successor) are span ids in snapshot order (``removed`` and
    ``merged`` in the order the spans stood before). ``keys_*`` count the distinct
    referent keys live spans hold. ``faults`` are the ids of every fault the
    rewrite's event caused; ``outcome`` is ``clean`` (none, or ``info`` only),
    ``warning`` (warnings only) or ``critical``. ``strategy`` and ``trigger`` echo
    the rewrite's. ``tokens_by_role_*`` sum live tokens per span ``role``
    (``unknown`` for spans without one).
    """

    type: Literal["context.compacted"] = "context.compacted"
    compaction_id: str
    rewrite_id: str
    tokens_before: int
    tokens_after: int
    spans_before: int
    spans_after: int
    modified: list[str]
    created: list[str]
    merged: list[str]
    removed: list[str]
    keys_before: int
    keys_after: int
    faults: list[str]
    outcome: Literal["clean", "warning", "critical"]
    strategy: str | None
    trigger: str | None
    tokens_by_role_before: dict[str, int]
    tokens_by_role_after: dict[str, int]


class AlertWindow(ClosedModel):
    """The tumbling window an alert counted in."""

    start: Timestamp
    end: Timestamp


class FleetAlert(OutputEnvelope):
    """A fleet alert rule fired (``status: firing``) or stopped (``resolved``).

    Alerts are per tenant, not per session: ``session_id`` is ``"*"`` and
    ``caused_by`` is null. ``fingerprint`` is stable across firings of the same
    rule for the same tenant, for deduplication.
    """

    type: Literal["fleet.alert"] = "fleet.alert"
    alert_id: str
    rule: str
    severity: Severity
    status: Literal["firing", "resolved"] = "firing"
    window: AlertWindow
    count: int
    sessions: list[str]
    fingerprint: str


class RejectedHeader(ClosedModel):
    """One Kafka header of a rejected record: its name and base64 of its value."""

    key: str
    value_b64: str


class EventRejected(ClosedModel):
    """An input that could not be processed, kept on the dead-letter topic.

    ``raw`` is base64 of the input. An input larger than the engine's
    ``dead_letter_raw_limit`` (64 KiB by default, whatever the reason) keeps
    only its first ``dead_letter_raw_limit`` bytes, with ``raw_truncated:
    true``; the whole is still on the input topic at ``topic``/``partition``/
    ``offset``. ``raw_size`` is the size of the whole input and ``raw_sha256``
    its sha256 (hex), so a dead letter always fits a producer's 1 MiB request
    and still identifies the input exactly.

    ``tenant``/``session_id``/``caused_by`` are set when readable. For
    ``TOO_LARGE`` the input is not parsed: ``tenant`` and ``session_id`` are
    read from its first ``dead_letter_raw_limit`` bytes by a bounded scan for
    ``"tenant": "..."`` and ``"session_id": "..."`` (the first occurrence of
    each key, a JSON string of valid length; in a pathological input it could
    come from a nested object). ``topic``/``partition``/``offset`` say where it
    came from (for ``spanguard replay``: the file as topic, -1 as partition, the
    line index as offset). ``ts`` is the input's own ``ts`` when readable, else
    the time the record was received (for replay, the last readable ``ts``
    before it).

    Extra fields (contract 1.1 allows them): ``key`` is base64 of the Kafka
    record's key (None for a keyless record; cut to the same limit, with
    ``key_truncated``); ``headers`` are its Kafka headers in order, kept while
    their values add up to at most the limit (``headers_truncated`` when some
    were left out). A tombstone (a record with no value) or an empty value is
    rejected as ``INVALID_JSON`` with its key, so the producer can be found.
    """

    type: Literal["event.rejected"] = "event.rejected"
    schema_version: Literal[1] = 1
    rejection_id: str
    reason: RejectReason
    detail: str
    raw: str
    raw_size: int
    raw_truncated: bool = False
    tenant: str | None = None
    session_id: str | None = None
    caused_by: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    ts: Timestamp
    raw_sha256: str | None = None
    key: str | None = None
    key_truncated: bool = False
    headers: list[RejectedHeader] = Field(default_factory=list)
    headers_truncated: bool = False


OutputEvent = Annotated[
    IntegrityFault
    | SpanPinned
    | ScoresRecomputeRequested
    | EvictionDecided
    | ContextCompacted
    | FleetAlert
    | EventRejected,
    Field(discriminator="type"),
]
"""Every output event, chosen by ``type``."""

ID_FIELD: dict[str, str] = {
    "integrity.fault": "fault_id",
    "span.pinned": "pin_id",
    "scores.recompute_requested": "recompute_id",
    "eviction.decided": "decision_id",
    "context.compacted": "compaction_id",
    "fleet.alert": "alert_id",
    "event.rejected": "rejection_id",
}
"""Output ``type`` -> the name of its own id field."""

TOPIC_OF: dict[str, str] = {
    "integrity.fault": "faults",
    "span.pinned": "pins",
    "scores.recompute_requested": "recompute",
    "eviction.decided": "decisions",
    "context.compacted": "compactions",
    "fleet.alert": "alerts",
    "event.rejected": "deadletter",
}
"""Output ``type`` -> topic suffix (the topic is ``<prefix>.<suffix>``)."""

OUTPUT_SUFFIXES: tuple[str, ...] = tuple(dict.fromkeys(TOPIC_OF.values()))
"""Every output topic's suffix, in the contract's order (the one list of them)."""
