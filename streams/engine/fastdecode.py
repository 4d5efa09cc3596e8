"""Input events decoded by msgspec, into Structs derived from the contract's models.

The pydantic models of ``schemas/`` stay the one definition of every event. At import,
each input model (and every model it holds) gets a msgspec ``Struct`` of the same
name, derived from the model's fields (their types, defaults and constraints:
lengths, bounds, patterns) and properties (``content_hash``), and a walk that runs
what msgspec cannot: a twin of each model validator, the digests' hex check, the
timestamps. A derived event reads as its model: the same attribute names holding
the same values, so the engine reads either.

The derived decoder only ever *narrows* what the models accept: whatever it refuses
(an upper-case digest, a number written as a string, a timestamp in a rarer
spelling, a rejection of any kind) takes the pydantic path, which alone says why.
So it must accept exactly what that path accepts without a reason, with the same
values; ``tests/engine/test_decode_fast.py`` compares the two on generated records
and on every golden input line. Where the two JSON readers differ, the derivation
narrows further, each time saying why.

A model feature the derivation does not know (a new kind of constraint, a
validator with no twin below) fails at import, never silently.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, Union, cast, get_args, get_origin

import annotated_types
import msgspec
from pydantic import AwareDatetime, BaseModel, JsonValue
from pydantic.fields import FieldInfo
from pydantic.functional_serializers import PlainSerializer
from pydantic.types import AllowInfNan, Strict
from pydantic_core import PydanticUndefined

from spanguard.schemas import INPUT_TYPES, InputEvent
from spanguard.schemas.common import LOWER_CASED_FIRST, FiniteScore
from spanguard.schemas.inputs import text_sha256

JSON_INTS = (-(2**63), 2**64 - 1)
"""The integers that orjson (in front of the pydantic path) reads as integers; it reads
larger ones as floats, where msgspec keeps integers."""
_INT64 = (-(2**63), 2**63 - 1)
"""The bounds of a derived int field: msgspec takes no wider ones, so an int field
above 2**63 - 1 takes the pydantic path."""
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)")
"""RFC 3339 as harnesses write it, at most six digits of a second: read alike by msgspec
and pydantic (which also reads other spellings: they take the pydantic path)."""
_NO_UPPER_CASE = r"\A(?=[\x00-\x40\x5b-\x7f]*\Z)"
"""ASCII without A-Z: where lower-casing first (``LOWER_CASED_FIRST``) changes
nothing. A string it would change takes the pydantic path, which lower-cases it."""
_HEX = re.compile(r"\^(?P<empty>\()?\[0-9a-f\]\{(?P<width>\d+)\}(?(empty)\)\?)\$")
"""The pattern of a digest in lower-case hex (``^[0-9a-f]{64}$``), or of one or nothing."""
_FINITE = type(get_args(FiniteScore)[1])


class Refused(ValueError):
    """The derived decoder does not take this record: the pydantic path decides."""


# -- twins of the models' validators ------------------------------------------


def _bind_hash(event: Any) -> None:
    # _HasTextOrHash: one of text and hash; the hash is always the text's.
    if event.text is None:
        if event.text_sha256 is None:
            raise Refused("text or text_sha256 is required")
        return
    actual = text_sha256(event.text)
    if event.text_sha256 is not None and event.text_sha256 != actual:
        raise Refused("hash mismatch")
    event.text_sha256 = actual


def _key_or_type(mention: Any) -> None:
    if mention.key is None and mention.type is None:
        raise Refused("a mention needs a key or a type")


def _unique_span_ids(event: Any) -> None:
    if len({entry.span_id for entry in event.context}) != len(event.context):
        raise Refused("a span id twice in context")


def _exactly_one(policy: Any) -> None:
    if (policy.threshold is None) == (policy.keep_top_k is None):
        raise Refused("policy needs exactly one of threshold or keep_top_k")


def _candidates_xor_policy(request: Any) -> None:
    if (request.candidates is None) == (request.policy is None):
        raise Refused("exactly one of candidates or policy")
    if request.basis == "recency" and request.policy is not None:
        raise Refused("basis 'recency' goes with candidates only")


TWINS: dict[str, Callable[[Any], None] | None] = {
    "_bind_hash": _bind_hash,
    "_key_or_type": _key_or_type,
    "_unique_span_ids": _unique_span_ids,
    "_exactly_one": _exactly_one,
    "_candidates_xor_policy": _candidates_xor_policy,
    # A null is read as the field's absence by the derived types themselves: an
    # optional field whose default is None takes null as None, any other field
    # refuses it (and the pydantic path removes it and decides).
    "_nulls_are_absent": None,
}
"""Each model validator of the input models, by name: its twin on a derived Struct,
None where the derived types do its work."""


# -- values msgspec reads otherwise ----------------------------------------------


def _as_read_by_orjson(value: Any) -> None:
    """Refuse a JSON value that the pydantic path would read otherwise: one holding a
    null (removed there) or an integer beyond 64 bits (a float there)."""
    if value is None:
        raise Refused("a null")
    if type(value) is int:
        if not JSON_INTS[0] <= value <= JSON_INTS[1]:
            raise Refused("an integer that orjson reads as a float")
    elif type(value) is list:
        for item in value:
            _as_read_by_orjson(item)
    elif type(value) is dict:
        for item in value.values():
            _as_read_by_orjson(item)


_DATETIME: Callable[[msgspec.Raw], datetime] = msgspec.json.Decoder(
    Annotated[datetime, msgspec.Meta(tz=True)]
).decode
"""msgspec's RFC 3339 reader: where it and pydantic both read a time, they read the same
instant and offset, but for more than six digits of a second (msgspec rounds them,
pydantic cuts them off)."""
_SHORT_TIMESTAMP = 29
"""The longest timestamp, as JSON, read by :data:`_DATETIME` alone: the quotes take two
bytes and an escape only lengthens, so its text is at most 27 characters, and the
shortest with seven digits of a second (``2026-11-30T09:00:00.1234567Z``) has 28.
Harnesses' usual spellings fit (``...T09:00:00.123456Z`` is 27); the longer ones take
the spelling check first (a regular expression: 3,000 instructions, 5x the reading)."""
_STRING = msgspec.json.Decoder(str).decode


def _long_timestamp(raw: msgspec.Raw) -> datetime:
    """A timestamp longer than :data:`_SHORT_TIMESTAMP` (an offset and a fraction of a
    second): read by msgspec once the spelling has six digits of a second at most."""
    if _TIMESTAMP.fullmatch(_STRING(raw)) is None:
        raise Refused("a timestamp in another spelling")
    return _DATETIME(raw)


# -- the derivation ---------------------------------------------------------------

Walk = Callable[[Any, list[str]], None]
"""What runs on a decoded event: checks (raising :class:`Refused`), conversions, and
the digests it holds appended to the list (checked together at the end)."""


@dataclass(slots=True)
class _Plan:
    """What msgspec cannot do for one Struct, field by field."""

    digests: list[str] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    json_values: list[str] = field(default_factory=list)
    one: list[tuple[str, _Plan]] = field(default_factory=list)
    many: list[tuple[str, _Plan]] = field(default_factory=list)
    checks: list[Callable[[Any], None]] = field(default_factory=list)

    def empty(self) -> bool:
        """Whether there is nothing to do on this Struct."""
        return not any(
            (self.digests, self.times, self.json_values, self.one, self.many, self.checks)
        )

    def source(self, var: str, indent: str, lines: list[str], names: dict[str, Any]) -> None:
        """The statements of the walk of ``var``, a Struct of this plan: straight-line
        code, the nested Structs' inline (a function call per score would cost as much
        as msgspec's whole decode of it). The twins run last, on converted values."""
        for name in self.digests:
            lines += [f"{indent}v = {var}.{name}", f"{indent}if v:", f"{indent}    found.append(v)"]
        for name in self.times:
            lines += [
                f"{indent}t = {var}.{name}",
                f"{indent}{var}.{name} = _datetime(t) if len(t) <= {_SHORT_TIMESTAMP} else"
                " _long_timestamp(t)",
            ]
        for name in self.json_values:
            lines += [
                f"{indent}if {var}.{name} is not None:",
                f"{indent}    _as_read_by_orjson({var}.{name})",
            ]
        inner = f"x{len(indent)}"
        for name, plan in self.one:
            lines += [f"{indent}{inner} = {var}.{name}", f"{indent}if {inner} is not None:"]
            plan.source(inner, indent + "    ", lines, names)
        for name, plan in self.many:
            lines.append(f"{indent}for {inner} in {var}.{name} or ():")
            plan.source(inner, indent + "    ", lines, names)
        for check in self.checks:
            names[check.__name__] = check
            lines.append(f"{indent}{check.__name__}({var})")

    def walk(self) -> Walk:
        """The walk of an event of this plan, compiled once (as dataclasses do)."""
        names: dict[str, Any] = {
            "_datetime": _DATETIME,
            "_long_timestamp": _long_timestamp,
            "_as_read_by_orjson": _as_read_by_orjson,
        }
        lines = ["def walk(e, found):", "    pass"]
        self.source("e", "    ", lines, names)
        exec("\n".join(lines), names)  # the source is made above, from field names
        return cast(Walk, names["walk"])


