"""Names: the proper names of things a conversation refers to (contract 1.2, "Referents").

People refer to venues, people, products and projects by name ("I'd suggest
Warkworth House", later "what's the phone number of warkworth house?"), often
in lower case and often shortened ("the Acorn"). This module finds the names
of one text (:func:`scan_names`) and the earlier names a text repeats
(:func:`match_book`), against the session's **name book**: every name seen so
far, under its key and under its *distinctive part*.

Rules (each list below is documented with examples in ``docs/contract.md``):

* **Cased runs**, where the text is cased (it has lower-case words and is not
  in title case): a run of capitalised words, which ``of``, ``de``, ``&``,
  ``-`` and ``'s`` may join, plus a lower-case head noun right after it
  (``Acorn guest house``). Not a name: a single word capitalised only because
  it starts a sentence, a run of days, months or greetings only, a single
  ordinary word (``Indian``), a label (``**Outgoing Flight**:``), a markdown
  heading.
* **Distinctive words**, in any case: a run of words that are not ordinary
  vocabulary, ending in a head noun or followed by one within two ordinary
  words (``warkworth house``, ``the hamilton lodge``), or holding a word of
  4+ letters (``allenbell``); and the words after ``called``, ``named``,
  ``name is``.
* **Places used as locations** are not names: a run ending in a location word
  (``Regent Street``), or one without a head noun right after ``in``,
  ``from``, ``to``... or a house number (``a train to Cambridge``).

A name's key is its letter and digit words, case-folded, joined by one space,
without a leading determiner (``Christ's College`` -> ``christ s college``);
its type is its head noun, or a head noun just before it (``the restaurant
Pizza Hut``), else ``name``.

Pure and total: standard library only (plus the checked-in vocabulary), no
state beyond compiled patterns; any ``str`` is accepted and nothing raises.
Linear in the text: every run and look-ahead is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from collections.abc import Set as AbstractSet
from functools import partial
from typing import Any, Generic, NamedTuple, TypeVar

from spanguard.streams.engine.words import ORDINARY_WORDS, is_ordinary, is_proper

__all__ = [
    "CALLING_WORDS",
    "GREETINGS",
    "HEAD_NOUNS",
    "LOCATION_PREPOSITIONS",
    "LOCATION_WORDS",
    "NAME_JOINERS",
    "BookLookup",
    "FoundName",
    "NameBook",
    "NameScan",
    "Word",
    "book_entries",
    "match_book",
    "name_key",
    "scan_names",
    "word_set",
]


def word_set(*chunks: str) -> frozenset[str]:
    """The words of ``chunks``, split at white space (word lists written as prose)."""
    return frozenset(" ".join(chunks).split())


HEAD_NOUNS: frozenset[str] = word_set(
    # Lodging and food: the venues of booking dialogues.
    "house guesthouse lodge hotel motel inn hostel resort suites apartments b&b "
    "restaurant cafe café bar pub grill bistro brasserie diner kitchen tavern "
    "pizzeria steakhouse bakery eatery cantina trattoria taqueria deli canteen "
    "lounge brewery winery club "
    # Attractions and institutions.
    "college university school academy institute museum gallery theatre theater "
    "cinema church chapel cathedral abbey temple mosque synagogue park gardens "
    "garden zoo aquarium stadium arena hall library hospital clinic pharmacy "
    "salon spa studio boutique shop store market mall tower castle palace manor "
    "cottage farm pool gym coliseum amphitheater amphitheatre auditorium pavilion "
    "ballpark speedway casino marina condos ranch "
    # Organisations, events and works.
    "company bank airlines airways festival concert tour show band orchestra homes "
    # Events and works: "the Padres vs Brewers game", "the Slow Burn song".
    "event game match song album movie film"
)
"""Nouns that end a name and give it its type (``Warkworth House`` -> ``house``)."""

COMPOUND_HEADS: frozenset[tuple[str, str]] = frozenset(
    {("guest", "house"), ("apartment", "homes"), ("coffee", "house"), ("coffee", "shop")}
)
"""Two-word head nouns: the distinctive part of ``Acorn guest house`` is ``acorn``."""

LOCATION_WORDS: frozenset[str] = word_set(
    "street st road rd station airport centre center city town area avenue ave "
    "lane boulevard blvd drive square place terrace way county district village"
)
"""A run ending in one of these is a place used as a location, not a name
(``Regent Street``, ``Cambridge station``); a name followed by one is not
repeated there (``Magdalene Street`` does not mention Magdalene College)."""

LOCATION_PREPOSITIONS: frozenset[str] = word_set("in from to near via leaving arriving")
"""Before a run without a head noun, these make it a place (``a train to Cambridge``)."""

PLACE_PREFIXES: frozenset[str] = word_set(
    "new san santa santo sao los las la le el st saint fort port lake mount mt north south",
    "east west upper lower great little palm",
)
"""First words of many-word place names in English (``New York``, ``San Diego``,
``Fort Worth``): after ``to``, a run of known words starting with one is a place."""

TRAVEL_PREPOSITIONS: frozenset[str] = word_set("in from near via leaving arriving")
"""After these a run without a head noun is a place whatever its words (``leaving
from stevenage``, ``in Corte Madera``); after ``to`` and a house number only when
the dictionaries know its words (``tickets to Anberlin`` names a band)."""

NAME_JOINERS: frozenset[str] = word_set("of de du la le del von van vs v")
"""Lower-case words that join two capitalised words into one name (``Bank of America``,
``Usc vs Oregon``)."""

VERSUS: frozenset[str] = word_set("vs v versus")
"""Between two words, a match (``giants vs dodgers``), a name in any case."""

CALLING_WORDS: frozenset[str] = frozenset({"called", "named"})
"""The words after these (or after ``name is``) are a name, whatever their case."""

_TRIGGER_WORDS = CALLING_WORDS | VERSUS

DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those", "said", "same"})

GREETINGS: frozenset[str] = word_set(
    "hi hello hey dear thanks thank goodbye bye ok okay yes no please sorry great "
    "good morning afternoon evening night cheers welcome sure alright perfect "
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow "
    "january february march april may june july august september october november "
    "december mon tue tues wed thu thur thurs fri sat sun jan feb mar apr jun jul "
    "aug sep sept oct nov dec i"
)
"""Words that are capitalised without naming anything: greetings, days and months,
``I``. A run of these alone is not a name."""

_STOP = word_set(
    "a an the this that these those said same and or but nor for yet not any all "
    "each every some such only own very just also too than then there here where "
    "when which while who whom whose what why how is are was were be been being "
    "have has had do does did will would shall should can could may might must it "
    "its it's i me my we us our you your he him his she her they them their there "
    "in on at to of by with from into onto about as if so no yes ok okay please "
    "near via leaving arriving around towards toward for one two three four five "
    "six seven eight nine ten "
    # Stems of contractions ("couldn't"): the apostrophe splits the word.
    "couldn wouldn didn doesn isn aren wasn weren shouldn hasn haven hadn won don can ll ve re"
)
"""Function words: never part of a distinctive run, never a head modifier, never the
last word of a name."""

_PLAIN = GREETINGS | _STOP
"""Words that start no name when capitalised."""

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# Words under three letters are never distinctive: the ASCII ones are listed, so that
# the set difference drops them in C.
_NOT_DISTINCTIVE = (
    ORDINARY_WORDS | _PLAIN | set(_LETTERS) | {a + b for a in _LETTERS for b in _LETTERS}
)

# A word: letters and digits. Apostrophes split words ("Christ's" -> "Christ", "s").
_WORD = re.compile(r"[^\W_]{1,64}+")
_MAX_WORD = 64
# ASCII bytes to themselves lower-cased when a letter or digit, else to a blank: an
# ASCII text's words are then one C translate and one split, no regex.
_ASCII_WORDS = bytes(
    ord(chr(byte).lower()) if chr(byte).isalnum() and byte < 128 else ord(" ")
    for byte in range(256)
)


def folded_words(text: str) -> frozenset[str]:
    """The text's distinct words (``_WORD``), case-folded."""
    if text.isascii():  # a flag of the string: free
        words = text.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()
        # A text no longer than a word's cap holds no longer word (most need no max).
        if len(text) <= _MAX_WORD or not words or max(map(len, words)) <= _MAX_WORD:
            return frozenset(words)
    return frozenset(_WORD.findall(text.casefold()))


