"""Deterministic referent extraction: identifiers a span introduces, anaphors it uses.

This module is the reference implementation of the "Referents" section of the
wire contract (``CONTRACT.md``). The service runs it on every span that carries
text, and clients may run the very same code, so its output is part of the
contract: the same text and the same ``known_types`` always give the same
:class:`Extraction`.

Design, and why:

* **Plain words never reach Python.** A trigger regex that starts with a plain
  character class (so sre skips letters and spaces in its fast loop) stops
  only where a candidate can be: a digit next to a letter, four digits, ``@``,
  a slash, a backtick, ``://``, a drive letter, ``www.``. From there the scan
  backs up to the start of that run of identifier characters and classifies
  it. The word before a candidate (its type) is read by matching forwards on
  a reversed copy of the text, so each look-back is bounded and local.
  Anaphors come from a second regex over determiners that captures the three
  words after each one; :func:`find_referents` runs it only when ``known_types``
  is non-empty, :func:`scan_text` always (its phrases serve any later
  ``known_types``: :func:`find_anaphors`).
* **Linear time, adversarial input included.** Every quantifier that can run
  long is possessive or bounded, each run of identifier characters is walked
  a bounded number of times, and look-backs and phrase windows are capped.
* **Pure and total.** Standard library only, no I/O, no state beyond the
  compiled patterns (and a memo of the spellings a type word may stand for).
  Any ``str`` (empty, control characters, lone surrogates, huge) is accepted;
  nothing raises.
* **Exact offsets.** For every identifier ``text[start:start + len(surface)]
  == surface`` and ``key == surface.casefold()``; every anaphor's surface also
  sits at its ``start``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Container, Iterable
from dataclasses import dataclass, fields
from functools import lru_cache
from operator import itemgetter
from typing import NamedTuple

from spanguard.streams.engine.ascii_regex import ascii_twin
from spanguard.streams.engine.names import (
    FoundName,
    NameBook,
    NameScan,
    distinctive_part,
    match_book,
    name_key,
    new_names,
    scan_names,
    value_words,
    word_set,
)
from spanguard.streams.engine.shape import shape_of
from spanguard.streams.engine.typed_values import TypedValues, find_typed
from spanguard.streams.engine.words import is_ordinary

__all__ = [
    "DETERMINERS",
    "FILLER_WORDS",
    "STOP_WORDS",
    "Anaphor",
    "Extraction",
    "FoundAnaphor",
    "FoundIdentifier",
    "Identifier",
    "Phrase",
    "PhraseWord",
    "Scan",
    "extract",
    "find_anaphors",
    "scan_text",
]


@dataclass(frozen=True, slots=True)
class Identifier:
    """An entity a span introduces (or repeats): an account number, an e-mail, a path...

    ``key`` is always ``surface.casefold()`` (raw; keyed hashing happens when
    it leaves the process). ``type`` is the noun just before the identifier,
    lower-cased (``account 8841-C`` -> ``account``), else the pattern's class:
    ``email``, ``url``, ``path``, ``uuid``, ``code`` or ``id``.
    ``text[start:start + len(surface)] == surface`` holds for the analysed text.
    """

    key: str
    type: str
    surface: str
    start: int


@dataclass(frozen=True, slots=True)
class Anaphor:
    """A definite reference to an entity introduced by another span (``that account``).

    ``type`` is spelled exactly as it is in the ``known_types`` passed to
    :func:`extract` (``those accounts`` with ``account`` known -> ``account``),
    so it can be looked up directly. ``surface`` runs from the determiner to
    the end of the type word and sits at ``start`` in the analysed text.
    """

    type: str
    surface: str
    start: int


@dataclass(frozen=True, slots=True)
class Name:
    """A name a span introduces or repeats (``Warkworth House``, ``the Acorn``).

    ``key`` is the name's words case-folded and joined by one space, without a
    leading determiner; for a repeat of a book entry it is the full name's key
    (``the Acorn`` -> ``acorn guest house``). ``type`` is its head noun, else
    ``name``. ``text[start:start + len(surface)] == surface``.
    """

    key: str
    type: str
    surface: str
    start: int


@dataclass(frozen=True, slots=True)
class Extraction:
    """Everything :func:`extract` found, each tuple in text order (ascending ``start``).

    A key may occur several times in ``identifiers`` or ``names``: every
    occurrence is kept.
    """

    identifiers: tuple[Identifier, ...]
    anaphors: tuple[Anaphor, ...]
    names: tuple[Name, ...] = ()


# A noun that typed an identifier: (lower-cased word, its start offset), or None.
_Typed = tuple[str, int] | None

DETERMINERS: frozenset[str] = frozenset({"this", "that", "these", "those", "the", "said", "same"})
"""Words that open a definite reference (an anaphor) when a known type follows them."""

FILLER_WORDS: frozenset[str] = frozenset({"number", "num", "nbr", "nr", "no", "id", "ids"})
"""Words skipped between a noun and its identifier (``order number 55012`` -> ``order``).