class _Derivation:
    """The Structs of the input models and their walks (a model held twice is one Struct)."""

    def __init__(self) -> None:
        self.structs: dict[type[BaseModel], type[msgspec.Struct]] = {}
        self.plans: dict[type[BaseModel], _Plan] = {}
        self.digest_widths: set[int] = set()

    def struct(self, model: type[BaseModel], tag: str | None = None) -> type[msgspec.Struct]:
        """``model``'s Struct; with a ``tag``, one member of the union tagged by ``type``."""
        done = self.structs.get(model)
        if done is not None:
            return done
        plan = _Plan()
        fields: list[tuple[str, Any, Any]] = []
        for name, info in model.model_fields.items():
            if tag is not None and name == "type":
                continue  # the union's tag (a class attribute below)
            wire = self.field_type(plan, name, info.annotation, list(info.metadata))
            if info.default_factory is not None:
                default: Any = msgspec.field(default_factory=info.default_factory)  # type: ignore[arg-type]
            elif info.default is PydanticUndefined:
                default = msgspec.NODEFAULT
            else:
                default = info.default
            fields.append((name, wire, default))
        decorators = model.__pydantic_decorators__  # documented: the model's validators
        for validator in decorators.field_validators:
            raise TypeError(f"{model.__name__}.{validator}: the derived decoder has no field twins")
        for validator in decorators.model_validators:
            if validator not in TWINS:
                raise TypeError(f"{model.__name__}.{validator} has no twin in the derived decoder")
            twin = TWINS[validator]
            if twin is not None:
                plan.checks.append(twin)
        namespace: dict[str, Any] = dict(_properties(model))
        if tag is not None:
            namespace["type"] = tag
        struct = msgspec.defstruct(
            model.__name__,
            fields,
            namespace=namespace,
            module=__name__,
            kw_only=True,
            tag_field=None if tag is None else "type",
            tag=tag,
            gc=False,  # an event holds no cycle: no collector work per decoded object
        )
        self.structs[model] = struct
        self.plans[model] = plan
        return struct

    def field_type(self, plan: _Plan, name: str, annotation: Any, metadata: list[Any]) -> Any:
        """msgspec's type for field ``name``; what msgspec cannot check goes to ``plan``."""
        origin = get_origin(annotation)
        if origin is Annotated:
            base, *more = get_args(annotation)
            return self.field_type(plan, name, base, [*metadata, *more])
        if origin in (Union, types.UnionType):
            args = get_args(annotation)
            if len(args) != 2 or type(None) not in args:
                raise TypeError(f"the derived decoder does not know the union {annotation!r}")
            (inner,) = (arg for arg in args if arg is not type(None))
            return self.field_type(plan, name, inner, metadata) | None
        if origin is list:
            (item,) = get_args(annotation)
            if isinstance(item, type) and issubclass(item, BaseModel):
                struct = self.struct(item)
                if not self.plans[item].empty():
                    plan.many.append((name, self.plans[item]))
                return list[struct]  # type: ignore[valid-type]
            inner_plan = _Plan()
            inner = self.field_type(inner_plan, name, item, [])
            if not inner_plan.empty():
                raise TypeError(f"no check inside a list of values: {annotation!r}")
            return list[inner]  # type: ignore[valid-type]
        if origin is Literal:
            return annotation
        if annotation is JsonValue:
            plan.json_values.append(name)
            return Any
        if annotation is AwareDatetime:
            plan.times.append(name)
            return msgspec.Raw
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            struct = self.struct(annotation)
            if not self.plans[annotation].empty():
                plan.one.append((name, self.plans[annotation]))
            return struct
        return self.value_type(plan, name, annotation, metadata)

    def value_type(self, plan: _Plan, name: str, annotation: Any, metadata: list[Any]) -> Any:
        """A string, number or bool with its constraints."""
        meta, lower_first = _constraints(metadata)
        pattern = meta.pop("pattern", None)
        digest = None if pattern is None else _HEX.fullmatch(pattern)
        if digest is not None:
            # lower-case hex of a fixed length: msgspec would run Python's re on each
            # value (about 0.5 us, six in a scoring pass); the walk collects them and
            # they are checked together
            width = int(digest["width"])
            self.digest_widths.add(width)
            plan.digests.append(name)
            meta.update(min_length=0 if digest["empty"] else width, max_length=width)
        elif pattern is not None:
            meta["pattern"] = _search_pattern(pattern)
        if annotation is int:
            meta["ge"] = max(meta.get("ge", _INT64[0]), _INT64[0])
            meta["le"] = min(meta.get("le", _INT64[1]), _INT64[1])
        elif lower_first and digest is None:
            if annotation is not str:
                raise TypeError(f"lower-cased first, but not a string: {annotation!r}")
            meta["pattern"] = _NO_UPPER_CASE + f"(?:{meta.get('pattern', '')})"
        elif annotation not in (str, float, bool):
            raise TypeError(f"the derived decoder does not know the type {annotation!r}")
        return Annotated[annotation, msgspec.Meta(**meta)] if meta else annotation