_GAP_WORD = re.compile(r"([\W_]*+)([^\W_]{1,64}+)")
_SENTENCE_END = re.compile(r"[.!?:;\n]")
_JOIN_GAP = re.compile(r"[ \t]{1,3}|[ \t]?[-&][ \t]?|['\u2019]")
_INITIAL_GAPS = frozenset({". ", "."})
# A capitalised word inside a sentence: the nearest character before it, past at most
# three blanks, ends no sentence. A plain class first, so sre skips to each capital
# in C before the look-behinds (fixed-width each, one per count of blanks).
_INSIDE, _BLANK = r"[^ \t.!?:;\n]", r"[ \t]"
_CAPITALISED_INSIDE = re.compile(
    r"[A-Z](?<![\w'\u2019][A-Z])(?:"
    + "|".join(f"(?<={_INSIDE}{_BLANK * blanks}[A-Z])" for blanks in range(4))
    + r")[a-z][\w'\u2019]*+"
)
_DAY_QUALIFIERS = frozenset({"next", "last", "this", "coming"})
_LABEL_AFTER = re.compile(r"[*_ \t]{0,4}:")
_HOUSE_NUMBER = re.compile(r"\d{1,5}[a-zA-Z]?")


class Word(NamedTuple):
    """One word of a text, with what the name rules read around it."""

    folded: str
    """The word, case-folded."""
    start: int
    end: int
    capital: bool
    """Starts with an upper-case letter."""
    sentence_start: bool
    """First word of the text or of a sentence (after ``.!?:;`` or a line break)."""
    joined: bool
    """The gap before it is a space, ``-``, ``&`` or an apostrophe: it may continue
    the name before it."""


