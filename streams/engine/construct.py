"""Output models built from trusted values, without validation: the one place that
knows how.

:func:`construct` is pydantic's public ``model_construct`` unless :data:`FAST` is on.
``FAST`` (the one switch) is on only under the pydantic minor this was tested with
(:data:`TESTED_PYDANTIC`): there :func:`construct` assembles the very object
``model_construct`` would (the same ``__dict__`` in declaration order, its own
fields-set, no extra, no private values) by setting BaseModel's slots directly,
about a tenth of the instructions (4,900 against 46,800 for a ``span.pinned``,
callgrind): ``model_construct`` walks every field's aliases and defaults in Python
on each call. Under any other pydantic the public path runs, slower but correct,
until this module is tested there. ``tests/engine/test_construct.py`` holds the two
paths to equal objects and to byte-identical golden outputs.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

TESTED_PYDANTIC = "2.14"
"""The pydantic minor whose BaseModel slots :func:`construct_fast` sets."""

FAST = pydantic.VERSION.startswith(TESTED_PYDANTIC + ".")
"""Whether :func:`construct` takes the fast path (see the module docstring)."""


def construct_public(cls: type[M], values: dict[str, Any], fields_set: set[str] | None = None) -> M:
    """``cls.model_construct(fields_set, **values)``: ``values`` trusted, holding every
    field; ``fields_set`` the fields counted as set (None: all of them)."""
    return cls.model_construct(fields_set, **values)


def construct_fast(cls: type[M], values: dict[str, Any], fields_set: set[str] | None = None) -> M:
    """What :func:`construct_public` returns, for a model with no ``model_post_init``,
    no root and no extra fields, from ``values`` holding every field in declaration
    order (the emitters write their dicts in that order)."""
    every_field = _EVERY_FIELD.get(cls)
    if every_field is None:
        every_field = _EVERY_FIELD[cls] = _plain_fields(cls)
    obj = _new(cls)
    _set_dict(obj, values)
    # Each output its own fields-set, as model_construct gives: nothing shared to mutate.
    _set_fields_set(obj, every_field.copy() if fields_set is None else fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


construct = construct_fast if FAST else construct_public
"""An output model from trusted values holding every field in declaration order."""


_EVERY_FIELD: dict[type[BaseModel], set[str]] = {}
"""Per model, its field names (what each output's fields-set is a copy of)."""


def _plain_fields(cls: type[BaseModel]) -> set[str]:
    # What model_construct does beyond setting the four slots must not apply.
    if cls.__pydantic_post_init__ or cls.__pydantic_root_model__:
        raise TypeError(f"{cls.__name__}: model_post_init or a root model, use model_construct")
    if cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__}: extra fields allowed, use model_construct")
    return set(cls.model_fields)


# BaseModel's own slots, set through their descriptors (no attribute lookup per
# call), and object.__new__, as no model defines a __new__ of its own.
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