def _constraints(metadata: list[Any]) -> tuple[dict[str, Any], bool]:
    """msgspec ``Meta`` arguments of a field's metadata, and whether it is lower-cased first."""
    meta: dict[str, Any] = {}
    lower_first = False
    for item in metadata:
        if isinstance(item, FieldInfo):
            more, lower = _constraints(item.metadata)
            meta.update(more)
            lower_first |= lower
        elif item is LOWER_CASED_FIRST:
            lower_first = True
        elif isinstance(item, annotated_types.MinLen):
            meta["min_length"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            meta["max_length"] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            meta["ge"] = item.ge
        elif isinstance(item, annotated_types.Le):
            meta["le"] = item.le
        elif isinstance(item, (Strict, AllowInfNan, PlainSerializer, _FINITE)):
            # msgspec reads JSON strictly (no "3" for 3, no 1.0 for an int) and never
            # reads NaN or an infinity; serialising is not decoding
            continue
        elif set(vars(item)) == {"pattern"}:
            meta["pattern"] = item.pattern
        else:
            raise TypeError(f"the derived decoder does not know the constraint {item!r}")
    return meta, lower_first


def _search_pattern(pattern: str) -> str:
    """A pydantic (Rust regex) pattern as msgspec's ``re.search`` must read it: ``$``
    there is the end of the text, in Python it also matches before a final newline."""
    if not (pattern.startswith("^") and pattern.endswith("$") and pattern.count("$") == 1):
        raise TypeError(f"the derived decoder does not know the pattern {pattern!r}")
    return pattern[:-1] + r"\Z"


def _properties(model: type[BaseModel]) -> Iterator[tuple[str, property]]:
    """The model's own properties (``content_hash``): they read fields only."""
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            for name, value in vars(cls).items():
                if isinstance(value, property):
                    yield name, value


_DERIVED = _Derivation()
_DECODER = msgspec.json.Decoder(
    Union[tuple(_DERIVED.struct(model, tag=name) for name, model in INPUT_TYPES.items())]  # noqa: UP007
)
(_DIGEST_WIDTH,) = _DERIVED.digest_widths
STRUCTS: dict[type[BaseModel], type[msgspec.Struct]] = _DERIVED.structs
"""Each input model (and each model it holds) and its derived Struct."""
_WALKS: dict[type, Walk] = {
    STRUCTS[model]: _DERIVED.plans[model].walk() for model in INPUT_TYPES.values()
}
_HEX_DIGITS = b"0123456789abcdef"
_HEX_ONLY = bytes(byte if byte in _HEX_DIGITS else _HEX_DIGITS[0] for byte in range(256))
"""Each byte to itself if it is a lower-case hex digit, else to another byte: bytes that
it translates to themselves are all hex digits (``translate`` then returns the same
object)."""
# RecursionError: msgspec refuses JSON nested deeper than the interpreter's stack
# that way; the pydantic path gives such a record its own reason.
_FAILED = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


def decode_fast(raw: bytes) -> InputEvent | None:
    """The event ``raw`` holds, read as its model; None where the pydantic path must
    decide (an invalid record, or one the derived decoder does not take).

    Typed as the model it reads as: the Struct has the model's fields, values and
    properties, and the engine reads nothing else.
    """
    if not raw.isascii():
        # msgspec skips an unknown member without checking its UTF-8; orjson refuses it
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        # the Struct read as its model (a runtime cast would cost a call per event)
        event: InputEvent = _DECODER.decode(raw)
    except _FAILED:
        return None
    digests: list[str] = []
    try:
        _WALKS[type(event)](event, digests)
    except ValueError:  # Refused, or msgspec's (a time it does not read)
        return None
    if digests:
        joined = "".join(digests)
        # each is at most the width long (msgspec), so all are exactly when they add
        # up; a non-ASCII character encodes to bytes above 0x7f, none of them hex
        if len(joined) != _DIGEST_WIDTH * len(digests):
            return None
        try:
            encoded = joined.encode()
        except UnicodeEncodeError:  # a lone surrogate
            return None
        if encoded.translate(_HEX_ONLY) is not encoded:
            return None
    return event