class FoundName(NamedTuple):
    """A name found in a text: ``key``, ``type``, ``surface`` at ``start``, its
    shorter book entries (its distinctive part, and the rest of it after a first
    word that may only be capitalised because it starts a sentence: ``Try
    Doubletree`` -> ``doubletree``), and where the head noun that typed it starts
    (-1 without one): a determiner phrase ending there (``the Acorn Guest House``)
    introduces the name instead of referring."""

    key: str
    type: str
    surface: str
    start: int
    parts: tuple[str, ...] = ()
    type_at: int = -1


_new_word = partial(tuple.__new__, Word)  # a Word from its fields, in C


class NameScan(NamedTuple):
    """The names of one text and what :func:`match_book` reads of it. A pure function
    of the text (cacheable like :class:`spanguard.streams.engine.referents.Scan`)."""

    names: tuple[FoundName, ...]
    folded: frozenset[str]
    """The text's words, case-folded: a book whose entries start with none of them
    is not asked about this text at all."""
    words: tuple[Word, ...] | None
    """Every word with what the rules read around it; None when a quick look found
    nothing that could start a name (:func:`match_book` then reads the text again
    if the book asks)."""


Entry = TypeVar("Entry", bound=Hashable)
"""How a name book holds its entries and keys: the raw text (the SDK, the reference
model) or the engine's stored form of it."""

BookLookup = Callable[[str], "tuple[Entry, str] | None"]
"""The session's name book as :func:`match_book` asks it: a case-folded, space-joined
sequence of words -> ``(key, type)`` of the name it stands for, or None."""


def name_key(words: list[str] | tuple[str, ...]) -> str:
    """A name's key from its case-folded words: joined by one space, without a leading
    determiner."""
    if len(words) > 1 and words[0] in DETERMINERS:
        words = words[1:]
    return " ".join(words)


def _words(text: str) -> list[Word]:
    """Every word of the text with what the rules read around it (one C pass for the
    words and the gaps before them; a plain space, the common gap, costs no regex)."""
    words: list[Word] = []
    position = 0
    previous: Word | None = None
    for gap, word in _GAP_WORD.findall(text):
        start = position + len(gap)
        position = start + len(word)
        capital = word[0].isupper()
        if previous is None:
            sentence_start, joined = True, False
        elif gap == " ":
            sentence_start, joined = False, True
        elif gap in _INITIAL_GAPS and capital and previous.capital and len(previous.folded) == 1:
            # An initial's dot ("Ellen M. Sanford") neither ends a sentence nor the name.
            sentence_start, joined = False, True
        else:
            sentence_start = _SENTENCE_END.search(gap) is not None
            joined = _JOIN_GAP.fullmatch(gap) is not None
        previous = _new_word((word.casefold(), start, position, capital, sentence_start, joined))
        words.append(previous)
    return words


def _is_cased(words: Sequence[Word]) -> bool:
    """A text is cased when it has lower-case words and is not in title case: nine in
    ten of its words of 4+ letters capitalised, and its short function words too (a
    sentence full of names, "Adam E. Pollock is a Psychologist in San Francisco",
    keeps "is", "a" and "in" in lower case)."""
    if not any(not w.capital and w.folded.isalpha() for w in words):
        return False
    long_words = [w for w in words if len(w.folded) >= 4 and w.folded.isalpha()]
    capitals = sum(1 for w in long_words if w.capital)
    if len(long_words) < 3 or capitals * 10 < len(long_words) * 9:
        return True
    short = [w for w in words if len(w.folded) <= 3 and w.folded in _STOP and not w.sentence_start]
    return sum(1 for w in short if w.capital) * 2 < len(short)


