"""Ordinary English vocabulary: the common words of the language, to tell distinctive words from.

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

__all__ = ["ORDINARY_WORDS", "is_ordinary"]


def _load() -> frozenset[str]:
    text = resources.files(__name__).joinpath("ordinary.txt").read_text(encoding="utf-8")
    return frozenset(
        line for line in map(str.strip, text.splitlines()) if line and not line.startswith("#")
    )


ORDINARY_WORDS: frozenset[str] = _load()


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
