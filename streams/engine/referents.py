"""Deterministic referent extraction: identifiers a span introduces, anaphors it uses.

This module is the reference implementation of the "Referents" section of the
wire contract (``CONTRACT.md``). The service runs it on every span that carries
text, and clients may run the very same code, so its output is part of the
contract: the same text and the same ``known_types`` always give the same
:class:`Extraction`, on every platform and Python version we support.

Design, and why:

* **One scan, no per-word Python.** A single compiled regex visits the text
  once and only stops (into Python) on *candidates*: inline code, URLs,
  Windows paths, date/time stamps, and runs of identifier characters that hold
  a digit, ``@``, ``/`` or ``\\``. Plain words never reach Python; the word
  before a candidate (its type) is read backwards from a reversed copy of the
  text, so each look-back is bounded and local. Anaphors are found by a second
  regex over determiners, which only runs when ``known_types`` is non-empty.
  Every quantifier that can run long is possessive, bounded, or guaranteed to
  consume what it scans, so time is linear in the text length, even for
  adversarial input (one 100 KB word, 100 KB of digits or punctuation).
* **Pure and total.** Standard library only, no I/O, no global state beyond
  the compiled patterns. Any ``str`` (empty, control characters, lone
  surrogates, huge) is accepted; nothing raises.
* **Exact offsets.** For every identifier ``text[start:start + len(surface)]
  == surface`` and ``key == surface.casefold()``; for every anaphor the same
  offset guarantee holds for its surface.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container
from dataclasses import dataclass

__all__ = [
    "DETERMINERS",
    "FILLER_WORDS",
    "STOP_WORDS",
    "Anaphor",
    "Extraction",
    "Identifier",
    "extract",
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

    ``type`` is spelled exactly as it appears in the ``known_types`` passed to
    :func:`extract` (``those accounts`` with ``account`` known -> ``account``),
    so it can be looked up directly. ``surface`` runs from the determiner to
    the end of the type word and sits at ``start`` in the analysed text.
    """

    type: str
    surface: str
    start: int


@dataclass(frozen=True, slots=True)
class Extraction:
    """Everything :func:`extract` found, each tuple in text order (ascending ``start``).

    A key may occur several times in ``identifiers`` (each occurrence is kept,
    so callers can tell "introduced" from "repeated" by position).
    """

    identifiers: tuple[Identifier, ...]
    anaphors: tuple[Anaphor, ...]


# A noun that typed an identifier: (lower-cased word, its start offset).
_Typed = tuple[str, int] | None
# The callbacks extract() hands to _classify_atom: look up a type, record an identifier.
_TypeOf = Callable[[int], _Typed]
_Add = Callable[[str, int, str, _Typed], None]

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
_WEEKDAYS = "mon tue tues wed thu thur thurs fri sat sun monday tuesday wednesday thursday friday"

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
        "approx approximately roughly nearly almost circa around total totally top first "
        "last next past previous prior early late mid end ending start starting beginning "
        "year years month months week weeks day days hour hours minute minutes second "
        "seconds today tomorrow yesterday tonight ago "
        + _MONTHS
        + " "
        + _WEEKDAYS
        + " saturday sunday"
    ).split()
)
"""Words that are never a type. Lower-case; matched after ``str.lower``.

It contains :data:`DETERMINERS`, common English function words, and words
that precede counts, years and dates (month and weekday names, ``since``,
``year``, ``over``...), so that ``since 2024`` or ``Nov 2026`` does not turn a
year into an identifier.
"""

# --- character classes -------------------------------------------------------
# An "atom" is a maximal run of identifier characters. Words, codes, e-mails and
# paths are all atoms; everything else (spaces, commas, quotes, colons,
# brackets...) separates them. The same class is used forwards (scan) and
# backwards (look-back), so both directions agree on where a word starts.
_ATOM = r"[\w.\-+@~/\\]"
# What may stand between a type noun and its identifier: spaces, "#" and "No:"
# style punctuation, opening brackets and quotes, markdown emphasis.
_TYPE_GAP = r"[\s#:=(\[{<\"'*“”‘’«»„№]"
# What may stand between the words of an anaphor phrase: spaces, quotes, emphasis.
_WORD_GAP = r"[\s\"'*“”‘’«»„]"
# Stripped from both ends of an atom before classification ("8841-C." -> "8841-C").
_STRIP = ".-+@~_/\\"
# Trailing characters stripped from a URL (sentence punctuation around a link).
_URL_TRAIL = ".,;:!?)]}*'\""

# Length caps. Beyond them a token is a blob (base64, minified data), not a
# referent; the caps also bound the work of every per-token regex.
_MAX_LONG = 2048  # URLs, paths, e-mails
_MAX_SHORT = 256  # codes, numbers, inline code content, look-back windows
_MAX_FILLERS = 3  # "order ref no. 55012": enough for real text, and bounded