def _distinctive_words(seen: frozenset[str]) -> frozenset[str]:
    """The text's distinctive words: alphabetic, 3+ letters, not ordinary vocabulary,
    not function words or greetings (set differences, in C)."""
    # ``filter`` with a C predicate: most unknown words are numbers, dropped in C.
    alphabetic = frozenset(filter(str.isalpha, seen - _NOT_DISTINCTIVE))
    if alphabetic and min(map(len, alphabetic)) < 3:
        return frozenset(word for word in alphabetic if len(word) >= 3)
    return alphabetic


def _head(folded: str) -> bool:
    return folded in HEAD_NOUNS


class _Finder:
    """One text's name candidates as word ranges, before overlaps are resolved."""

    __slots__ = ("candidates", "cased", "distinct", "text", "words")

    def __init__(self, text: str, words: list[Word], cased: bool, distinct: frozenset[str]) -> None:
        self.text = text
        self.words = words
        self.cased = cased
        self.distinct = distinct
        # (first, end, origin): word range [first, end) of a name, and which rule
        # found it (see _ORIGINS).
        self.candidates: list[tuple[int, int, str]] = []

    def run_cased(self) -> None:
        words = self.words
        size = len(words)
        i = 0
        while i < size:
            if not words[i].capital or not words[i].folded[0].isalpha():
                i += 1
                continue
            first = i
            last = i + 1
            while last < size:
                word = words[last]
                if word.joined and word.capital:
                    last += 1
                elif (
                    word.folded in NAME_JOINERS
                    and word.joined
                    and last + 1 < size
                    and words[last + 1].capital
                    and words[last + 1].joined
                ):
                    last += 2
                elif word.folded == "s" and self.text[word.start - 1] in "'\u2019":
                    last += 1  # "Christ's"
                else:
                    break
            end = last
            # A lower-case head noun right after the run joins it ("Acorn guest house").
            if end < size and words[end].joined and not words[end].capital:
                if _head(words[end].folded):
                    end += 1
                elif (
                    end + 1 < size
                    and words[end + 1].joined
                    and not words[end + 1].capital
                    and _head(words[end + 1].folded)
                    and words[end].folded not in _STOP
                ):
                    end += 2
            self._cased_candidate(first, end)
            i = last

    def _cased_candidate(self, first: int, end: int) -> None:
        words = self.words
        # A leading determiner, or a function word or greeting starting a sentence, is
        # not part of it (nor the "'s" of "There's Summit Crest").
        while first < end and (
            words[first].folded in DETERMINERS
            or (
                words[first].sentence_start
                and (words[first].folded in _STOP or words[first].folded in GREETINGS)
            )
        ):
            first += 1
            if first < end and words[first].folded == "s" and not words[first].capital:
                first += 1
            if first < end and not words[first].capital:
                return
        # Nor is a day, a month or "I" at its end ("Christopher J. Celio March 9th"),
        # with the "next" before it ("Whang-Ramos Paula Next Thursday").
        trimmed = end
        while end > first + 1 and words[end - 1].folded in GREETINGS:
            end -= 1
        if end < trimmed and end > first + 1 and words[end - 1].folded in _DAY_QUALIFIERS:
            end -= 1
        if first >= end:
            return
        span = words[first:end]
        capitalised = span[:-1] if len(span) > 1 and not span[-1].capital else span
        if all(w.folded in GREETINGS or w.folded in _STOP for w in capitalised):
            return
        # A head noun just before it says a capitalised word names a thing, ordinary as
        # the word is: "the event Pup", "the song Alive", "the restaurant Catch".
        named_kind = first > 0 and words[first].joined and _head(words[first - 1].folded)
        if len(span) == 1 and not named_kind:
            only = span[0]
            if only.sentence_start or len(only.folded) < 2:
                return
            surface = self.text[only.start : only.end]
            if len(surface) <= 4 and surface.isupper():
                return  # an acronym (KYC, API): a term, not the name of a thing
            # One word the dictionaries know, ordinary or proper ("Indian", "Seattle",
            # "Fahrenheit"), is a word of the language or a place, not a thing's name.
            if is_ordinary(only.folded) or is_proper(only.folded) or only.folded in _STOP:
                return
        if self._label(end):
            return
        # An ordinary word starting a sentence may be capitalised for that alone
        # ("Try Doubletree") or be the name's own ("Cypress Glen"): kept, and the rest
        # of the name goes into the book as well.
        origin = (
            "loose"
            if words[first].sentence_start
            and end - first > 1
            and is_ordinary(words[first].folded)
            and not self._names_first(first)
            else "cased"
        )
        # A number just before a name that is not a place joins it ("1 Hotel Central
        # Park", "400 Canal Street Apartments").
        if (
            first > 0
            and words[first].joined
            and words[first - 1].folded.isdecimal()
            and (_head(words[end - 1].folded) or any(w.folded in self.distinct for w in span))
        ):
            first -= 1
        self.candidates.append((first, end, origin))

    def _names_first(self, first: int) -> bool:
        """Whether a sentence's first word, ordinary as it is, belongs to the run after
        it: a known proper noun (``Bill Callahan is playing``), or joined to the next
        by a joiner (``Dodgers Vs Cubs``)."""
        words = self.words
        word = words[first].folded
        if word in _STOP or word in GREETINGS:
            return False
        following = words[first + 1].folded if first + 1 < len(words) else ""
        return is_proper(word) or following in NAME_JOINERS

    def _label(self, end: int) -> bool:
        """A run followed by ``:`` (emphasis between), or on a markdown heading line."""
        words = self.words
        last_end = words[end - 1].end
        if _LABEL_AFTER.match(self.text, last_end) is not None:
            return True
        line_start = self.text.rfind("\n", 0, words[end - 1].start) + 1
        return self.text.startswith("#", line_start)

    def run_distinctive(self) -> None:
        words = self.words
        distinct = self.distinct
        size = len(words)
        i = 0
        while i < size:
            if words[i].folded not in distinct:
                i += 1
                continue
            first = i
            last = i + 1
            while last < size and words[last].joined and words[last].folded in distinct:
                last += 1
            end = last
            # A head noun ending the run, or within two ordinary words after it.
            for reach in range(3):
                at = last + reach
                if at >= size or not words[at].joined:
                    break
                folded = words[at].folded
                if _head(folded):
                    end = at + 1
                    break
                if folded in _STOP or not folded.isalpha():
                    break
            # Alone, a run needs a word no dictionary knows: "indian" or "cambridge"
            # written in lower case is an adjective or a place, "allenbell" a name.
            if (
                end > last
                or any(len(w.folded) >= 4 and not is_proper(w.folded) for w in words[first:last])
            ) and not self._label(end):
                self.candidates.append((first, end, "distinctive"))
            i = last

    def run_versus(self) -> None:
        """A match in any case: the words either side of ``vs`` (``giants vs dodgers``)."""
        words = self.words
        for i in range(1, len(words) - 1):
            if (
                words[i].folded in VERSUS
                and words[i].joined
                and words[i + 1].joined
                and words[i - 1].folded not in _STOP
                and words[i + 1].folded not in _STOP
                and words[i - 1].folded.isalpha()
                and words[i + 1].folded.isalpha()
            ):
                self.candidates.append((i - 1, i + 2, "distinctive"))

    def run_called(self) -> None:
        words = self.words
        size = len(words)
        for i, word in enumerate(words):
            after = -1
            if word.folded in CALLING_WORDS:
                after = i + 1
            elif word.folded == "name" and i + 1 < size and words[i + 1].folded == "is":
                after = i + 2
            if after < 0 or after >= size or not words[after].joined:
                continue
            first = after
            if words[first].folded in DETERMINERS:
                first += 1
            end = first
            # In a cased text a capitalised name ends at its first lower-case word
            # ("called Halu Shabu Shabu located in Dublin").
            capitalised = self.cased and first < size and words[first].capital
            while (
                end < size
                and end - first < 5
                and (end == first or words[end].joined)
                and words[end].folded not in _STOP
                and words[end].folded not in GREETINGS
                and (not capitalised or words[end].capital or words[end].folded in NAME_JOINERS)
            ):
                end += 1
            if end > first:
                self.candidates.append((after, end, "called"))

    def places(self) -> None:
        """Drop candidates that are places used as locations."""
        words = self.words
        kept: list[tuple[int, int, str]] = []
        for first, end, origin in self.candidates:
            last = words[end - 1].folded
            has_head = _type_of(words, first, end)[1] >= words[first].start
            if last in LOCATION_WORDS and origin != "called":
                continue
            if not has_head and origin != "called" and _place_after(words, first, end):
                continue
            kept.append((first, end, origin))
        self.candidates = kept


