"""Values whose kind the text itself states: phone numbers and JSON fields (contract 1.2).

Agents see identifiers mostly in tool results (``{"reservation_id": "NO6JO3",
"price": 1268}``) and people give phone numbers in groups (``01223 356354``).
The scanner of :mod:`spanguard.streams.engine.referents` reads words; this module reads
these two shapes first, so that:

* a phone number is one identifier keyed by its digits alone, whatever its
  spacing (``+44 1223 356354`` and ``01223-356354`` differ; ``(415) 555-0134``
  and ``415.555.0134`` are one key);
* a string or integer under an identifying JSON field is an identifier typed
  by the field's noun (``reservation_id`` -> ``reservation``), or a name under a
  name field (``hotel_name``, ``first_name``), which goes into the name book;
* a number under any other field (``price``, ``rating``, ``zip``) is never an
  identifier, and nothing inside an identifying value is read again.

Pure, total, linear: bounded patterns only.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from spanguard.streams.engine.names import HEAD_NOUNS
from spanguard.streams.engine.shape import may_hold_phone

__all__ = ["IDENTIFYING_FIELDS", "FieldValue", "Phone", "TypedValues", "field_noun", "find_typed"]

# Groups of 1-8 digits split by one separator, an optional country code and an
# area code in brackets: every way people write a phone number.
_PHONE = re.compile(
    # Ten phone characters ahead, checked first: most digit runs ("10:30", "2026")
    # fail here, in C, before a match object is built.
    r"(?=[+(]?\d[\d ().\-]{9})"
    r"(?<![\w+.\-/])(?:\+\d{1,3}+[ .\-]?)?(?:\(\d{1,5}+\)[ .\-]?)?"
    r"\d{1,8}+(?:[ .\-]\d{1,8}+){0,5}+(?![\w\-]|\.\d)"
)
# Ten digits, at most two separators between two of them: the least a phone has. The
# search starts only on a digit after no digit (a match inside a run means one at its
# start). An ASCII text (most) asks its shape instead (shape.may_hold_phone).
_TEN_DIGITS = re.compile(r"\d(?<!\d\d)(?:[ ().\-]{0,2}+\d){9}")
_DOTTED_QUAD = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_ISO_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")
_DIGIT = re.compile(r"\d")
_GROUPS = re.compile(r"\d+")

# A quoted field and its string or integer value (JSON, or a Python dict's repr).
_FIELD = re.compile(
    r"""(["'])([A-Za-z][\w\-]{0,63}+)\1[ \t]*+:[ \t\n]*+"""
    r"""(?:"((?:[^"\\\n]|\\.){1,256}+)"|'([^'\\\n]{1,256}+)'|(-?\d{1,30}+)(?![\w.]))"""
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

IDENTIFYING_FIELDS: tuple[str, ...] = (
    "id",
    "number",
    "reference",
    "ref",
    "code",
    "email",
    "phone",
    "name",
    "confirmation",
    "pnr",
    "sku",
    "username",
    "handle",
    "iban",
    "account",
)
"""A field is identifying when its last word is one of these (``user_id``,
``flight_number``, ``booking_ref``, ``promo_code``, ``hotel_name``) or it is one."""

_NAME_FIELDS = frozenset({"name", "username", "handle"})


class Phone(NamedTuple):
    """A phone number: its digits (the key), the surface and where it is."""

    digits: str
    surface: str
    start: int


class FieldValue(NamedTuple):
    """A value under an identifying JSON field: ``key`` (case-folded value, the
    digits of a phone), ``type`` (the field's noun), ``surface``, ``start``, and
    whether it is a name (it goes into the name book)."""

    key: str
    type: str
    surface: str
    start: int
    is_name: bool


class TypedValues(NamedTuple):
    """What :func:`find_typed` found, and the ranges the word scanner must leave alone."""

    phones: tuple[Phone, ...]
    fields: tuple[FieldValue, ...]
    claimed: tuple[tuple[int, int], ...]
    """Sorted ``[start, end)`` ranges: phones, identifying values, numbers under
    fields that are not identifying."""


def field_noun(field: str) -> tuple[str, bool] | None:
    """``(type, is_name)`` of an identifying field, or None when it is not one.

    ``reservation_id`` -> ``reservation``; ``first_name`` -> ``name``;
    ``hotel_name`` -> ``hotel`` (the word before ``name`` types it when it is a
    head noun of :mod:`spanguard.streams.engine.names`).
    """
    words = [w for w in _CAMEL.sub("_", field).lower().replace("-", "_").split("_") if w]
    if not words or words[-1] not in IDENTIFYING_FIELDS:
        return None
    last = words[-1]
    if last in _NAME_FIELDS:
        return (words[-2] if len(words) > 1 and words[-2] in HEAD_NOUNS else "name"), True
    if last in {"email", "phone", "iban", "account"}:
        return last, False
    if last == "number" and len(words) > 1 and words[-2] == "phone":
        return "phone", False
    if len(words) > 1 and words[-2].isalpha():
        return words[-2], False
    return last, False


_NONE = TypedValues((), (), ())


def find_typed(text: str, shape: bytes | None = None) -> TypedValues:
    """Phone numbers and JSON field values of one text. ``shape`` is the text's
    :func:`~spanguard.streams.engine.shape.shape_of`, or None to skip the checks it
    allows (the same findings, slower)."""
    claimed: list[tuple[int, int]] = []
    fields: list[FieldValue] = []
    if ":" in text and ('"' in text or "'" in text):
        for match in _FIELD.finditer(text):
            group = 3 if match.group(3) is not None else 4 if match.group(4) is not None else 5
            value = match.group(group)
            start = match.start(group)
            noun = field_noun(match.group(2))
            if noun is None:
                if group == 5:
                    claimed.append((start, match.end(group)))
                continue
            type_, is_name = noun
            # "#W4018320" is the id W4018320, as the word scanner reads it in prose.
            stripped = value.strip() if is_name else value.strip().lstrip("#")
            if not stripped or not any(c.isalnum() for c in stripped):
                continue
            start += value.index(stripped)
            if type_ == "phone" and len(digits := "".join(_DIGIT.findall(stripped))) >= 7:
                key = digits
            else:
                key = stripped.casefold()
            fields.append(FieldValue(key, type_, stripped, start, is_name))
            claimed.append((start, start + len(stripped)))
    phones: list[Phone] = []
    # Most texts have no ten digits in a row: the shape says so without a regex, or
    # one scan that starts on a digit.
    ten = may_hold_phone(shape) if shape is not None else _TEN_DIGITS.search(text) is not None
    found = _PHONE.finditer(text) if ten else ()
    for match in found:
        surface = match.group()
        digits = "".join(_DIGIT.findall(surface))
        if not 10 <= len(digits) <= 13 or surface.isdecimal():
            continue
        # After a country code, every group has 2+ digits: "1 2 3 4 5" is a count.
        groups = _GROUPS.findall(surface)
        if any(len(group) < 2 for group in groups[1:]):
            continue
        if len(groups) == 2 and "." in surface and surface[0].isdigit():
            continue  # a decimal number ("12345678.90"), not a phone
        if _DOTTED_QUAD.fullmatch(surface) or _ISO_DATE.match(surface):
            continue
        start = match.start()
        end = match.end()
        if any(a <= start < b for a, b in claimed):
            continue
        phones.append(Phone(digits, surface, start))
        claimed.append((start, end))
    if not claimed:
        return _NONE
    claimed.sort()
    return TypedValues(tuple(phones), tuple(fields), tuple(claimed))