_MONTH_RE = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
# Units that make a number a quantity at any size ("1500ms", "3x", "1990s")...
_UNITS_ANY = (
    r"ms|us|µs|μs|ns|sec|secs|min|mins|hr|hrs|yr|yrs|mo|mos|wk|wks|day|days"
    r"|kb|mb|gb|tb|pb|kib|mib|gib|tib|pib|kbps|mbps|gbps|kbit|mbit|gbit"
    r"|hz|khz|mhz|ghz|px|pt|em|rem|vh|vw|dpi|ppi|fps|rpm|rps|qps|tps|ops"
    r"|km|cm|mm|nm|kg|mg|lb|lbs|oz|ft|ml|kw|kwh|mwh|wh|mah|pct|bn|mn"
    r"|usd|eur|gbp|jpy|chf|cny|tok|toks|s|x"
)
# ...and single letters that only do so after a small number ("10k", "2h",
# "5G"), because "8841C" or "1234B" is far more likely a code than 8841 °C.
_UNITS_SMALL = r"[kmbhdwygpt]"

# Mixed letter/digit tokens that are dates, times, ordinals or quantities.
_NOT_IDENTIFIER = re.compile(
    r"\d+(?:st|nd|rd|th)"  # ordinals: 1st, 22nd
    r"|\d{1,2}(?:[:.]\d{2})?(?:am|pm|a\.m|p\.m)|\d{1,2}h\d{2}"  # times: 3pm, 10.30am, 10h30
    r"|(?:\d+(?:[.,]\d+)?-)?"  # an optional range start: 2-3x
    r"(?:\d+(?:[.,]\d+)?(?:" + _UNITS_ANY + r")|\d{1,3}(?:[.,]\d+)?" + _UNITS_SMALL + r")++\d*"
    r"|\d+(?:\.\d+)?e-?\d+"  # scientific notation: 1e6, 2.5e-3
    r"|[1-9]\d*x\d+(?:x\d+)?"  # dimensions: 1920x1080
    r"|(?:\d{1,4}[-./]?)?(?:" + _MONTH_RE + r")(?:[-./]?\d{1,4})?"  # 30Nov2026, Nov-30
    r"|(?:q[1-4]|h[12]|fy|cy)[-/]?\d{2,4}|\d{4}[-/]?(?:q[1-4]|h[12])|\d{4}-?w\d{1,2}",  # Q3-2026
    re.IGNORECASE,
)
# All-digit dates; the stamp pattern below catches the ISO form first.
_DATE = re.compile(
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.](?:\d{4}|\d{2})",
)
_EMAIL = re.compile(r"[\w.+\-]++@(?:[\w\-]++\.)++[^\W\d_]{2,}+")
_UUID = re.compile(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
)
_PATH_SEPARATORS = re.compile(r"[/\\]")
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}\Z")
_ALNUM = re.compile(r"[^\W_]")
_PART = re.compile(r"[\w.\-]+")  # the pieces of a non-path atom: split at @ + ~ / \
_IS_ATOM_CHAR = re.compile(_ATOM)

_DATETIME = (
    r"\d{4}-\d{2}-\d{2}(?:[T\x20]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9}+)?)?"
    r"(?:Z|[+-]\d{2}(?::?\d{2})?)?)?(?!\w)"
)
_TIME = r"\d{1,2}+:\d{2}(?::\d{2}(?:[.,]\d{1,9}+)?)?(?:\x20?[AaPp]\.?[Mm]\.?|Z)?(?!\w)"

# The one forward scan. Alternatives that do not start with a backtick share a
# single look-behind, so inside a word every position fails in O(1); at a word
# start the atom alternative's lazy look-ahead scans that word once.
_SCAN = re.compile(
    r"`(?:(?P<fence>`++)|(?P<code>[^`\n]{1,256}+)`)"
    r"|(?<!" + _ATOM + r")(?:"
    r"(?P<url>(?:[A-Za-z][A-Za-z0-9+.\-]{1,15}+://|[Ww]{3}\.)[^\s<>\"'`]++)"
    r"|(?P<winpath>[A-Za-z]:[\\/]" + _ATOM + r"*+)"
    r"|(?P<stamp>" + _DATETIME + r"|" + _TIME + r")"
    r"|(?P<atom>(?=" + _ATOM + r"*?[\d@/\\])" + _ATOM + r"++)"
    r")"
)
# Matched against the reversed text at the reversed offset of a candidate: the
# gap before it, then the atom before that gap (both reversed).
_BACK = re.compile(r"(" + _TYPE_GAP + r"{0,256}+)(" + _ATOM + r"{1,256}+)")
# The next word of an anaphor phrase: a gap, then an atom.
_NEXT = re.compile(r"(" + _WORD_GAP + r"{0,256}+)(" + _ATOM + r"{1,256}+)")
_DETERMINER = re.compile(
    r"(?<!" + _ATOM + r")(?:" + "|".join(sorted(DETERMINERS)) + r")(?!" + _ATOM + r")",
    re.IGNORECASE,
)


