"""The referent extractor: every contract rule, the seed-001 example, and its guarantees."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from spanguard.schemas import text_sha256
from spanguard.streams.engine import referents
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.holdings import HoldingsBuilder
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referents import (
    DETERMINERS,
    FILLER_WORDS,
    STOP_WORDS,
    VALUE_TYPES,
    Anaphor,
    Extraction,
    Identifier,
    extract,
)

CLASSES = {"email", "url", "path", "uuid", "code", "id"}


def idents(text: str) -> list[tuple[str, str, str, int]]:
    """(key, type, surface, start) of every identifier, in order."""
    return [(i.key, i.type, i.surface, i.start) for i in extract(text).identifiers]


def surfaces(text: str) -> list[str]:
    return [i.surface for i in extract(text).identifiers]


def anaphors(text: str, known: set[str]) -> list[tuple[str, str, int]]:
    """(type, surface, start) of every anaphor, in order."""
    return [(a.type, a.surface, a.start) for a in extract(text, frozenset(known)).anaphors]


# --- seed 001 -------------------------------------------------------------------


def test_seed_001_turn_12_introduces_the_account() -> None:
    assert extract("account 8841-C, the one flagged last week").identifiers == (
        Identifier(key="8841-c", type="account", surface="8841-C", start=8),
    )


def test_seed_001_turn_19_refers_to_it() -> None:
    turn_12 = extract("account 8841-C, the one flagged last week")
    known = {i.type for i in turn_12.identifiers}
    assert extract("did that account clear KYC?", known) == Extraction(
        identifiers=(),
        anaphors=(Anaphor(type="account", surface="that account", start=4),),
    )


def test_without_known_types_there_is_no_anaphor() -> None:
    assert extract("did that account clear KYC?").anaphors == ()


# --- identifiers: tokens mixing letters and digits ------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ticket INC-4411", [("inc-4411", "ticket", "INC-4411", 7)]),
        ("see ab12 now", [("ab12", "id", "ab12", 4)]),
        ("build_2024.rc1 failed", [("build_2024.rc1", "id", "build_2024.rc1", 0)]),
        ("release v1.2.3", [("v1.2.3", "release", "v1.2.3", 8)]),
        ("a-1 is three characters", [("a-1", "id", "a-1", 0)]),
    ],
)
def test_mixed_tokens(text: str, expected: list[tuple[str, str, str, int]]) -> None:
    assert idents(text) == expected


@pytest.mark.parametrize(
    ("text", "surface", "start"),
    [
        ("(8841-C)", "8841-C", 1),
        ("was it 8841-C.", "8841-C", 7),
        ('"8841-C",', "8841-C", 1),
        ("**8841-C**", "8841-C", 2),
        ("_8841-C_", "8841-C", 1),
        ("8841-C...", "8841-C", 0),
        ("is it 8841-C?!", "8841-C", 6),
    ],
)
def test_surrounding_punctuation_is_stripped(text: str, surface: str, start: int) -> None:
    assert [(i.surface, i.start) for i in extract(text).identifiers] == [(surface, start)]


def test_two_characters_are_not_enough() -> None:
    assert idents("a1 b2 x9") == []


def test_plain_words_are_not_identifiers() -> None:
    assert idents("The account was flagged last week by the vendor.") == []


def test_keys_are_casefolded_and_every_occurrence_is_kept() -> None:
    assert idents("INC-4411 then inc-4411 and Inc-4411") == [
        ("inc-4411", "id", "INC-4411", 0),
        ("inc-4411", "id", "inc-4411", 14),
        ("inc-4411", "id", "Inc-4411", 27),
    ]


def test_casefold_is_full_case_folding() -> None:
    assert idents("straße 8841-SS")[0][0] == "8841-ss"
    assert [i.key for i in extract("STRASSE1 straße1").identifiers] == ["strasse1", "strasse1"]


# --- identifiers: numbers after a noun -------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("order 55012", [("55012", "order", "55012", 6)]),
        ("Order 55012 shipped", [("55012", "order", "55012", 6)]),
        ("invoice: 0042", [("0042", "invoice", "0042", 9)]),
    ],
)
def test_number_after_a_noun(text: str, expected: list[tuple[str, str, str, int]]) -> None:
    assert idents(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "in 2024",  # two letters: not a noun
        "since 2024",  # a stop word
        "Nov 2026",  # a month: a date, not a noun
        "over 5000 users",  # a count
        "5000 users",  # nothing before it
        "order 123",  # fewer than four digits
        "number 55012",  # a filler is not a noun
        "order, 55012",  # punctuation separates them
        "order\n\n55012",  # so does a blank line
        "order 55,012",  # digits split by a comma are not one number
    ],
)
def test_numbers_that_are_not_identifiers(text: str) -> None:
    assert idents(text) == []


# --- the type ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "type_"),
    [
        ("order number 55012", "55012", "order"),
        ("order #55012", "55012", "order"),
        ("order # 55012", "55012", "order"),
        ("Order No. 55012", "55012", "order"),
        ("order no 55012", "55012", "order"),
        ("order nr 55012", "55012", "order"),
        ("order id: 55012", "55012", "order"),
        ("ticket ID INC-4411", "inc-4411", "ticket"),
        ("order ref no. 55012", "55012", "ref"),  # "ref" is a noun, the word just before
    ],
)
def test_filler_words_are_skipped(text: str, key: str, type_: str) -> None:
    assert [(i.key, i.type) for i in extract(text).identifiers] == [(key, type_)]


def test_hash_is_not_part_of_the_key() -> None:
    assert idents("order #55012") == [("55012", "order", "55012", 7)]


@pytest.mark.parametrize(
    ("text", "type_"),
    [
        ("account 8841-C", "account"),
        ("ACCOUNT 8841-C", "account"),
        ("account: 8841-C", "account"),
        ("account (8841-C)", "account"),
        ('account "8841-C"', "account"),
        ("account\n8841-C", "account"),  # one line break still joins them
        ("**account** 8841-C", "account"),
        ("счёт 8841-C", "счёт"),  # any alphabetic word
        ("from 8841-C", "id"),  # stop word
        ("the 8841-C", "id"),  # determiner
        ("in 8841-C", "id"),  # two letters
        ("v2 8841-C", "id"),  # not alphabetic
        ("account, 8841-C", "id"),  # a comma separates
        ("account. 8841-C", "id"),  # so does a full stop
        ("account\n\n8841-C", "id"),  # and a blank line
        ("account -8841-C", "id"),  # a glued sign is not a gap
    ],
)
def test_type_is_the_noun_just_before(text: str, type_: str) -> None:
    assert [i.type for i in extract(text).identifiers] == [type_]


def test_type_is_only_the_word_just_before() -> None:
    # "flagged" is the word just before; "account" two words back does not count.
    assert idents("account flagged 8841-C") == [("8841-c", "flagged", "8841-C", 16)]


def test_a_word_inside_a_url_is_not_a_noun() -> None:
    text = "https://x.org/?q=account 8841-C"
    assert [i.type for i in extract(text).identifiers] == ["url", "id"]


# --- e-mail, URL, path, UUID, code ---------------------------------------------------


def test_email() -> None:
    assert idents("mail Alice.Smith+tag@Example.co.uk.") == [
        ("alice.smith+tag@example.co.uk", "mail", "Alice.Smith+tag@Example.co.uk", 5)
    ]
    assert idents("from a1@b2.com") == [("a1@b2.com", "email", "a1@b2.com", 5)]


def test_email_parts_are_not_identifiers_of_their_own() -> None:
    assert surfaces("write to user42@host9.example.com today") == ["user42@host9.example.com"]


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("see https://example.org/cases/42", "https://example.org/cases/42"),
        ("(https://example.org/a).", "https://example.org/a"),
        ("https://en.wikipedia.org/wiki/Foo_(bar).", "https://en.wikipedia.org/wiki/Foo_(bar)"),
        ("<https://x.org/a?b=1&c=d2>", "https://x.org/a?b=1&c=d2"),
        ("www.example.com/x1, then", "www.example.com/x1"),
        ("ftp://files.example.org/v2/a.tgz", "ftp://files.example.org/v2/a.tgz"),
    ],
)
def test_url(text: str, surface: str) -> None:
    found = extract(text).identifiers
    assert [(i.surface, i.type, i.key) for i in found] == [(surface, "url", surface.casefold())]


def test_url_takes_the_noun_before_it() -> None:
    assert [i.type for i in extract("docs https://x.org/a").identifiers] == ["docs"]


@pytest.mark.parametrize(
    "surface",
    [
        "/var/log/app.log",
        "./src/main.py",
        "../src/main.py",
        "~/x/y",
        "src/streams/engine.py",
        "C:\\dir\\f.txt",
        "C:/dir/f.txt",
        "/etc/hosts",
        "/app.log",
        "~/.bashrc",
        "/var/log/app1.log",  # one path, not "app1" as well
    ],
)
def test_path(surface: str) -> None:
    assert idents(f"open {surface} now") == [(surface.casefold(), "open", surface, 5)]
    assert idents(f"in {surface}") == [(surface.casefold(), "path", surface, 3)]


@pytest.mark.parametrize("text", ["and/or", "TCP/IP", "km/h", "w/o", "/etc", "1/2", "24/7"])
def test_slashes_that_are_not_paths(text: str) -> None:
    assert idents(f"this is {text} ok") == []


def test_slash_separated_codes_are_separate_identifiers() -> None:
    assert idents("ticket INC-4411/INC-4412") == [
        ("inc-4411", "ticket", "INC-4411", 7),
        ("inc-4412", "id", "INC-4412", 16),
    ]


def test_uuid() -> None:
    uuid = "123E4567-e89b-12d3-a456-426614174000"
    assert idents(f"at {uuid}.") == [(uuid.casefold(), "uuid", uuid, 3)]
    assert idents(f"request {uuid}") == [(uuid.casefold(), "request", uuid, 8)]


def test_code_span() -> None:
    assert idents("at `Make Test` then") == [("make test", "code", "Make Test", 4)]
    assert idents("ran ` x1 `") == [("x1", "ran", "x1", 6)]


def test_code_span_parts_are_not_identifiers_of_their_own() -> None:
    assert surfaces("at `git checkout INC-4411 /var/log/a.log`") == [
        "git checkout INC-4411 /var/log/a.log"
    ]


def test_fences_and_empty_spans_are_not_code_identifiers() -> None:
    text = "at ```py\nx = 1\n``` and `` and ` ` and `"
    assert idents(text) == []


def test_code_in_a_fenced_block_is_still_scanned() -> None:
    assert surfaces("```\nticket INC-4411\n```") == ["INC-4411"]


# --- what is not an identifier --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # dates
        "2026-11-30",
        "30/11/2026",
        "11/30/26",
        "2026/11/30",
        "due 2026/11/30",
        "order 2026-11-30",
        "Nov 30",
        "30Nov2026",
        "Nov-30",
        "2026-Nov-30",
        "Q3-2026",
        "FY2026",
        "2026-W48",
        # times
        "10:30",
        "3pm",
        "10am",
        "10.30pm",
        "10:30:00Z",
        "at 2026-11-30T10:30:00.123+01:00",
        "2026-11-30 10:30",
        # ordinals
        "1st",
        "22nd",
        "3rd",
        "101th",
        # quantities
        "5GB",
        "100ms",
        "3x",
        "1000x",
        "10k",
        "2h",
        "1.5GB",
        "2-3x",
        "1h30m",
        "1990s",
        "1920x1080",
        "1e6",
        "2.5e-3",
        "10:30pm",
        # plain counts
        "5",
        "42 items",
        "3.14",
    ],
)
def test_not_identifiers(text: str) -> None:
    assert idents(f"the value {text} here") == []


def test_codes_that_look_a_little_like_quantities_are_identifiers() -> None:
    # Single-letter units only count after a small number; "0x" error codes are codes.
    assert surfaces("codes 8841C 1234B 0x80070005 k8s") == ["8841C", "1234B", "0x80070005", "k8s"]


def test_over_long_tokens_are_blobs() -> None:
    blob = "a1" * 200  # 400 characters, over the 256 cap
    assert idents(f"value {blob}") == []
    assert idents(f"value {blob[:256]}") == [(blob[:256], "value", blob[:256], 6)]


# --- anaphors ----------------------------------------------------------------------------


def test_each_determiner_opens_an_anaphor() -> None:
    for determiner in sorted(DETERMINERS):
        for spelled in (determiner, determiner.upper(), determiner.capitalize()):
            text = f"was {spelled} account ok"
            assert anaphors(text, {"account"}) == [("account", f"{spelled} account", 4)], text


@pytest.mark.parametrize("word", ["thee", "tame", "sam", "then", "than", "thesis", "sameness"])
def test_words_like_determiners_are_not(word: str) -> None:
    assert anaphors(f"{word} account", {"account"}) == []


def test_a_known_type_within_three_words() -> None:
    assert anaphors("the vendor case", {"case"}) == [("case", "the vendor case", 0)]
    assert anaphors("the big old account", {"account"}) == [("account", "the big old account", 0)]
    assert anaphors("the very big old account", {"account"}) == []


def test_the_same_old_account_is_one_anaphor() -> None:
    assert anaphors("is the same old account ok", {"account"}) == [
        ("account", "the same old account", 3)
    ]


def test_plural_is_normalised_to_the_known_spelling() -> None:
    assert anaphors("those accounts", {"account"}) == [("account", "those accounts", 0)]
    assert anaphors("these policies", {"policy"}) == [("policy", "these policies", 0)]
    assert anaphors("those boxes", {"box"}) == [("box", "those boxes", 0)]
    # A type introduced in the plural ("accounts 8841-C, 8842-D") is found from the singular.
    assert anaphors("that account", {"accounts"}) == [("accounts", "that account", 0)]


def test_case_insensitive() -> None:
    assert anaphors("THAT ACCOUNT", {"account"}) == [("account", "THAT ACCOUNT", 0)]


def test_followed_directly_by_an_identifier_it_introduces() -> None:
    assert anaphors("the account 8841-C", {"account"}) == []
    assert anaphors("the order number 55012", {"order"}) == []
    assert anaphors("that account: 8841-C", {"account"}) == []
    # Not directly: the comma separates them.
    assert anaphors("that account, 8841-C", {"account"}) == [("account", "that account", 0)]


def test_a_type_this_text_introduced_earlier_refers_inside_it() -> None:
    assert anaphors("account 8841-C was flagged; did that account clear?", {"account"}) == []
    assert anaphors("accounts 8841-C, 8842-D: those account holders", {"account"}) == []


def test_a_type_introduced_later_in_the_text_does_not_prevent_it() -> None:
    text = "did that account clear? account 9000-A did."
    assert anaphors(text, {"account"}) == [("account", "that account", 4)]


def test_an_earlier_identifier_of_another_type_does_not_prevent_it() -> None:
    assert anaphors("ticket INC-1; did that account clear?", {"account"}) == [
        ("account", "that account", 18)
    ]


def test_each_determiner_yields_at_most_one_anaphor() -> None:
    text = "that account case"
    assert anaphors(text, {"account", "case"}) == [("account", "that account", 0)]


def test_overlapping_phrases_each_count() -> None:
    text = "that ticket and this account"
    assert anaphors(text, {"account", "ticket"}) == [
        ("ticket", "that ticket", 0),
        ("account", "this account", 16),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "the same. account",  # punctuation ends the phrase
        "the same, account",
        "that\n\naccount",  # so does a blank line
        "x.that account",  # the determiner is glued to another token
        "https://x.org/that/account",  # inside a URL
        "`that account`",  # inside inline code
        "that vendor",  # not a known type
    ],
)
def test_not_anaphors(text: str) -> None:
    assert anaphors(text, {"account"}) == []


def test_a_falsy_container_skips_anaphors() -> None:
    assert extract("that account", set()).anaphors == ()


def test_known_types_are_asked_once_per_distinct_word() -> None:
    asked: list[object] = []

    class Known:
        def __contains__(self, item: object) -> bool:
            asked.append(item)
            return item == "account"

    result = extract("the account and the account and the same old account " * 50, Known())
    assert len(result.anaphors) == 150
    # "account" is found at once; "same" and "old" ask for each of their forms, once.
    assert asked == ["account", "same", "sames", "samees", "old", "olds", "oldes"]


# --- the public constants ---------------------------------------------------------------


def test_determiners_are_the_contracts() -> None:
    assert frozenset({"this", "that", "these", "those", "the", "said", "same"}) == DETERMINERS


def test_stop_words_hold_the_determiners_and_are_lower_case() -> None:
    assert DETERMINERS <= STOP_WORDS
    assert all(word == word.lower() for word in STOP_WORDS | FILLER_WORDS)


def test_blank_class_is_whitespace_without_newline() -> None:
    # Gaps allow one line break, so the blank class must be every other space.
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    expected = {c for c in everything if c.isspace()} - {"\n"}
    assert set(re.findall("[" + referents._BLANK + "]", everything)) == expected


# --- performance -------------------------------------------------------------------------


class _CountingPattern:
    """Stands in for a compiled pattern and counts the work done through it: calls,
    and the characters each call spans (from where it starts to where its match
    ends, or to the end of the text when nothing matched)."""

    def __init__(self, pattern: re.Pattern[str], tally: dict[str, int]) -> None:
        self._pattern = pattern
        self._tally = tally

    def _count(self, spanned: int) -> None:
        self._tally["calls"] += 1
        self._tally["chars"] += max(1, spanned)

    def search(self, text: str, pos: int = 0, *rest: int) -> re.Match[str] | None:
        found = self._pattern.search(text, pos, *rest)
        self._count((found.end() if found else rest[0] if rest else len(text)) - pos)
        return found

    def match(self, text: str, pos: int = 0, *rest: int) -> re.Match[str] | None:
        found = self._pattern.match(text, pos, *rest)
        self._count(found.end() - pos if found else 1)
        return found

    def fullmatch(self, text: str, *rest: int) -> re.Match[str] | None:
        self._count(len(text))
        return self._pattern.fullmatch(text, *rest)

    def finditer(self, text: str, *rest: int) -> Iterator[re.Match[str]]:
        self._count(len(text))
        return self._pattern.finditer(text, *rest)

    def split(self, text: str) -> list[str]:
        self._count(len(text))
        return self._pattern.split(text)


def _work(text: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    tally = {"calls": 0, "chars": 0}
    with monkeypatch.context() as patch:
        for name, value in vars(referents).items():
            if isinstance(value, re.Pattern):
                patch.setattr(referents, name, _CountingPattern(value, tally))
        extract(text, frozenset({"account"}))
    return tally


def _prose(size: int) -> str:
    sentence = (
        "The agent re-read ticket INC-4411 and the account 8841-C, ran `make test` in "
        "./src and read /var/log/app.log; that account was flagged on 2026-11-30 at 10:30, "
        "see https://example.org/cases/42 or mail ops@example.com about order 55012. "
    )
    return (sentence * (size // len(sentence) + 1))[:size]


@pytest.mark.parametrize(
    "unit",
    ["a", "1", "-", ".", "/", "@", "`", " ", "a1 ", "1:", "the ", "`a", "C:\\", "a-", "12345 "],
)
def test_work_is_linear_on_adversarial_input(unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Counting, not timing: 4x the input makes at most ~4x the pattern calls and
    # the calls span at most ~4x the characters (a quadratic rescan would show as
    # 16x). Counts need no clock, so a loaded machine cannot fail this test.
    small = _work(unit * (5_000 // len(unit)), monkeypatch)
    large = _work(unit * (20_000 // len(unit)), monkeypatch)
    for measure in ("calls", "chars"):
        assert large[measure] <= 4.2 * small[measure] + 10, (unit, measure, small, large)


def test_work_on_prose_is_linear_and_small(monkeypatch: pytest.MonkeyPatch) -> None:
    small = _work(_prose(25_000), monkeypatch)
    large = _work(_prose(100_000), monkeypatch)
    assert large["calls"] <= 4.2 * small["calls"] and large["chars"] <= 4.2 * small["chars"]
    # Plain words never reach Python: each text-wide pass (the trigger scan, determiner
    # phrases, sentence ends, upper-case codes) spans each character about once.
    assert large["chars"] < 6 * 100_000


def test_the_counter_sees_a_quadratic_rescan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check above can fail: a scan that restarts from the beginning every time
    # spans quadratically many characters.
    tally = {"calls": 0, "chars": 0}
    pattern = _CountingPattern(re.compile(r"a"), tally)
    for size in (100, 400):
        tally.update(calls=0, chars=0)
        text = "a" * size
        for _ in range(size):
            pattern.search(text, 0)
            pattern.fullmatch(text)
        if size == 100:
            small = dict(tally)
    assert tally["chars"] > 10 * small["chars"]


# --- properties --------------------------------------------------------------------------

# Text that is likely to hit the patterns: identifier characters, separators,
# determiners, nouns, unicode and control characters.
_PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "1",
        "42",
        "8841",
        "-",
        "_",
        ".",
        "/",
        "\\",
        "@",
        ":",
        "#",
        "`",
        "~",
        "+",
        "(",
        ")",
        " ",
        "\n",
        "\t",
        "account",
        "order",
        "number",
        "no.",
        "the",
        "That",
        "same",
        "https://",
        "www.",
        "C:\\",
        "ß",
        "İ",
        "\u00bd",
        "\u0301",
        "\x00",
        "\ud800",
        "\u2019",
    ]
)
_TEXT = st.one_of(st.text(), st.lists(_PIECES, max_size=40).map("".join))
_KNOWN = st.frozensets(st.sampled_from(["account", "order", "id", "code", "url", "a", "accounts"]))


@given(_TEXT, _KNOWN)
@settings(max_examples=400, deadline=None)
def test_extract_never_raises_and_is_deterministic(text: str, known: frozenset[str]) -> None:
    assert extract(text, known) == extract(text, set(known))


@given(_TEXT, _KNOWN)
@settings(max_examples=400, deadline=None)
def test_offsets_keys_and_order(text: str, known: frozenset[str]) -> None:
    result = extract(text, known)
    previous_end = 0
    for ident in result.identifiers:
        assert text[ident.start : ident.start + len(ident.surface)] == ident.surface
        assert ident.surface
        # The surface case-folded; a phone number's digits alone (contract 1.2).
        digits = "".join(c for c in ident.surface if c.isdigit())
        assert ident.key in (ident.surface.casefold(), digits)
        assert ident.key.casefold() == ident.key
        assert ident.start >= previous_end  # in order, never overlapping
        previous_end = ident.start + len(ident.surface)
        # A class, or a noun lower-cased (str.lower: "İ" becomes "i" plus a combining dot).
        assert ident.type in CLASSES or (
            ident.type == ident.type.lower()
            and len(ident.type) >= 3
            and ident.type not in STOP_WORDS
            and ident.type not in FILLER_WORDS
        )
    starts = [a.start for a in result.anaphors]
    assert starts == sorted(starts)
    for anaphor in result.anaphors:
        assert text[anaphor.start : anaphor.start + len(anaphor.surface)] == anaphor.surface
        assert anaphor.surface.split()[0].lower() in DETERMINERS
        assert anaphor.type in known


@given(_TEXT, _KNOWN)
@settings(max_examples=200, deadline=None)
def test_known_types_change_only_anaphors(text: str, known: frozenset[str]) -> None:
    assert extract(text, known).identifiers == extract(text).identifiers


_NOUN = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=3)
_CODE = st.from_regex(r"[A-Z]{2,4}-[0-9]{2,6}", fullmatch=True)


@given(_NOUN, _CODE)
@settings(max_examples=300, deadline=None)
def test_a_noun_types_the_code_after_it(noun: str, code: str) -> None:
    assume(surfaces(code) == [code])  # "NOV-30" or "CY-2026" are dates, not codes
    lowered = noun.lower()
    expected_type = "id" if lowered in STOP_WORDS or lowered in FILLER_WORDS else lowered
    if lowered in FILLER_WORDS:
        return  # fillers are skipped: nothing before them, so the class
    assert idents(f"{noun} {code}") == [(code.casefold(), expected_type, code, len(noun) + 1)]


@given(_NOUN.filter(lambda word: word.lower() not in STOP_WORDS | FILLER_WORDS | VALUE_TYPES))
@example("BiSTRO")  # a type word alone, in any case, is no name: it stays an anaphor
@settings(max_examples=200, deadline=None)
def test_that_plus_a_known_type_is_an_anaphor(noun: str) -> None:
    known = {noun.lower()}
    assert anaphors(f"did that {noun} clear?", known) == [(noun.lower(), f"that {noun}", 4)]
    assert anaphors(f"did that {noun} 8841-C clear?", known) == []


@given(_TEXT, _KNOWN, _KNOWN)
@settings(max_examples=300, deadline=None)
def test_one_scan_serves_every_known_types(
    text: str, known: frozenset[str], other: frozenset[str]
) -> None:
    # The engine keeps a text's scan (by its sha256) and asks it again for the
    # known types of a later moment: the same findings as extracting afresh.
    scan = referents.scan_text(text)
    for types in (known, other, frozenset()):
        fresh = extract(text, types)
        found = [(a.type, a.surface, a.start) for a in fresh.anaphors]
        assert [Identifier(*i) for i in scan.identifiers] == list(fresh.identifiers)
        assert (referents.find_anaphors(scan.phrases, types) if types else []) == found


def test_a_cached_scan_builds_the_same_holdings() -> None:
    settings_ = EngineSettings()
    cached, fresh = HoldingsBuilder(settings_), HoldingsBuilder(settings_)
    text = "account 8841-C is flagged; that ticket INC-4001 and those orders"
    digest = text_sha256(text)
    known: set[str] = set()
    first = cached.build("t", known, NameBook(), text, digest, None, None)
    known.update({"ticket", "orders"})
    assert cached.build("t", known, NameBook(), text, digest, None, None) == fresh.build(
        "t", known, NameBook(), text, digest, None, None
    )
    assert first != fresh.build("t", known, NameBook(), text, digest, None, None)  # anaphors


# The request rule as the contract words it, searched forwards in the characters
# before the determiner: the oracle for the engine's backward match.
_REQUEST_FORWARD = re.compile(
    r"(?<![\w'])(?i:what[ \t]*+(?:is|was|'s|\u2019s)|which[ \t]++is"
    r"|send|give|tell|get|have|need|know)"
    r"(?:[ \t]++(?i:me|us))?[ \t]++\Z"
)
_REQUEST_PIECES = st.sampled_from(
    [
        "what",
        "What",
        "WHAT",
        "which",
        "is",
        "was",
        "'s",
        "\u2019s",
        "send",
        "Give",
        "tell",
        "get",
        "have",
        "need",
        "know",
        "me",
        "US",
        "x",
        "'",
        "_",
        "\u00e9",
        " ",
        "  ",
        "\t",
        "\n",
        " " * 20,
    ]
)


@given(st.lists(_REQUEST_PIECES, max_size=12).map("".join), st.sampled_from(["the", "this"]))
@settings(max_examples=500, deadline=None)
def test_a_value_request_is_found_as_the_forward_rule_finds_it(before: str, det: str) -> None:
    text = f"{before}{det} phone number"
    start = len(before)
    expected = _REQUEST_FORWARD.search(text, max(0, start - 24), start) is not None
    phrases = [p for p in referents.scan_text(text).phrases if p[0] == start]
    assume(phrases)  # "whatthe": no determiner there
    assert phrases[0][3] == expected
