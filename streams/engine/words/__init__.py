"""Word lists of the referent extractor: ordinary English vocabulary, and known proper nouns.

The referent extractor treats a word that is not ordinary ("warkworth", "allenbell") as
distinctive, and so as a possible name of something the conversation refers to. The
wire contract defines ordinary vocabulary as a documented list of common words with
their inflections and spelling variants; ordinary.txt, beside this module, is that
list.

How it was made (scripts/make_ordinary_words.py, whose docstring gives the reason for
each filter, and docs/ordinary-words.md): the most frequent 25,000 English words of the
wordfreq package that are purely alphabetic and listed lower-case by Debian's
american-english or british-english dictionary (so "cambridge" and "london", listed
only capitalised, are not ordinary), plus their inflections and British/American
spelling variants that the dictionaries list too ("houses", "downgrading",
"summarise"). The file's `#` header names the generator and the versions of its
inputs.

To regenerate (a maintainer task; run time needs neither wordfreq nor the dictionaries):

    pip install -e '.[maintainer]'
    apt-get install wamerican wbritish
    python scripts/make_ordinary_words.py
"""

from __future__ import annotations

from importlib import resources

__all__ = ["ORDINARY_WORDS", "PROPER_NOUNS", "is_ordinary", "is_proper"]


def _load(name: str) -> frozenset[str]:
    text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    return frozenset(
        line for line in map(str.strip, text.splitlines()) if line and not line.startswith("#")
    )


ORDINARY_WORDS: frozenset[str] = _load("ordinary.txt")

PROPER_NOUNS: frozenset[str] = _load("proper.txt")
"""The proper nouns a dictionary knows (proper.txt, from the capitalised single-word
entries of Debian's american-english and british-english; ``python -m
scripts.make_proper_nouns``): places, given names and surnames, brands, lower-cased.
It knows ``cambridge``, ``seattle``, ``vegas`` and ``bill``, not ``anberlin``."""


def is_proper(word: str) -> bool:
    """Whether a word, in any case, is a proper noun the dictionaries know."""
    return word.lower() in PROPER_NOUNS


def is_ordinary(word: str) -> bool:
    """Whether a word, in any case and possibly possessive ("Guest's"), is ordinary vocabulary."""
    lowered = word.lower()
    if lowered in ORDINARY_WORDS:
        return True
    # The list has no possessives; typographic apostrophes are as common as ASCII ones.
    for apostrophe in ("'", "\u2019"):
        if lowered.endswith(apostrophe + "s"):
            return lowered[:-2] in ORDINARY_WORDS  # guest's
        if lowered.endswith("s" + apostrophe):
            return lowered[:-1] in ORDINARY_WORDS  # guests'
    return False
