"""The shape's prechecks only skip work: with or without a shape, the same findings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spanguard.streams.engine import referents
from spanguard.streams.engine.names import scan_names
from spanguard.streams.engine.shape import shape_of
from spanguard.streams.engine.typed_values import find_typed

# Pieces that make phones, upper-case codes and capitalised words likely.
_PIECES = st.sampled_from(
    [
        "0",
        "1",
        "12",
        "555",
        "(",
        ")",
        "-",
        ".",
        " ",
        "  ",
        "+",
        "\n",
        "Acorn",
        "EZNVJAPG",
        "ABCDE",
        "AB",
        "is",
        "the",
        "Hotel",
        "a",
        "x",
        ":",
        '"phone": "',
        '"',
        "\u00e9",
        "Zo",
        "Quuxley",
    ]
)
_TEXTS = st.one_of(st.text(), st.lists(_PIECES, max_size=30).map("".join))


def test_the_shape_keeps_offsets_and_classes() -> None:
    assert shape_of("Ab9 -z,") == b"Aa0ssa "
    assert shape_of("caf\u00e9") is None


@given(_TEXTS)
@settings(max_examples=400, deadline=None)
def test_typed_values_and_names_are_the_same_with_or_without_the_shape(text: str) -> None:
    shape = shape_of(text)
    assert find_typed(text, shape) == find_typed(text, None)
    assert scan_names(text, shape) == scan_names(text, None)


@given(_TEXTS)
@settings(max_examples=400, deadline=None)
def test_upper_case_codes_are_the_same_with_or_without_the_shape(text: str) -> None:
    def codes(shape: bytes | None) -> list[referents.FoundIdentifier]:
        scanner = referents._Scanner(text, find_typed(text), referents._ANY_TEXT)
        scanner.scan()
        scanner.upper_codes(shape)
        return scanner.identifiers

    assert codes(shape_of(text)) == codes(None)