def _known_word(folded: str) -> bool:
    return is_ordinary(folded) or is_proper(folded) or folded in NAME_JOINERS


def _place_after(words: Sequence[Word], first: int, end: int) -> bool:
    """A run without a head noun right after ``in``, ``from``, ``to``... (a determiner
    between) or a house number: a place used as a location (``a train to Cambridge``,
    ``in San Diego``, ``leaving from stevenage``). After ``in``, ``to`` or a house
    number it must be one word the dictionaries know, or words they know after a
    place-name prefix (``to New York``, ``to San Diego``): ``tickets to Anberlin``,
    ``a visit to Addison Ranch``, ``tickets to the Brown Sabbath event`` name things."""
    if first == 0:
        return False
    before = words[first - 1]
    if before.folded in DETERMINERS and first > 1:
        before = words[first - 2]
    if before.folded not in LOCATION_PREPOSITIONS and not _HOUSE_NUMBER.fullmatch(before.folded):
        return False
    if before.folded in TRAVEL_PREPOSITIONS:
        return True
    run = words[first:end]
    if len(run) == 1:
        return _known_word(run[0].folded)
    return run[0].folded in PLACE_PREFIXES and all(_known_word(w.folded) for w in run)


_ORIGINS = {"called": 0, "cased": 1, "loose": 1, "distinctive": 2}
"""Which rule wins between candidates of the same length: the words after
``called``, then a cased run (it knows where the name starts), then distinctive words."""