``#`` and ``No.`` are covered too: ``#`` is punctuation that may sit between a
noun and an identifier, and a filler may keep its abbreviation dot. A filler
is never a type itself, so ``number 55012`` alone is not an identifier.
"""

_MONTHS = (
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april "
    "june july august september october november december"
)
_WEEKDAYS = (
    "mon tue tues wed thu thur thurs fri sat sun "
    "monday tuesday wednesday thursday friday saturday sunday"
)

STOP_WORDS: frozenset[str] = frozenset(
    (
        # Function words: they precede identifiers all the time ("from 8841-C",
        # "with INC-4411") but never name the kind of thing the identifier is.
        "the this that these those said same and but nor for yet not any all each every "
        "some such only own very just also too than then thus there here where when which "
        "while whom whose what who why how was were are been being have has had having "
        "will would shall should can could may might must does did doing done get got gets "
        "into onto upon from with within without via per about above below across after "
        "again against along among around before behind beneath beside besides between "
        "beyond during except inside outside over under until till since through toward "
        "towards unto off out our ours your yours their theirs his her hers its him she "
        "they them you one ones other another more most less least few fewer many much "
        "both either neither whether because though although unless else once ever never "
        "always still yes okay please see use used using like plus minus times "
        # Quantity and time words: they precede plain counts and years ("over
        # 5000", "since 2024", "year 2024", "top 1000"), which are not identifiers.
        "approx approximately roughly nearly almost circa total top first last next past "
        "previous prior early late mid end ending start starting beginning year years "
        "month months week weeks day days hour hours minute minutes second seconds today "
        "tomorrow yesterday tonight ago " + _MONTHS + " " + _WEEKDAYS
    ).split()
)
"""Words that are never a type. Lower-case; matched after ``str.lower``.