def extract(text: str, known_types: Container[str] = frozenset()) -> Extraction:
    """Extract the identifiers and anaphors of one span's text.

    ``known_types`` are the entity types already introduced in the session by
    OTHER spans (as produced in ``Identifier.type``). An anaphor is a
    determiner (:data:`DETERMINERS`) followed within three words by one of
    them, or by its simple plural/singular; it is dropped when the type word
    directly introduces an identifier (``the account 8841-C``) or when this
    same text introduced that type earlier (the reference resolves inside the
    span). ``known_types`` only needs ``in``; a falsy container skips the
    anaphor pass.

    Guarantees: deterministic; total (never raises on any ``str``); linear
    time in ``len(text)``; results in text order; offsets exact (see
    :class:`Identifier`).
    """
    identifiers: list[Identifier] = []
    # Start offsets of nouns that typed an identifier: a determiner phrase
    # ending on one of them introduces an entity instead of referring to one.
    type_sources: set[int] = set()
    # URL and inline-code spans: opaque, so no determiner inside them counts.
    opaque: list[tuple[int, int]] = []
    reversed_text = text[::-1]
    # Nouns are never read from inside the latest URL or other non-atom token.
    floor = 0

    def type_of(pos: int) -> _Typed:
        return _noun_before(text, reversed_text, pos, floor)

    def add(surface: str, start: int, fallback: str, typed: _Typed) -> None:
        if typed is None:
            identifiers.append(Identifier(surface.casefold(), fallback, surface, start))
        else:
            identifiers.append(Identifier(surface.casefold(), typed[0], surface, start))
            type_sources.add(typed[1])

    for match in _SCAN.finditer(text):
        kind = match.lastgroup
        if kind == "atom":
            _classify_atom(match.group(), match.start(), type_of, add)
            continue
        if kind == "code":
            content = match.group("code")
            surface = content.strip()
            if surface:
                start = match.start("code") + len(content) - len(content.lstrip())
                add(surface, start, "code", type_of(match.start()))
            opaque.append((match.start(), match.end()))
        elif kind == "url":
            surface = _trim_url(match.group())
            # A URL needs something after its scheme or "www." to point at.
            scheme = surface.find("://")
            after_prefix = scheme + 3 if scheme >= 0 else 4  # past "://" or "www."
            if len(surface) <= _MAX_LONG and _ALNUM.search(surface, after_prefix):
                add(surface, match.start(), "url", type_of(match.start()))
            opaque.append((match.start(), match.end()))
        elif kind == "winpath":
            surface = match.group().rstrip(_STRIP)
            if len(surface) <= _MAX_LONG and _ALNUM.search(surface, 3):
                add(surface, match.start(), "path", type_of(match.start()))
        floor = match.end()

    anaphors: tuple[Anaphor, ...] = ()
    if known_types:
        anaphors = _find_anaphors(text, known_types, identifiers, type_sources, opaque)
    return Extraction(tuple(identifiers), anaphors)


def _classify_atom(atom: str, start: int, type_of: _TypeOf, add: _Add) -> None:
    """Turn one candidate atom (holds a digit, ``@``, ``/`` or ``\\``) into identifiers."""
    token = atom.rstrip(_STRIP)
    if not token or len(token) > _MAX_LONG or _DATE.fullmatch(token):
        return
    # Leading "." and "~" matter for paths ("./x", "~/x"), so the core without
    # leading punctuation is only used for the other classes.
    lead = len(token) - len(token.lstrip(".-+~"))
    core = token[lead:]
    if "@" in core and _EMAIL.fullmatch(core):
        add(core, start + lead, "email", type_of(start) if _only_emphasis(token[:lead]) else None)
        return
    if ("/" in token or "\\" in token) and _is_path(token):
        add(token, start, "path", type_of(start))
        return
    if "-" in core and _UUID.fullmatch(core):
        add(core, start + lead, "uuid", type_of(start) if _only_emphasis(token[:lead]) else None)
        return
    # Anything else is split at @ + ~ / \ into parts; each may be a code or a
    # number. Only the first part can take a type: the word before a later
    # part is glued to it by a separator, not followed by it.
    first = True
    for part_match in _PART.finditer(token):
        part = part_match.group()
        part_lead = len(part) - len(part.lstrip("._-"))
        surface = part.strip("._-")
        if not surface:
            continue
        part_start = start + part_match.start() + part_lead
        typed: _Typed = None
        if first and _only_emphasis(token[: part_start - start]):
            typed = type_of(start)
        first = False
        if len(surface) > _MAX_SHORT:
            continue
        if surface.isdecimal():
            # A bare number is a count unless a noun names it ("order 55012").
            if len(surface) >= 4 and typed is not None:
                add(surface, part_start, "id", typed)
        elif (
            len(surface) >= 3
            and any(c.isdecimal() for c in surface)
            and any(c.isalpha() for c in surface)
            and not _NOT_IDENTIFIER.fullmatch(surface)
        ):
            add(surface, part_start, "id", typed)