def _resolve(candidates: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Non-overlapping ranges: the longest first, then by rule, then the earliest."""
    chosen: list[tuple[int, int, str]] = []
    taken: set[int] = set()
    for first, end, origin in sorted(candidates, key=lambda c: (c[0] - c[1], _ORIGINS[c[2]], c[0])):
        if any(i in taken for i in range(first, end)):
            continue
        chosen.append((first, end, origin))
        taken.update(range(first, end))
    chosen.sort()
    return chosen


def _type_of(words: Sequence[Word], first: int, end: int) -> tuple[str, int]:
    last = words[end - 1]
    if _head(last.folded):
        return last.folded, last.start
    for at in range(first, end - 1):
        if _head(words[at].folded) and words[at + 1].folded == "of":
            return words[at].folded, words[at].start  # "Bank of America"
    if first > 0 and _head(words[first - 1].folded):
        return words[first - 1].folded, words[first - 1].start  # "the restaurant Pizza Hut"
    return "name", -1


def _may_stand_alone(folded: list[str]) -> bool:
    """Whether words may be a book entry of their own: a distinctive word, or two or
    more words (one ordinary word would repeat everywhere)."""
    return bool(folded) and (
        len(folded) >= 2 or any(not is_ordinary(w) and w not in _STOP for w in folded)
    )


def distinctive_part(folded: list[str]) -> str:
    """A name's distinctive part (``""`` when it has none): the name without its
    trailing head noun (``guest house`` is one), when that still holds a
    distinctive word or two or more words (``acorn guest house`` -> ``acorn``)."""
    if len(folded) < 2 or not _head(folded[-1]):
        return ""
    part = folded[:-1]
    if len(part) > 1 and (part[-1], folded[-1]) in COMPOUND_HEADS:
        part = part[:-1]
    if part and part[0] in DETERMINERS:
        part = part[1:]
    return " ".join(part) if _may_stand_alone(part) else ""


def _unlabelled(text: str, distinct: frozenset[str]) -> bool:
    """Whether a distinctive word of 4+ letters may be a name alone: one seen only as a
    label (``lookup: ...``, every time directly before a colon) is not (see
    :meth:`_Finder._label`). The test counts substrings, so it may only err towards
    True: a text that passes it still goes through every rule."""
    long_words = [word for word in distinct if len(word) >= 4]
    if not long_words or not text.isascii():
        return bool(long_words)
    lowered = text.lower()
    return any(lowered.count(word) != lowered.count(word + ":") for word in long_words)


def _may_name(
    text: str, folded: frozenset[str], distinct: frozenset[str], shape: bytes | None
) -> bool:
    """Whether anything in the text could start a name: a capitalised word inside a
    sentence or two in a row, a distinctive word, ``called`` and its kin, ``vs``.
    Set operations and one regex, all in C: most texts of an agent's context end
    here."""
    # A distinctive word of 4+ letters is a name alone; one of 3 needs a head noun.
    if distinct and (not HEAD_NOUNS.isdisjoint(folded) or _unlabelled(text, distinct)):
        return True
    if not _TRIGGER_WORDS.isdisjoint(folded) or ("name" in folded and "is" in folded):
        return True
    # A capitalised word inside a sentence (not a greeting, day, month or function
    # word: "The customer has waited since Monday" starts no name). It needs a capital
    # and a small letter after it, past the text's first character.
    if shape is not None and shape.find(b"Aa", 1) < 0:
        return False
    inside = _CAPITALISED_INSIDE.findall(text)
    return bool(inside) and not _PLAIN.issuperset(map(str.casefold, inside))


def scan_names(text: str, shape: bytes | None = None) -> NameScan:
    """The names of one text (see the module's rules), in text order. ``shape`` is the
    text's :func:`~spanguard.streams.engine.shape.shape_of`, or None to skip the
    checks it allows (the same names, slower)."""
    seen = folded_words(text)
    distinct = _distinctive_words(seen)
    if not _may_name(text, seen, distinct, shape):
        return NameScan((), seen, None)
    words = _words(text)
    cased = _is_cased(words)
    finder = _Finder(text, words, cased, distinct)
    if cased:
        finder.run_cased()
    if distinct:
        finder.run_distinctive()
    if seen & VERSUS:
        finder.run_versus()
    if seen & CALLING_WORDS or "name" in seen:
        finder.run_called()
    finder.places()
    names: list[FoundName] = []
    for first, end, origin in _resolve(finder.candidates):
        folded = [w.folded for w in words[first:end]]
        if folded[0] in DETERMINERS:
            first += 1
            folded = folded[1:]
            if not folded:
                continue
        # Type words after a lower-case determiner ("that bistro", "the Hotel") name a
        # type, not an entity; "at The Grill" keeps its capitalised article: a name.
        if first and words[first].joined and all(map(_head, folded)):
            before = words[first - 1]
            if before.folded in DETERMINERS and text[before.start].islower():
                continue
        key = name_key(folded)
        start = words[first].start
        surface = text[start : words[end - 1].end]
        type_, type_at = _type_of(words, first, end)
        parts = [distinctive_part(folded)]
        if origin == "loose" and _may_stand_alone(folded[1:]):
            parts.append(" ".join(folded[1:]))
        names.append(FoundName(key, type_, surface, start, tuple(p for p in parts if p), type_at))
    return NameScan(tuple(names), seen, tuple(words))


def book_entries(names: tuple[FoundName, ...]) -> list[tuple[str, str, str, bool]]:
    """What a text's names add to the name book: ``(entry, key, type, is_part)`` for
    each name's key and distinctive part."""
    entries: list[tuple[str, str, str, bool]] = []
    for name in names:
        entries.append((name.key, name.key, name.type, False))
        entries.extend((part, name.key, name.type, True) for part in name.parts)
    return entries


MAX_ENTRY_WORDS = 8
"""Longest book entry, in words, that a later text is matched against."""


def match_book(
    scan: NameScan, text: str, lookup: BookLookup[Entry], first_words: Callable[[str], bool]
) -> list[tuple[Entry, str, int, int]]:
    """The book's names a text repeats, as ``(key, type, start, end)`` (offsets of the
    repeat in the text), in text order.

    A sequence of the text's words equal (case-folded) to a book entry mentions
    its name, unless the next word is another name word (capitalised, in a cased
    text: ``Cambridge Artworks``) or a location word (``Magdalene Street``).
    ``first_words`` tells whether any entry starts with a word, so most words
    cost one test (each distinct word once). The longest entry at a place wins.
    """
    if not any(map(first_words, scan.folded)):
        return []
    words = scan.words if scan.words is not None else tuple(_words(text))
    cased = _is_cased(words)
    size = len(words)
    found: list[tuple[Entry, str, int, int]] = []
    i = 0
    while i < size:
        if not first_words(words[i].folded):
            i += 1
            continue
        hit: tuple[int, tuple[Entry, str]] | None = None
        last = i + 1
        while last <= size and last - i <= MAX_ENTRY_WORDS:
            if last > i + 1 and not words[last - 1].joined:
                break
            entry = " ".join(w.folded for w in words[i:last])
            value = lookup(entry)
            if (
                value is not None
                and not _blocked_after(words, cased, last)
                and (
                    _head(words[last - 1].folded)
                    or _head_after(words, last)
                    or not _place_after(words, i, last)
                )
            ):
                hit = (last, value)
            last += 1
        if hit is None:
            i += 1
            continue
        end, (key, type_) = hit
        found.append((key, type_, words[i].start, words[end - 1].end))
        i = end
    return found


def _blocked_after(words: Sequence[Word], cased: bool, end: int) -> bool:
    if end >= len(words) or not words[end].joined:
        return False
    following = words[end]
    if _head(following.folded):
        return False  # the same name with its kind: "Bourbon Steak Restaurant"
    return (cased and following.capital and not following.sentence_start) or (
        following.folded in LOCATION_WORDS
    )


def _head_after(words: Sequence[Word], end: int) -> bool:
    return end < len(words) and words[end].joined and _head(words[end].folded)


def value_words(value: str) -> list[str]:
    """The case-folded letter and digit words of a value (a JSON name field)."""
    return [match.group().casefold() for match in _WORD.finditer(value)][:MAX_ENTRY_WORDS]


_NO_WORDS: frozenset[Any] = frozenset()
"""``NameBook.firsts`` while empty: one object for every book (an empty frozenset of
its own would cost as much as a set)."""


class NameBook(Generic[Entry]):
    """A session's name book: each name under its key and its distinctive part.

    Entries and keys are kept in a stored form (:data:`Entry`): raw text in the SDK
    and the reference model (``str`` as ``stored``), keyed hashes in the engine,
    which passes its hashing function as ``stored`` to :meth:`learn` and hashes
    before it asks. A part shared by two names stands for neither; a full key always
    wins over a part.
    """

    __slots__ = ("entries", "firsts")

    def __init__(self) -> None:
        # stored entry -> (key, type, is_part), or None for a part two names share.
        self.entries: dict[Entry, tuple[Entry, str, bool] | None] = {}
        self.firsts: AbstractSet[Entry] = _NO_WORDS
        """Stored first words of the entries (a set of its own from the first entry on:
        most sessions learn no name, and an empty set costs 216 B)."""

    def add(self, entry: Entry, key: Entry, type_: str, is_part: bool) -> None:
        """Keep ``entry`` for the name ``key`` (stored forms; see :func:`book_entries`)."""
        entries = self.entries
        if entry not in entries:
            entries[entry] = (key, type_, is_part)
            return
        current = entries[entry]
        if is_part:
            if current is not None and current[2] and current[0] != key:
                entries[entry] = None  # two names share this part: it stands for neither
        elif current is None or current[2]:
            entries[entry] = (key, type_, False)

    def learn(
        self,
        names: tuple[FoundName, ...],
        stored: Callable[[str], Entry],
        stored_type: Callable[[str], str] = str,
    ) -> None:
        """Add a text's names (raw, as :func:`scan_names` gives them) in stored form."""
        firsts = self.firsts
        for entry, key, type_, is_part in book_entries(names):
            self.add(stored(entry), stored(key), stored_type(type_), is_part)
            if not isinstance(firsts, set):
                firsts = self.firsts = set(firsts)
            firsts.add(stored(entry.split(" ", 1)[0]))

    def get(self, entry: Entry) -> tuple[Entry, str] | None:
        """``(key, type)`` of the name a stored entry stands for, or None."""
        found = self.entries.get(entry)
        return None if found is None else (found[0], found[1])

    def starts(self, word: Entry) -> bool:
        """Whether an entry starts with this stored word."""
        return word in self.firsts


def new_names(
    own: tuple[FoundName, ...], repeats: list[tuple[Entry, str, int, int]]
) -> tuple[tuple[FoundName, ...], list[tuple[Entry, str, int, int]]]:
    """A text's own names and its repeats of book entries, where they overlap the
    longer one kept (a repeat on a tie): ``the Acorn`` after ``Acorn guest house``
    mentions that name and introduces none, while ``Ac Hotel By Marriott Atlanta
    Downtown`` is a new name, not a repeat of ``Atlanta``. A longer name that starts
    with a repeat keeps both (``the Aaron Lewis show``)."""
    if not repeats or not own:
        return own, repeats
    kept_own = []
    dropped: set[int] = set()
    for name in own:
        end = name.start + len(name.surface)
        inside = [
            i for i, (_, _, start, stop) in enumerate(repeats) if start < end and name.start < stop
        ]
        if inside and all(repeats[i][3] - repeats[i][2] < len(name.surface) for i in inside):
            # A repeat the new name starts with stays one ("the Aaron Lewis show" after
            # "Aaron Lewis"); one in its middle is a word of another name.
            dropped.update(i for i in inside if repeats[i][2] != name.start)
            kept_own.append(name)
        elif not inside:
            kept_own.append(name)
    return tuple(kept_own), [r for i, r in enumerate(repeats) if i not in dropped]