It holds :data:`DETERMINERS`, common English function words, and words that
precede counts, years and dates (month and weekday names, ``since``,
``year``, ``over``...), so that ``since 2024`` or ``Nov 2026`` does not turn a
year into an identifier.
"""

# --- character classes -------------------------------------------------------
# An "atom" is a maximal run of identifier characters. Words, codes, e-mails
# and paths are all atoms; everything else (spaces, commas, quotes, colons,
# brackets...) separates them. The same class is used forwards and backwards,
# so both directions agree on where a word starts.
_ATOM = r"[\w.\-+@~/\\]"
_LETTER = r"[^\W\d_]"
# Unicode white space (str.isspace) except "\n", spelled out so that a gap can
# allow at most one line break: a blank line separates a noun from what follows.
_BLANK = "\t\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def _gap(extra: str) -> str:
    """A bounded, possessive gap of blanks and ``extra`` holding at most one line break."""
    chars = "[" + _BLANK + extra + "]"
    return chars + "{0,64}+(?:\n" + chars + "{0,64}+)?+"


# What may stand between a type noun and its identifier: blanks, "#" and "No:"
# style punctuation, opening brackets and quotes, markdown emphasis.
_TYPE_GAP = _gap("#:=(\\[{<\"'*“”\u2018\u2019«»„№")
# What may stand between the words of an anaphor phrase: blanks, quotes, emphasis.
_WORD_GAP = _gap("\"'*“”\u2018\u2019«»„")
# Stripped from the end of an atom before classification ("8841-C." -> "8841-C").
_STRIP = ".-+@~_/\\"
# Trailing characters stripped from a URL (sentence punctuation around a link).
_URL_TRAIL = ".,;:!?)]}*'\""

# Length caps. Beyond them a token is a blob (base64, minified data), not a
# referent; the caps also bound the work of every per-token regex.
_MAX_LONG = 2048  # URLs, paths, e-mails
_MAX_SHORT = 256  # codes and numbers
_MAX_FILLERS = 3  # "order ref no. 55012": enough for real text, and bounded

# --- what is not an identifier ------------------------------------------------
_MONTH_RE = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)


def _alternation(words: str) -> str:
    """A regex alternation of ``words`` as a trie, so sre tests one letter per level.

    A flat ``a|b|c...`` of eighty units costs a compare per unit at each try.
    """
    trie: _Trie = {}
    for word in words.split():
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # the word may end here

    def emit(node: _Trie) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        ends_here = "" in node
        if len(branches) == 1 and not ends_here:
            return branches[0]
        return "(?:" + "|".join(branches) + ")" + ("?" if ends_here else "")

    return emit(trie)


_Trie = dict[str, "_Trie"]

# Units that make a number a quantity at any size ("1500ms", "1000x", "1990s")...
_UNITS_ANY = _alternation(
    "ms us µs μs ns sec secs min mins hr hrs yr yrs mo mos wk wks day days "
    "kb mb gb tb pb kib mib gib tib pib kbps mbps gbps kbit mbit gbit "
    "hz khz mhz ghz px pt em rem vh vw dpi ppi fps rpm rps qps tps ops "
    "km cm mm nm kg mg lb lbs oz ft ml kw kwh mwh wh mah pct bn mn "
    "usd eur gbp jpy chf cny tok toks s x"
)
# ...and single letters that only do so after a small number ("10k", "2h",
# "5G"), because "8841C" or "1234B" is far more likely a code than a quantity.
_UNITS_SMALL = r"[kmbhdwygpt]"

# Tokens that mix letters and digits but are dates, times, ordinals or quantities.
# Digit runs are possessive: the units are tried once per run, not at every split.
_NOT_IDENTIFIER = re.compile(
    r"\d++(?:st|nd|rd|th)"  # ordinals: 1st, 22nd
    r"|\d{1,2}+(?:[:.]\d{2})?(?:am|pm|a\.m|p\.m)|\d{1,2}+h\d{2}"  # times: 3pm, 10.30am, 10h30
    r"|\d{1,2}+(?:[.,]\d++)?z"  # UTC seconds split off at ":" (the "00Z" of 10:30:00Z)
    r"|(?:\d++(?:[.,]\d++)?+-)?+"  # an optional range start: 2-3x
    r"(?:\d++(?:[.,]\d++)?+(?:" + _UNITS_ANY + r")"
    r"|\d{1,3}+(?:[.,]\d++)?+" + _UNITS_SMALL + r")++(?:(?<=[hm])\d{1,2}+)?"  # 1h30
    r"|\d++(?:\.\d++)?+e-?\d++"  # scientific notation: 1e6, 2.5e-3
    r"|[1-9]\d*+x\d++(?:x\d++)?"  # dimensions: 1920x1080
    r"|(?:\d{1,4}+[-./]?+)?+(?:" + _MONTH_RE + r")(?:[-./]?\d{1,4})?"  # 30Nov2026, Nov-30
    r"|(?:q[1-4]|h[12]|fy|cy)[-/]?\d{2,4}|\d{4}[-/]?(?:q[1-4]|h[12])|\d{4}-?w\d{1,2}",  # Q3-2026
    re.IGNORECASE,
)
# All-digit dates (the ISO form with "-" is caught earlier, as a stamp).
_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.](?:\d{4}|\d{2})")
_DATETIME = (
    r"\d{4}-\d{2}-\d{2}(?:[T\x20]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9}+)?)?"
    r"(?:Z|[+-]\d{2}(?::?\d{2})?)?)?(?!\w)"
)

NEVER_ANAPHOR_TYPES: frozenset[str] = frozenset({"id", "name"})
"""Pattern classes that no phrase refers to: ``the train ID`` or ``the name`` could
be any code or any name, so they bind nothing."""

VALUE_TYPES: frozenset[str] = word_set("phone reference number code postcode address")
"""Types of values people ask for: in a question (``what is the phone number?``)
a phrase naming one asks for a new value instead of referring to an old one."""

# The object of a value request: "what is", "which is", "send (me)", "give (me)",
# "tell", "get", "have", "need", "know" right before the determiner, within
# _REQUEST_REACH characters. Matched backwards, on the reversed text at the
# determiner: the common case fails on the first character, where a search of the
# characters before would try each of them.
_REQUEST_REVERSED = re.compile(
    r"[ \t]++(?:(?i:em|su)[ \t]++)?"
    r"(?i:(?:si|saw|s'|s\u2019)[ \t]*+tahw|si[ \t]++hcihw"
    r"|dnes|evig|llet|teg|evah|deen|wonk)"
    r"(?![\w'])"
)
_REQUEST_REACH = 24
_SENTENCE_END = re.compile(r"[.!?\n]")

AMOUNT_WORDS: frozenset[str] = word_set(
    "price prices cost costs total fare fares fee fees amount amounts balance sum charge",
    "charges payment payments rent salary budget deposit refund paid pay worth value",
    "subtotal tax tip",
)
"""Nouns that make the number after them an amount, not an identifier (``price 1268``)."""

CURRENCY_SIGNS = "$£€¥₹₩₽"
CURRENCY_WORDS: frozenset[str] = word_set(
    "dollar dollars usd eur euro euros gbp pound pounds quid bucks yen cad aud chf inr rupees"
)
"""Words after a number that make it an amount (``transfer 1600 dollars``)."""

_COMPOUND = re.compile(r"\d{1,4}+-([^\W\d_]{2,20}+)")
_HAS_LOWER = re.compile(r"[a-z]")
_UPPER_CODE = re.compile(r"[A-Z](?<![\w\-][A-Z])[A-Z]{4,31}+(?![\w\-])")
_UPPER_WORD_BEFORE = re.compile(r"(?<![\w\-])[A-Z]{2,}+[^\w\n]{1,3}+\Z")
_UPPER_WORD_AFTER = re.compile(r"[^\w\n]{1,3}+[A-Z]{2,}+(?![\w\-])")
_WORD_AFTER = re.compile(r"[ \t]{0,2}+([A-Za-z]{1,16}+)")

# --- what is one --------------------------------------------------------------
_EMAIL = re.compile(r"[\w.+\-]++@(?:[\w\-]++\.)++" + _LETTER + r"{2,}+")
_UUID = re.compile(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
)
_PATH_SEPARATORS = re.compile(r"[/\\]")
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}\Z")
_ALNUM = re.compile(r"[^\W_]")
_PART = re.compile(r"[\w.\-]+")  # the pieces of a non-path atom: split at @ + ~ / \
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(_LETTER)

# --- the scan -------------------------------------------------------------------
# Where a candidate may be: "@", a slash, a backtick, "://", a drive letter,
# "www.", four digits in a row, or a digit next to a letter (possibly through
# "._-": every token that mixes letters and digits has such a place). The
# pattern starts with a plain character class, so sre skips everything else
# in its fast loop; short plain numbers ("3", "10:30") never leave the C engine.
_TRIGGER = re.compile(
    r"[\d@/\\`:._\-](?:"
    r"(?<=[@/\\`])"
    r"|(?<=\d)(?:\d{3}|[._\-]*+" + _LETTER + r"|(?<=" + _LETTER + r"\d))"
    r"|(?<=" + _LETTER + r"[._\-])[._\-]*+\d"
    r"|(?<=:)(?://|(?<=[A-Za-z]:)[\\/])"
    r"|(?<=[Ww]{3}\.)"
    r")"
)
# The candidates, tried at the start of the atom that holds a trigger (or at
# the trigger itself for a backtick).
_CANDIDATE = re.compile(
    r"`(?:(?P<fence>`++)|(?P<code>[^`\n]{1,256}+)`)"
    r"|(?<!" + _ATOM + r")(?:"
    r"(?P<url>(?:[A-Za-z][A-Za-z0-9+.\-]{1,15}+://|[Ww]{3}\.)[^\s<>\"'`]++)"
    r"|(?P<winpath>[A-Za-z]:[\\/]" + _ATOM + r"*+)"
    r"|(?P<stamp>" + _DATETIME + r")"
    r"|(?P<atom>" + _ATOM + r"++)"
    r")"
)
_RUN = re.compile(_ATOM + r"*+")
# Matched on the reversed text at the reversed offset of a candidate: the gap
# before it, then (reversed) a word with its "_" emphasis or filler dot, which
# must not be glued to more identifier characters. Failing fast here keeps
# the common "no noun before this code" case cheap.
_BACK = re.compile(_TYPE_GAP + r"([._]*+)(" + _LETTER + r"{1,256}+)_*+(?!" + _ATOM + r")")
# A determiner and, in a look-ahead (phrases overlap: "that x and this y"), up
# to three words after it. A word is a \w run without its "_" emphasis;
# anything but a gap after a word ("the same. account") ends the phrase. The
# pattern starts with a plain class for speed, so the determiners are spelled
# out here; a test keeps them in step with DETERMINERS.
_PHRASE_WORD = _WORD_GAP + r"_*+([^\W_]{1,256}+(?:_++[^\W_]++)*+)_*+(?!\w)"
_PHRASE = re.compile(
    r"[TtSs](?<![\w.\-+@~/\\].)"
    r"(?:(?<=[Tt])(?i:h(?:ese|ose|is|at|e))|(?<=[Ss])(?i:a(?:id|me)))(?![\w.\-+@~/\\])"
    r"(?=" + _PHRASE_WORD + r"(?:" + _PHRASE_WORD + r"(?:" + _PHRASE_WORD + r")?)?)?"
)


@dataclass(frozen=True, slots=True)
class _Patterns:
    """The scan's regexes, as written (any text) or as ASCII twins (an ASCII text).

    Slots rather than a named tuple: the interpreter reads a slot fast, a named tuple's
    field through a descriptor call, and the scan reads these per candidate."""

    trigger: re.Pattern[str]
    candidate: re.Pattern[str]
    run: re.Pattern[str]
    back: re.Pattern[str]
    phrase: re.Pattern[str]
    request: re.Pattern[str]
    not_identifier: re.Pattern[str]


_ANY_TEXT = _Patterns(
    _TRIGGER, _CANDIDATE, _RUN, _BACK, _PHRASE, _REQUEST_REVERSED, _NOT_IDENTIFIER
)
_ASCII_TEXT = _Patterns(
    **{field.name: ascii_twin(getattr(_ANY_TEXT, field.name)) for field in fields(_Patterns)}
)


def extract(
    text: str, known_types: Container[str] = frozenset(), book: NameBook[str] | None = None
) -> Extraction:
    """Extract the identifiers, names and anaphors of one span's text.

    ``known_types`` are the entity types already introduced in the session by
    OTHER spans (as produced in ``Identifier.type`` and ``Name.type``). An
    anaphor is a determiner (:data:`DETERMINERS`) followed within three words
    by one of them, or by its simple plural or singular; the classes ``id``
    and ``name`` never are. It is dropped when the type word directly
    introduces an identifier (``the account 8841-C``), when this same text
    introduced that type earlier (the reference resolves inside the span), and
    when it asks for a new value (``send me the reference number``, ``what is
    the phone number?``). ``known_types`` only needs ``in``, which is asked
    once per distinct word and form; a falsy container skips the anaphor pass.

    ``book`` is the session's name book: names this text repeats are listed
    (under the full name's key), and this text's own names are added to it
    afterwards, so call ``extract`` once per text, in the session's order.

    Guarantees: deterministic; total (never raises on any ``str``); linear
    time in ``len(text)``; results in text order; offsets exact (see
    :class:`Identifier`).
    """
    scan = scan_text(text)
    anaphors = find_anaphors(scan.phrases, known_types) if known_types else []
    own = scan.names.names
    names = [Name(found.key, found.type, found.surface, found.start) for found in own]
    if book is not None:
        repeats = match_book(scan.names, text, book.get, book.firsts.__contains__)
        own, repeats = new_names(own, repeats)
        names = [Name(found.key, found.type, found.surface, found.start) for found in own]
        names.extend(Name(key, type_, text[start:end], start) for key, type_, start, end in repeats)
        names.sort(key=lambda name: name.start)
        book.learn(own, str)
    return Extraction(
        tuple(Identifier(*found) for found in scan.identifiers),
        tuple(Anaphor(*found) for found in anaphors),
        tuple(names),
    )


FoundIdentifier = tuple[str, str, str, int]
"""An :class:`Identifier`'s fields as a plain tuple: (key, type, surface, start)."""
FoundAnaphor = tuple[str, str, int]
"""An :class:`Anaphor`'s fields as a plain tuple: (type, surface, start)."""

PhraseWord = tuple[str, int, str, bool]
"""A word a determiner may name: (word, its start, the anaphor's surface up to it,
whether it typed an identifier of the same text)."""
Phrase = tuple[int, tuple[str, ...], tuple[PhraseWord, ...], bool, bool]
"""A determiner phrase outside URLs and code: (start, the types the text introduced
before it, its words in order, whether it is the object of a value request (``send
me the``), whether its sentence ends with ``?``)."""


class Scan(NamedTuple):
    """Everything extraction reads from one text, before ``known_types`` and the
    name book are asked: the identifiers, the determiner phrases and the names. A
    pure function of the text, so a caller may keep it per text (the engine does,
    keyed by the text's sha256) and find the anaphors for any ``known_types`` with
    :func:`find_anaphors`, and the book's names with
    :func:`spanguard.streams.engine.names.match_book`.

    Tuples of strings and numbers only: the garbage collector stops tracking them
    after its first look, so a cache of scans costs no collection time."""

    identifiers: tuple[FoundIdentifier, ...]
    phrases: tuple[Phrase, ...]
    names: NameScan


_START = itemgetter(3)  # a FoundIdentifier's start


def scan_text(text: str) -> Scan:
    """Identifiers, determiner phrases and names of one text (see :class:`Scan`)."""
    shape = shape_of(text)
    typed = find_typed(text, shape)
    scanner = _Scanner(text, typed, _ANY_TEXT if shape is None else _ASCII_TEXT)
    scanner.scan()
    scanner.add_typed(typed)
    scanner.upper_codes(shape)
    scanner.identifiers.sort(key=_START)
    names = _names(text, scanner, typed, shape)
    if names.names:
        scanner.type_sources.update(name.type_at for name in names.names if name.type_at >= 0)
    # An ASCII text's determiners are among its words (both split where letters and
    # digits end), so a text without one skips the phrase regex.
    if shape is None or not DETERMINERS.isdisjoint(names.folded):
        phrases = _phrases(text, scanner)
    else:
        phrases = ()
    return Scan(tuple(scanner.identifiers), phrases, names)


def _names(text: str, scanner: _Scanner, typed: TypedValues, shape: bytes | None) -> NameScan:
    """The text's names, without those inside identifiers, URLs and code, plus the
    names under JSON name fields."""
    found = scan_names(text, shape)
    if not found.names and not typed.fields:
        return found
    taken = _merged(
        [(start, start + len(surface)) for _, _, surface, start in scanner.identifiers]
        + scanner.opaque
        + list(typed.claimed)
    )
    kept = [
        name
        for name in found.names
        if not _overlaps(taken, name.start, name.start + len(name.surface))
    ]
    dropped = len(kept) < len(found.names)
    for value in typed.fields:
        if value.is_name:
            words = value_words(value.surface)
            if words:
                kept.append(
                    FoundName(
                        name_key(words),
                        value.type,
                        value.surface,
                        value.start,
                        tuple(part for part in (distinctive_part(words),) if part),
                    )
                )
    if not dropped and len(kept) == len(found.names):
        return found
    kept.sort(key=lambda name: name.start)
    return found._replace(names=tuple(kept))


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` ranges sorted and merged where they overlap (disjoint)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _overlaps(disjoint: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``[start, end)`` overlaps one of the ``disjoint`` sorted ranges: only
    the last one starting before ``end`` can."""
    at = bisect_right(disjoint, (end,)) - 1
    return at >= 0 and disjoint[at][1] > start


class _Scanner:
    """One forward pass over a text, collecting identifiers (per-call state)."""

    __slots__ = (
        "claimed",
        "floor",
        "floors",
        "identifiers",
        "opaque",
        "patterns",
        "reversed_text",
        "text",
        "type_sources",
    )

    def __init__(self, text: str, typed: TypedValues, patterns: _Patterns) -> None:
        self.text = text
        self.patterns = patterns
        # Phones and JSON values found first: the word scan leaves them alone.
        self.claimed = typed.claimed
        # Look-backs run forwards on the reversed text: regexes only match forwards.
        self.reversed_text = text[::-1]
        self.identifiers: list[FoundIdentifier] = []
        # Start offsets of nouns that typed an identifier: a determiner phrase
        # ending on one of them introduces an entity instead of referring to one.
        self.type_sources: set[int] = set()
        # URL and inline-code spans: opaque, so no determiner inside them counts.
        self.opaque: list[tuple[int, int]] = []
        # End of the latest non-atom candidate (URL, code, stamp...): no noun is
        # read from below it, e.g. from a URL's query string.
        self.floor = 0
        self.floors: list[int] = []  # every value the floor took, in order

    def scan(self) -> None:
        """Find every candidate in text order and classify it."""
        text = self.text
        reversed_text = self.reversed_text
        size = len(text)
        patterns = self.patterns
        search, candidate_at, run_at = (
            patterns.trigger.search,
            patterns.candidate.match,
            patterns.run.match,
        )
        claimed = self.claimed
        next_claimed = 0
        pos = 0  # everything before it is classified
        while (trigger := search(text, pos)) is not None:
            at = trigger.start()
            start = at
            if at and text[at] != "`" and _in_atom(text[at - 1]):
                # Back to the start of the atom that holds the trigger (a run of atom
                # characters, read forwards on the reversed text).
                run = run_at(reversed_text, size - at)
                assert run is not None  # an empty run matches too
                start = size - run.end()
            if claimed:
                while next_claimed < len(claimed) and claimed[next_claimed][1] <= start:
                    next_claimed += 1
                if next_claimed < len(claimed) and claimed[next_claimed][0] <= start:
                    pos = max(claimed[next_claimed][1], at + 1)
                    continue
            match = candidate_at(text, start) if start >= pos else None
            if match is None:
                # Candidates only start where an atom starts, so the rest of this
                # atom (if the trigger is in one) cannot hold another: skip it.
                # That also keeps a long atom from being walked back over twice.
                run = run_at(text, at)
                assert run is not None
                pos = max(at + 1, run.end())
            elif match.lastgroup == "atom":
                pos = match.end()
                self.atom(match.group(), start)
            else:
                pos = max(match.end(), at + 1)
                self.candidate(match)

    def candidate(self, match: re.Match[str]) -> None:
        """Record what one non-atom candidate (code, URL, drive path, stamp) introduces."""
        kind = match.lastgroup
        start = match.start()
        if kind == "code":
            content = match.group("code")
            surface = content.strip()
            if surface:
                offset = match.start("code") + len(content) - len(content.lstrip())
                self.add(surface, offset, "code", self.noun_before(start))
            self.opaque.append((start, match.end()))
        elif kind == "url":
            surface = _trim_url(match.group())
            # A URL needs something after its scheme or "www." to point at.
            scheme = surface.find("://")
            after_prefix = scheme + 3 if scheme >= 0 else 4
            if len(surface) <= _MAX_LONG and _ALNUM.search(surface, after_prefix):
                self.add(surface, start, "url", self.noun_before(start))
            self.opaque.append((start, match.end()))
        elif kind == "winpath":
            surface = match.group().rstrip(_STRIP)
            if len(surface) <= _MAX_LONG and _ALNUM.search(surface, 3):
                self.add(surface, start, "path", self.noun_before(start))
        self.floor = match.end()
        self.floors.append(self.floor)

    def add_typed(self, typed: TypedValues) -> None:
        """Add the phones (typed by the noun before them, else ``phone``) and the
        identifying JSON values that are not names."""
        for digits, surface, start in typed.phones:
            self.floor_at(start)
            typed_by = self.noun_before(start)
            self.identifiers.append(
                (digits, "phone" if typed_by is None else typed_by[0], surface, start)
            )
            if typed_by is not None:
                self.type_sources.add(typed_by[1])
        for value in typed.fields:
            if not value.is_name:
                self.identifiers.append((value.key, value.type, value.surface, value.start))

    def upper_codes(self, shape: bytes | None) -> None:
        """Upper-case codes of 5+ letters (``EZNVJAPG``) that are not ordinary words,
        in a text with lower-case letters, not beside another upper-case word."""
        text = self.text
        if shape is not None and b"AAAAA" not in shape:
            return  # no five capitals in a row
        if not _HAS_LOWER.search(text):
            return
        taken: list[tuple[int, int]] | None = None
        for match in _UPPER_CODE.finditer(text):
            code = match.group()
            start = match.start()
            if is_ordinary(code):
                continue
            before = _UPPER_WORD_BEFORE.search(text, max(0, start - 8), start)
            after = _UPPER_WORD_AFTER.match(text, match.end())
            if before is not None or after is not None:
                continue  # shouting
            if taken is None:
                taken = _merged(
                    [(a, a + len(surface)) for _, _, surface, a in self.identifiers]
                    + self.opaque
                    + list(self.claimed)
                )
            if _overlaps(taken, start, match.end()):
                continue
            self.floor_at(start)
            self.add(code, start, "id", self.noun_before(start))

    def floor_at(self, pos: int) -> None:
        """Set the floor as the forward scan had it at ``pos`` (for values added after it)."""
        at = bisect_right(self.floors, pos) - 1
        self.floor = self.floors[at] if at >= 0 else 0

    def atom(self, atom: str, start: int) -> None:
        """Turn one atom that holds a trigger into identifiers (e-mail, path, uuid, codes)."""
        token = atom.rstrip(_STRIP)
        if not token or len(token) > _MAX_LONG:
            return
        if token.isdecimal():  # the most common candidate: a number, maybe "order 55012"
            self.part(token, start, start, may_type=True)
            return
        if 6 <= len(token) <= 10 and token[0].isdecimal() and _DATE.fullmatch(token):
            return
        if "@" not in token and "/" not in token and "\\" not in token and "+" not in token:
            # One part (the common case): skip the splitting below.
            surface = token.strip("._-~")
            offset = start + token.index(surface) if surface else start
            if surface and "~" not in surface and not _is_uuid(surface):
                self.part(surface, offset, start, may_type=not token[: offset - start].strip("_"))
                return
        # Leading "." and "~" matter for paths ("./x", "~/x"), so the core
        # without leading punctuation is only used for the other classes.
        lead = len(token) - len(token.lstrip(".-+~"))
        core = token[lead:]
        if "@" in core and _EMAIL.fullmatch(core):
            self.add(core, start + lead, "email", None if lead else self.noun_before(start))
            return
        if ("/" in token or "\\" in token) and _is_path(token):
            self.add(token, start, "path", self.noun_before(start))
            return
        if "-" in core and _is_uuid(core):
            self.add(core, start + lead, "uuid", None if lead else self.noun_before(start))
            return
        # Anything else is split at @ + ~ / \ into parts; each may be a code or
        # a number. Only the first part can take a type: the word before a
        # later part is glued to it by a separator, not followed by it.
        first = True
        for part_match in _PART.finditer(token):
            part = part_match.group()
            surface = part.strip("._-")
            if surface:
                offset = start + part_match.start() + part.index(surface)
                may_type = first and not token[: offset - start].strip("_")
                self.part(surface, offset, start, may_type=may_type)
                first = False

    def part(self, surface: str, offset: int, atom_start: int, *, may_type: bool) -> None:
        """One piece of an atom: a code mixing letters and digits, or a named number."""
        if len(surface) > _MAX_SHORT:
            return
        if surface.isdecimal():
            # A bare number is a count unless a noun names it ("order 55012"), and an
            # amount when money is named around it ("price 1268", "$1600", "1600 dollars").
            if len(surface) >= 4 and may_type:
                typed = self.noun_before(atom_start)
                if (
                    typed is not None
                    and typed[0] not in AMOUNT_WORDS
                    and not self.is_money(atom_start, offset + len(surface))
                ):
                    self.add(surface, offset, "id", typed)
        elif (
            len(surface) >= 3
            and _mixes_digits_and_letters(surface)
            and not self.patterns.not_identifier.fullmatch(surface)
            and not _is_compound(surface)
        ):
            self.add(surface, offset, "id", self.noun_before(atom_start) if may_type else None)

    def is_money(self, start: int, end: int) -> bool:
        """A currency sign just before, or a currency word just after, the number."""
        text = self.text
        before = text[max(0, start - 2) : start].rstrip()
        if before and before[-1] in CURRENCY_SIGNS:
            return True
        after = _WORD_AFTER.match(text, end)
        return after is not None and after.group(1).lower() in CURRENCY_WORDS

    def add(self, surface: str, start: int, fallback: str, typed: _Typed) -> None:
        """Record an identifier, typed by its noun when there is one."""
        if typed is None:
            self.identifiers.append((surface.casefold(), fallback, surface, start))
        else:
            self.identifiers.append((surface.casefold(), typed[0], surface, start))
            self.type_sources.add(typed[1])

    def noun_before(self, pos: int) -> _Typed:
        """The type noun just before ``pos`` (lower-cased) and its start, or None.

        Reads backwards over an allowed gap (blanks, ``#``, ``:``...; at most
        one line break) and the word before it, skipping up to
        :data:`_MAX_FILLERS` filler words. Never reads below :attr:`floor`.
        Cost: bounded by the gap and word caps.
        """
        size = len(self.text)
        back = self.patterns.back.match
        for _ in range(_MAX_FILLERS + 1):
            found = back(self.reversed_text, size - pos)
            if found is None or size - found.end() < self.floor:
                return None
            tail, reversed_word = found.group(1, 2)
            word = reversed_word[::-1]
            if not word.isalpha():
                return None  # a letter-like numeric character ("½"): not a word
            lowered = word.lower()
            if lowered in FILLER_WORDS and (tail == "." or not tail.strip("_")):
                pos = size - found.end()  # "order no. 55012": keep looking for the noun
                continue
            if len(word) < 3 or lowered in STOP_WORDS or tail.strip("_"):
                return None
            return lowered, size - found.end(2)
        return None


def _is_compound(surface: str) -> bool:
    """A number-word compound (``4-star``, ``24-hour``, ``3-night``): a rating or a
    duration, not an identifier."""
    if not surface[0].isdecimal() or "-" not in surface:
        return False  # what _COMPOUND would say, without a regex call
    match = _COMPOUND.fullmatch(surface)
    return match is not None and is_ordinary(match.group(1))


# The prechecks below answer the common case with a str method where a regex call
# (whose set-up alone costs more than the method) would say the same.
_ATOM_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+@~/\\")


def _in_atom(char: str) -> bool:
    """Whether ``char`` is an atom character (``_ATOM``: ``\\w`` is ``isalnum`` or ``_``)."""
    return char in _ATOM_ASCII or (not char.isascii() and char.isalnum())


def _is_uuid(surface: str) -> bool:
    return len(surface) == 36 and _UUID.fullmatch(surface) is not None


def _mixes_digits_and_letters(surface: str) -> bool:
    """Whether ``surface`` holds a digit (``\\d``) and a letter (``_LETTER``)."""
    if surface.isascii():
        return any(map(str.isdigit, surface)) and any(map(str.isalpha, surface))
    return _HAS_DIGIT.search(surface) is not None and _HAS_LETTER.search(surface) is not None


def _is_path(token: str) -> bool:
    """Whether an atom with a ``/`` or ``\\`` is a file-system path.

    Anchored forms (``./``, ``../``, ``~/``) need only a name after the anchor;
    absolute ones (``/x``) need two segments or a file extension, so that
    ``/s`` (as in ``km /s``) is not one; relative ones need a file extension on
    the last segment, so that ``and/or`` or ``TCP/IP`` are not paths.
    """
    if token.startswith(("./", "../", "~/", ".\\", "..\\", "~\\")):
        return _ALNUM.search(token) is not None
    segments = _PATH_SEPARATORS.split(token)
    if token[0] in "/\\":
        named = [segment for segment in segments if segment]
        return (
            bool(named)
            and _HAS_LETTER.search(token) is not None
            and (len(named) >= 2 or _FILE_EXTENSION.search(named[-1]) is not None)
        )
    return segments[0] != "" and _FILE_EXTENSION.search(segments[-1]) is not None


def _trim_url(url: str) -> str:
    """Strip sentence punctuation after a URL, keeping balanced closing brackets.

    ``(see https://x.org/a)`` drops the ``)``; ``https://x.org/Foo_(bar)`` keeps it.
    Counts are kept incrementally: a run of closing brackets stays linear.
    """
    opened = {")": url.count("("), "]": url.count("["), "}": url.count("{")}
    closed = {")": url.count(")"), "]": url.count("]"), "}": url.count("}")}
    end = len(url)
    while end and url[end - 1] in _URL_TRAIL:
        char = url[end - 1]
        if char in closed:
            if closed[char] <= opened[char]:
                break
            closed[char] -= 1
        end -= 1
    return url[:end]


@lru_cache(maxsize=8192)
def _type_forms(word: str) -> tuple[str, ...]:
    """The spellings a type word may stand for: itself, then singulars, then plurals.

    Both directions, because a type is spelled as it was introduced:
    ``accounts 8841-C, 8842-D`` introduces ``accounts``, and a later
    ``that account`` should still find it.
    """
    forms = [word]
    if word.endswith("ies") and len(word) > 4:
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    forms.append(word + "s")
    forms.append(word + "es")
    if word.endswith("y"):
        forms.append(word[:-1] + "ies")
    return tuple(forms)


def _phrases(text: str, scanner: _Scanner) -> tuple[Phrase, ...]:
    """The determiner phrases of a scanned text, with what the anaphor rules read of
    the text itself (see :func:`extract` for the rules)."""
    identifiers = scanner.identifiers
    opaque = scanner.opaque
    type_sources = scanner.type_sources
    reversed_text = scanner.reversed_text
    size = len(text)
    phrases: list[Phrase] = []
    introduced: dict[str, None] = {}  # types this text introduced before the current determiner
    introduced_now: tuple[str, ...] = ()
    next_identifier = 0
    next_opaque = 0
    # Where each sentence ends, to tell a question ("what is the phone number?").
    end_at = -1  # where the sentence of the latest phrase ends (-1: not looked up yet)
    request_at_reversed = scanner.patterns.request.match
    for phrase in scanner.patterns.phrase.finditer(text):
        start = phrase.start()
        while next_opaque < len(opaque) and opaque[next_opaque][1] <= start:
            next_opaque += 1
        if next_opaque < len(opaque) and opaque[next_opaque][0] <= start:
            continue
        grew = False
        while next_identifier < len(identifiers) and identifiers[next_identifier][3] < start:
            introduced[identifiers[next_identifier][1]] = None
            next_identifier += 1
            grew = True
        if grew:
            introduced_now = tuple(introduced)
        words: list[PhraseWord] = []
        for group, word in enumerate(phrase.groups(), 1):
            if word is None:
                break
            word_start, word_end = phrase.span(group)
            words.append((word, word_start, text[start:word_end], word_start in type_sources))
        request_at = size - start
        request = request_at_reversed(reversed_text, request_at)
        if request is not None and request.end() - request_at > _REQUEST_REACH:
            request = None
        if end_at < start:
            found = _SENTENCE_END.search(text, start)
            end_at = found.start() if found is not None else len(text)
        question = end_at < len(text) and text[end_at] == "?"
        phrases.append((start, introduced_now, tuple(words), request is not None, question))
    return tuple(phrases)


def find_anaphors(phrases: Iterable[Phrase], known_types: Container[str]) -> list[FoundAnaphor]:
    """The anaphors among a text's determiner phrases (from :func:`scan_text`) for
    ``known_types``: what :func:`find_referents` returns second."""
    if not phrases:
        return []
    anaphors: list[FoundAnaphor] = []
    # Per call: a word's known spelling and its forms. Container lookups may be
    # costly (the engine hashes types), so each distinct word asks only once.
    lookups: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    # "the same old account" has two determiners but one referent: a type word
    # examined by one determiner is not examined again by a later one.
    claimed = -1
    for start, introduced, words, request, question in phrases:
        if request:
            continue  # "send me the reference number" asks for a new value
        for word, word_start, surface, typed_an_identifier in words:
            lookup = lookups.get(word)
            if lookup is None:
                forms = _type_forms(word.lower())
                spelling: str | None = None
                for form in forms:
                    if form not in NEVER_ANAPHOR_TYPES and form in known_types:
                        spelling = form
                        break
                lookup = lookups[word] = (spelling, forms)
            known, forms = lookup
            if known is not None:
                if word_start != claimed:
                    claimed = word_start
                    if (
                        not typed_an_identifier
                        and not any(map(introduced.__contains__, forms))
                        and not (question and known in VALUE_TYPES)
                    ):
                        anaphors.append((known, surface, start))
                break
    return anaphors