def _only_emphasis(prefix: str) -> bool:
    """True when a token's stripped prefix is empty or markdown ``_`` emphasis."""
    return not prefix.strip("_")


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
        return bool(named) and any(c.isalpha() for c in token) and (
            len(named) >= 2 or _FILE_EXTENSION.search(named[-1]) is not None
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


def _noun_before(text: str, reversed_text: str, pos: int, floor: int) -> _Typed:
    """The type noun just before ``pos`` (lower-cased) and its start, or None.

    Reads backwards over an allowed gap (spaces, ``#``, ``:``...; at most one
    line break, so a blank line separates) and the atom before it, skipping up
    to :data:`_MAX_FILLERS` filler words. Never looks below ``floor`` (the end
    of the last URL or other non-atom token), so a word inside a URL's query
    string is not a noun. Cost: bounded by the look-back caps.
    """
    size = len(text)
    for _ in range(_MAX_FILLERS + 1):
        found = _BACK.match(reversed_text, size - pos)
        if found is None:
            return None
        end = found.end()
        if end < size and _IS_ATOM_CHAR.match(reversed_text, end):
            return None  # the word is longer than the look-back cap: a blob, not a noun
        if found.group(1).count("\n") > 1:
            return None
        run_start = size - end
        if run_start < floor:
            return None
        run = found.group(2)[::-1]
        head = len(run) - len(run.lstrip(_STRIP))
        tail = len(run.rstrip(_STRIP))
        word = run[head:tail]
        if not word.isalpha() or not _only_emphasis(run[:head]):
            return None
        lowered = word.lower()
        if lowered in FILLER_WORDS and run[tail:] in ("", ".", "_"):
            pos = run_start  # "order no. 55012": keep looking for the noun
            continue
        if len(word) < 3 or lowered in STOP_WORDS or not _only_emphasis(run[tail:]):
            return None
        return lowered, run_start + head
    return None


def _type_forms(word: str) -> tuple[str, ...]:
    """The spellings a type word may stand for: itself, then singulars, then plurals."""
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


def _find_anaphors(
    text: str,
    known_types: Container[str],
    identifiers: list[Identifier],
    type_sources: set[int],
    opaque: list[tuple[int, int]],
) -> tuple[Anaphor, ...]:
    """Determiner phrases that name a known type; see :func:`extract` for the rules."""
    anaphors: list[Anaphor] = []
    introduced: set[str] = set()  # types this text introduced before the current position
    next_identifier = 0
    next_opaque = 0
    # "the same old account" has two determiners but one referent: a type word
    # examined by one determiner is not examined again by a later one.
    claimed = -1
    size = len(text)
    for determiner in _DETERMINER.finditer(text):
        start = determiner.start()
        while next_opaque < len(opaque) and opaque[next_opaque][1] <= start:
            next_opaque += 1
        if next_opaque < len(opaque) and opaque[next_opaque][0] <= start:
            continue
        while next_identifier < len(identifiers) and identifiers[next_identifier].start < start:
            introduced.add(identifiers[next_identifier].type)
            next_identifier += 1
        pos = determiner.end()
        for _ in range(3):
            found = _NEXT.match(text, pos)
            if found is None or found.group(1).count("\n") > 1:
                break
            if found.end() < size and _IS_ATOM_CHAR.match(text, found.end()):
                break  # an over-long run: a blob, not a word
            run = found.group(2)
            head = len(run) - len(run.lstrip(_STRIP))
            tail = len(run.rstrip(_STRIP))
            word = run[head:tail]
            if not word or not _only_emphasis(run[:head]):
                break
            forms = _type_forms(word.lower())
            spelling = next((form for form in forms if form in known_types), None)
            if spelling is not None:
                word_start = found.start(2) + head
                if word_start != claimed:
                    claimed = word_start
                    if word_start not in type_sources and introduced.isdisjoint(forms):
                        end = word_start + len(word)
                        anaphors.append(Anaphor(spelling, text[start:end], start))
                break
            if not _only_emphasis(run[tail:]):
                break  # "the same. account": punctuation ends the phrase
            pos = found.end()
    return tuple(anaphors)

