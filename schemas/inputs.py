"""Input events: what an agent harness publishes to ``spanguard.events``.

All input events share the envelope of :class:`InputEnvelope`; the discriminated
union :data:`InputEvent` picks the model by ``type``.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from spanguard.schemas.common import (
    LOWER_CASED_FIRST,
    ContractModel,
    FiniteScore,
    Label,
    MentionIn,
    NonNegInt,
    Referent,
    Sha256Hex,
    SpanId,
    Timestamp,
    ToolCallId,
    drop_nulls,
)

NO_NULLS = "no_nulls"
"""Validation-context flag: the input holds no JSON null (skip removing them)."""


def text_sha256(text: str) -> str:
    """sha256 of the exact UTF-8 text, no normalisation (the contract's hash)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class InputEnvelope(ContractModel):
    """Fields every input event carries.

    ``seq`` is the harness's per-session counter (+1 per event); ``event_id`` is
    unique within (tenant, session). ``schema_version`` must be ``1``: any other
    value is rejected as ``UNSUPPORTED_SCHEMA_VERSION``, never guessed.
    """

    type: str
    schema_version: Literal[1]

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: Any, info: ValidationInfo) -> Any:
        # Once, at the top: it removes nulls at every depth of the event. A decoder
        # that saw no "null" in the raw bytes says so and saves the walk.
        if info.context and info.context.get(NO_NULLS):
            return data
        return drop_nulls(data)

    event_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=256)
    tenant: str = Field(min_length=1, max_length=128)
    seq: NonNegInt
    turn: NonNegInt
    ts: Timestamp


class _HasTextOrHash(ContractModel):
    """A piece of content given as ``text``, ``text_sha256`` or both.

    At least one is required (``MISSING_FIELD``); with both they must agree
    (``HASH_MISMATCH``). After validation ``text_sha256`` is always set; the text
    is only read to hash it and to extract referents, never stored.
    """

    text: str | None = None
    text_sha256: Sha256Hex | None = None

    @model_validator(mode="after")
    def _bind_hash(self) -> Any:
        if self.text is None:
            if self.text_sha256 is None:
                raise PydanticCustomError("missing", "text or text_sha256 is required")
            return self
        actual = text_sha256(self.text)
        if self.text_sha256 is not None and self.text_sha256 != actual:
            raise PydanticCustomError(
                "hash_mismatch",
                "text_sha256 {claimed} does not match the text's sha256 {actual}",
                {"claimed": self.text_sha256, "actual": actual},
            )
        # What ``self.text_sha256 = actual`` does, without pydantic's assignment
        # machinery (about 1 us, on every span and every snapshot entry).
        self.__dict__["text_sha256"] = actual
        self.__pydantic_fields_set__.add("text_sha256")
        return self

    @property
    def content_hash(self) -> str:
        """The content's sha256 (always set once validated)."""
        assert self.text_sha256 is not None
        return self.text_sha256


class SpanAdded(InputEnvelope, _HasTextOrHash):
    """A segment enters the context (a message, a tool result, a harness summary).

    ``position`` orders the context (ties keep arrival order). ``derived_from``
    is the lineage of a summary the harness wrote itself: its rewrite counter
    starts like a created span's (1 + the highest parent counter). A
    ``span.added`` for a live span id is rejected (``SPAN_EXISTS``).
    """

    type: Literal["span.added"]
    span_id: SpanId
    position: NonNegInt
    tokens: NonNegInt
    role: str | None = None
    derived_from: list[SpanId] | None = None
    introduces: list[Referent] | None = None
    mentions: list[MentionIn] | None = None
    tool_call_ids: list[ToolCallId] | None = None
    """Contract 1.2: the tool calls this span makes (an assistant message with calls)."""
    tool_call_id: ToolCallId | None = None
    """Contract 1.2: the call this span answers (a tool result)."""
    protected: bool = False
    """Contract 1.2: kept verbatim: never evicted, never rewritten (the system prompt,
    the user's original task)."""


class ScoreIn(ContractModel):
    """One score of a scoring pass.

    ``text_sha256`` is the hash of the exact text scored. Missing or empty:
    ``SCORE_PROVENANCE_GAP`` (binds nothing); not the span's current hash:
    ``STALE_SCORE`` (binds nothing); matching: binds and resets the span's
    rewrite counter. A non-finite ``score`` rejects the whole event
    (``NON_FINITE_SCORE``).
    """

    score_id: str = Field(min_length=1, max_length=256)
    span_id: SpanId
    score: FiniteScore
    text_sha256: Annotated[str, Field(pattern=r"^([0-9a-f]{64})?$"), LOWER_CASED_FIRST] | None = (
        None
    )
    query_sha256: Sha256Hex | None = None


class ScoresComputed(InputEnvelope):
    """One independent scoring pass by ``scorer`` (model and version)."""

    type: Literal["scores.computed"]
    scorer: str = Field(min_length=1, max_length=256)
    scores: list[ScoreIn]


