"""Shared building blocks of the wire contract (version 1).

Every field name here is fixed by ``CONTRACT.md``. Where the contract leaves a
choice open, the docstring of the model that makes the choice says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

SCHEMA_VERSION: Literal[1] = 1
"""The only ``schema_version`` this contract accepts; any other value is rejected."""

HEX64_PATTERN = r"^[0-9a-f]{64}$"


def _format_ts(value: datetime) -> str:
    # RFC 3339 with a "Z" for UTC, so that replayed output is byte-identical
    # whatever the input's offset spelling was.
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


Timestamp = Annotated[AwareDatetime, PlainSerializer(_format_ts, return_type=str)]
"""An RFC 3339 time with an offset (a naive time is invalid)."""


class LowerCasedFirst:
    """Annotation: a string is lower-cased before the type's own checks (its pattern).

    pydantic-core applies a string's ``to_lower`` after its pattern, so the two are
    chained: a string lower-cased, then the annotated type. It all runs in
    pydantic-core (no Python call per value, unlike a ``before`` validator), with
    the same errors: a non-string fails the first step (``string_type``), a bad
    digest the second (the pattern's message). The JSON Schema is the annotated
    type's own.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.chain_schema([core_schema.str_schema(to_lower=True), handler(source)])

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        assert schema["type"] == "chain"
        return handler(schema["steps"][-1])


LOWER_CASED_FIRST = LowerCasedFirst()
"""The one instance the models annotate with."""

Sha256Hex = Annotated[
    str,
    Field(pattern=HEX64_PATTERN),
    LOWER_CASED_FIRST,
    Field(description="sha256, 64 lower-case hex"),
]
"""A sha256 digest in lower-case hex. Upper-case input is lower-cased first."""


class _FiniteAfterward:
    """Annotation on a float: a non-finite value (NaN, infinity) is rejected with the
    contract's own error (``non_finite_score``), after the float's usual checks.

    A chain in pydantic-core: the float as usual (so a string that is no number
    keeps its usual error), then the same value with ``allow_inf_nan=False`` under
    a custom error. No Python call per value; the JSON Schema is the float's.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        finite = core_schema.custom_error_schema(
            core_schema.float_schema(allow_inf_nan=False),
            custom_error_type="non_finite_score",
            custom_error_message="score must be a finite number",
        )
        return core_schema.chain_schema([handler(source), finite])

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        assert schema["type"] == "chain"
        return handler(schema["steps"][0])


FiniteScore = Annotated[float, _FiniteAfterward()]
"""A score: any JSON number but NaN and the infinities (``NON_FINITE_SCORE``)."""

NonNegInt = Annotated[int, Field(ge=0, strict=True)]
SpanId = Annotated[str, Field(min_length=1, max_length=256)]
ToolCallId = Annotated[str, Field(min_length=1, max_length=256)]
"""A tool call's id as the model provider gave it (contract 1.2)."""
Label = Annotated[str, Field(min_length=1, max_length=128)]
"""A short free-form word of the harness's (a compaction's ``strategy``, ``trigger``)."""


def drop_nulls(value: Any) -> Any:
    """Return ``value`` with every ``null`` object member removed, recursively.

    The contract says JSON ``null`` means absent; list items are left alone, so a
    ``null`` inside a list is still an error.
    """
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


class ContractModel(BaseModel):
    """Base of every input model and its parts: unknown fields are kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ClosedModel(BaseModel):
    """Base of output models and their parts: exactly the contract's fields."""

    model_config = ConfigDict(extra="forbid")


class Referent(ContractModel):
    """An entity a span introduces: ``{key, type}``.

    ``key`` is the identifier as the harness saw it; the service stores and emits
    it only as a keyed hash (``hmac-sha256:<hex>``). A key that already has that
    prefix is taken as hashed and kept as it is.
    """

    key: str = Field(min_length=1, max_length=1024)
    type: str = Field(min_length=1, max_length=128)


class MentionIn(ContractModel):
    """A reference a span makes: ``{key?, type?, surface?}``.

    With a ``key`` it refers to that identifier; with only a ``type`` it is an
    anaphor ("that account") bound to the latest live span before it that holds
    an entity of that type. At least one of ``key`` and ``type`` is required.
    """

    key: str | None = Field(default=None, min_length=1, max_length=1024)
    type: str | None = Field(default=None, min_length=1, max_length=128)
    surface: str | None = Field(default=None, max_length=1024)

    @model_validator(mode="after")
    def _key_or_type(self) -> MentionIn:
        if self.key is None and self.type is None:
            raise ValueError("a mention needs a key or a type")
        return self
