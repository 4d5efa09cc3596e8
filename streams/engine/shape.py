"""A text's shape: one C pass over an ASCII text that answers the extractor's cheapest
questions before any regex runs. A regex call costs more to set up, and sre tests a
character class slower, than this whole pass; most texts of an agent's context need
no more than the shape to say "no upper-case code", "no phone", "no capitalised word
inside a sentence"."""

from __future__ import annotations

_PHONE_SEPARATORS = " ().-"
"""What may stand between two digits of a phone number (two at most, in a row)."""


def _shape_table() -> bytes:
    table = bytearray(b" " * 256)
    for byte in range(ord("A"), ord("Z") + 1):
        table[byte] = ord("A")
    for byte in range(ord("a"), ord("z") + 1):
        table[byte] = ord("a")
    for byte in range(ord("0"), ord("9") + 1):
        table[byte] = ord("0")
    for char in _PHONE_SEPARATORS:
        table[ord(char)] = ord("s")
    return bytes(table)


_SHAPE = _shape_table()


def shape_of(text: str) -> bytes | None:
    """``text`` with each ASCII capital as ``A``, small letter as ``a``, digit as ``0``,
    phone separator (``_PHONE_SEPARATORS``) as ``s`` and anything else as a blank,
    offsets kept; None for a text that is not ASCII (whose checks take the regex
    path)."""
    return text.encode("ascii").translate(_SHAPE) if text.isascii() else None


def may_hold_phone(shape: bytes) -> bool:
    """Whether the shaped text has ten digits in a row with at most two separators
    between each two, as a phone number's digits are (``typed_values._TEN_DIGITS``
    says the same): after three separators in a row are cut and the rest dropped,
    ten digits touch."""
    return b"0000000000" in shape.replace(b"sss", b" ").replace(b"s", b"")