class SnapshotScore(ContractModel):
    """A score the rewriter carried inside its snapshot (e.g. inherited by a merge).

    It is the rewriter's claim and NEVER binds or resets a counter. With no hash,
    or a ``score`` that is not a finite number, it is a ``SCORE_PROVENANCE_GAP``;
    with a hash that is not the entry's new text, ``STALE_SCORE``. ``score`` is
    therefore any JSON value here: a bad value is a fault, not a rejection.
    """

    score_id: str = Field(min_length=1, max_length=256)
    score: JsonValue = None
    text_sha256: Annotated[str, LOWER_CASED_FIRST] | None = None


class SnapshotEntry(_HasTextOrHash):
    """One span of a rewrite's complete snapshot; its index is its new position.

    Referents: an entry with text is re-extracted; a modified entry with only a
    hash keeps its referents; a created entry with only a hash inherits the
    union of its parents'. ``introduces`` / ``mentions`` given here are used too.
    """

    span_id: SpanId
    tokens: NonNegInt
    derived_from: list[SpanId] | None = None
    score: SnapshotScore | None = None
    introduces: list[Referent] | None = None
    mentions: list[MentionIn] | None = None


class ContextRewritten(InputEnvelope):
    """A model-driven rewrite: ``context`` is the COMPLETE context afterwards.

    The service diffs hashes itself and does not trust ``declared_modified``.
    ``base_seq`` is the last ``seq`` the rewriter had seen: events after it win
    over the snapshot. A snapshot that names the same span id twice is invalid.

    Reading of the contract: a score bound after ``base_seq`` is not counted in
    ``REWRITE_WITHOUT_INVALIDATION`` (the rewriter could not have known it), but
    it is still unbound when the rewrite changes the span's text.
    """

    type: Literal["context.rewritten"]
    rewrite_id: str = Field(min_length=1, max_length=256)
    context: list[SnapshotEntry]
    declared_modified: list[SpanId] = Field(default_factory=list)
    scores_invalidated: list[str] = Field(default_factory=list)
    base_seq: NonNegInt | None = None
    strategy: Label | None = None
    """Contract 1.2: the compactor's own name (``summarize``, ``sliding_window``...),
    echoed in ``context.compacted``."""
    trigger: Label | None = None
    """Contract 1.2: why it ran (``threshold``, ``overflow``, ``manual``...), echoed."""

    @model_validator(mode="after")
    def _unique_span_ids(self) -> ContextRewritten:
        if len({entry.span_id for entry in self.context}) == len(self.context):
            return self
        seen: set[str] = set()
        for entry in self.context:
            if entry.span_id in seen:
                raise ValueError(f"span id {entry.span_id!r} appears twice in context")
            seen.add(entry.span_id)
        return self


class EvictionPolicy(ContractModel):
    """Exactly one of ``threshold`` (bound score strictly below it) or ``keep_top_k``.

    Only spans with a bound score (for the request's query, if it names one) are
    ranked or counted; ties rank by position, then span id.
    """

    threshold: float | None = Field(default=None, allow_inf_nan=False)
    keep_top_k: NonNegInt | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EvictionPolicy:
        if (self.threshold is None) == (self.keep_top_k is None):
            raise ValueError("policy needs exactly one of threshold or keep_top_k")
        return self


class EvictionRequested(InputEnvelope):
    """The pruner asks to evict ``candidates`` or the ``policy``'s selection.

    ``basis: score`` (default) needs a bound score for every span it commits and
    freezes on stale spans; ``basis: recency`` checks only pins, unknown spans and
    ``LINEAGE``, and goes with ``candidates`` only (with a policy it is invalid).
    """

    type: Literal["eviction.requested"]
    request_id: str = Field(min_length=1, max_length=256)
    candidates: list[SpanId] | None = None
    policy: EvictionPolicy | None = None
    query_sha256: Sha256Hex | None = None
    basis: Literal["score", "recency"] = "score"

    @model_validator(mode="after")
    def _candidates_xor_policy(self) -> EvictionRequested:
        if (self.candidates is None) == (self.policy is None):
            raise ValueError("exactly one of candidates or policy is required")
        if self.basis == "recency" and self.policy is not None:
            raise ValueError("basis 'recency' goes with candidates only: policies need scores")
        return self


class SessionClosed(InputEnvelope):
    """The session ended: its state is deleted; later new events are rejected
    (``SESSION_CLOSED``). Its counters in the fleet figures stay."""

    type: Literal["session.closed"]


InputEvent = Annotated[
    SpanAdded | ScoresComputed | ContextRewritten | EvictionRequested | SessionClosed,
    Field(discriminator="type"),
]
"""Every input event, chosen by ``type``."""

INPUT_TYPES: dict[str, type[InputEnvelope]] = {
    "span.added": SpanAdded,
    "scores.computed": ScoresComputed,
    "context.rewritten": ContextRewritten,
    "eviction.requested": EvictionRequested,
    "session.closed": SessionClosed,
}
