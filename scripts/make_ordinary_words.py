"""Generate streams/engine/words/ordinary.txt, the project's ordinary English vocabulary.

The referent extractor uses the list to tell distinctive words (venue names such as
"warkworth" or "allenbell") from ordinary words of the language. The wire contract
defines ordinary vocabulary as a documented list of common words with their
inflections and spelling variants; this script is that documentation made executable.

Run it from the repository root (a maintainer tool, so it needs the `maintainer` extra
and Debian's `wamerican` and `wbritish` packages; nothing at run time needs either):

    pip install -e '.[maintainer]'
    apt-get install wamerican wbritish
    python scripts/make_ordinary_words.py

The rule, and why each filter exists:

1. Frequency: the top N (default 25,000) words of wordfreq's English list. Frequency
   is what makes a word ordinary; a dictionary alone would make every rare headword
   (and so many a venue name) ordinary. N is 25,000 rather than a round 20,000 because
   the contract's own examples need it: "summarize" ranks 21,674 and "downgrade"
   21,494 in wordfreq 3.1.
2. Purely alphabetic: wordfreq's tokens include numbers, contractions ("don't") and
   fragments; the extractor only asks about alphabetic words.
3. Lower-case dictionary entry (Debian's american-english or british-english): wordfreq
   folds case, so "cambridge" and "london" are frequent only as names. The dictionaries
   keep case, and list a proper name only capitalised ("Cambridge"), so requiring a
   lower-case entry drops names while keeping words that are also names ("bill",
   "rose", "john" the noun), decided by the dictionary and not by a hand-made list.
4. Spelling variants (-ise/-ize, -isation/-ization, -yse/-yze, -our/-or, -re/-er,
   -ogue/-og, -ence/-ense): added only when the variant is a lower-case entry of exactly
   ONE of the two dictionaries. A real regional variant ("summarise", "colour",
   "centre") is listed by one side only; a look-alike listed by both ("tour" -> "tor",
   "tire" -> "tier") is a different word that happens to share letters, not a variant.
5. Inflections (-s, -es, -ies, -ves, -ed, -d, -ied, -ing with e-dropping and consonant
   doubling, -er/-est, -ly): added only when the form is a lower-case entry of either
   dictionary, so the suffix rules may over-generate ("visitting") without harm, and
   an inflection never brings in a non-word. They are applied to the words of steps
   1-4, and the variants of step 4 are applied again to the inflected forms, so
   "summarising" comes from "summarize" -> "summarise" and "colours" -> "colors" too.

The output is sorted, one word per line, after one `#` header line naming the command,
the wordfreq version, N and the dictionary package versions, so a regenerated list
that differs says why. No timestamp, so regenerating with the same inputs gives the
same bytes.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

DEFAULT_TOP = 25_000
DEFAULT_AMERICAN = Path("/usr/share/dict/american-english")
DEFAULT_BRITISH = Path("/usr/share/dict/british-english")
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "streams/engine/words/ordinary.txt"

VOWELS = frozenset("aeiou")

# (ending, its other regional spelling), both directions listed: the regional check in
# select_ordinary decides which side is a real variant.
_END_VARIANTS: tuple[tuple[str, str], ...] = (
    ("isation", "ization"),
    ("ization", "isation"),
    ("ise", "ize"),
    ("ize", "ise"),
    ("yse", "yze"),
    ("yze", "yse"),
    ("re", "er"),
    ("er", "re"),
    ("ogue", "og"),
    ("og", "ogue"),
    ("ence", "ense"),
    ("ense", "ence"),
)
# Swapped anywhere in the word, not only at its end, because the inflected and derived
# forms carry them inside: "summarising", "favourite", "colours".
_INNER_VARIANTS: tuple[tuple[str, str], ...] = (
    ("our", "or"),
    ("or", "our"),
    ("is", "iz"),
    ("iz", "is"),
    ("ys", "yz"),
    ("yz", "ys"),
)


def load_dictionary(path: Path) -> frozenset[str]:
    """The entries of a /usr/share/dict word list that are lower-case and alphabetic.

    Capitalised entries are proper names (or words only used as such), and entries with
    an apostrophe are possessives; neither is ordinary vocabulary.
    """
    words = path.read_text(encoding="utf-8").split()
    return frozenset(w for w in words if w.isalpha() and w == w.lower())


def _is_consonant(ch: str) -> bool:
    return ch.isalpha() and ch not in VOWELS


def _doubles(word: str) -> bool:
    """Whether the word may double its last consonant before a vowel suffix (run, running).

    Only a possibility: stress decides ("begin" doubles, "visit" does not), and the
    dictionary check decides which form exists, so both forms are tried.
    """
    return (
        len(word) >= 3
        and _is_consonant(word[-1])
        and word[-1] not in "wxy"
        and word[-2] in VOWELS
        and _is_consonant(word[-3])
    )


def _vowel_suffixed(word: str, suffix: str) -> set[str]:
    """The word with -ed, -er or -est (suffixes that start with e)."""
    if word.endswith("e"):
        return {word + suffix[1:]}  # bake -> baked, nice -> nicer
    if len(word) >= 2 and word.endswith("y") and _is_consonant(word[-2]):
        return {word[:-1] + "i" + suffix}  # carry -> carried, happy -> happier
    forms = {word + suffix}
    if _doubles(word):
        forms.add(word + word[-1] + suffix)  # stop -> stopped, big -> bigger
    return forms


def _ing(word: str) -> set[str]:
    if word.endswith("ie"):
        return {word[:-2] + "ying"}  # die -> dying
    if len(word) > 2 and word.endswith("e") and word[-2] not in "eoy":
        return {word[:-1] + "ing"}  # make -> making; see -> seeing, dye -> dyeing below
    forms = {word + "ing"}
    if _doubles(word):
        forms.add(word + word[-1] + "ing")
    return forms


def _plural(word: str) -> set[str]:
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return {word + "es"}
    if len(word) >= 2 and word.endswith("y") and _is_consonant(word[-2]):
        return {word[:-1] + "ies"}
    forms = {word + "s"}
    if word.endswith("o"):
        forms.add(word + "es")  # potato -> potatoes, beside photo -> photos
    if word.endswith("fe"):
        forms.add(word[:-2] + "ves")  # knife -> knives
    elif word.endswith("f"):
        forms.add(word[:-1] + "ves")  # leaf -> leaves
    return forms


def _adverb(word: str) -> set[str]:
    if len(word) >= 2 and word.endswith("y") and _is_consonant(word[-2]):
        return {word[:-1] + "ily"}  # happy -> happily
    if len(word) >= 3 and word.endswith("le") and _is_consonant(word[-3]):
        return {word[:-1] + "y"}  # gentle -> gently
    if word.endswith("ic"):
        return {word + "ally", word + "ly"}  # basic -> basically, public -> publicly
    if word.endswith("ll"):
        return {word + "y"}  # full -> fully
    return {word + "ly"}


def inflections(word: str) -> set[str]:
    """Candidate inflected forms of a word; most are not words, the caller filters them."""
    forms = _plural(word) | _ing(word) | _adverb(word)
    for suffix in ("ed", "er", "est"):
        forms |= _vowel_suffixed(word, suffix)
    forms.discard(word)
    return forms


def spelling_variants(word: str) -> set[str]:
    """Candidate British/American spellings of a word; the caller filters them."""
    variants: set[str] = set()
    for ending, other in _END_VARIANTS:
        if word.endswith(ending) and len(word) > len(ending) + 1:
            variants.add(word[: -len(ending)] + other)
    for inner, other in _INNER_VARIANTS:
        start = word.find(inner)
        while start != -1:
            variants.add(word[:start] + other + word[start + len(inner) :])
            start = word.find(inner, start + 1)
    variants.discard(word)
    return variants


def select_ordinary(
    frequent: Iterable[str],
    american: frozenset[str],
    british: frozenset[str],
) -> list[str]:
    """The ordinary vocabulary, sorted: the rule of this module's docstring.

    `frequent` is the frequency list already cut at N (most frequent first, though the
    order does not matter); `american` and `british` are the lower-case entries of the
    two dictionaries (load_dictionary).
    """
    either = american | british
    regional = american ^ british

    def with_variants(words: set[str]) -> set[str]:
        return words | {v for w in words for v in spelling_variants(w) if v in regional}

    kept = {w for w in frequent if w.isalpha() and w in either}
    bases = with_variants(kept)
    inflected = bases | {f for w in bases for f in inflections(w) if f in either}
    return sorted(with_variants(inflected))


def package_version(path: Path) -> str:
    """The Debian package and version that installed a dictionary, for the header."""
    try:
        owner = subprocess.run(
            ["dpkg-query", "-S", str(path)], capture_output=True, text=True, check=True
        ).stdout
        package = owner.split(":", 1)[0].strip()
        version = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # A dictionary given by path from elsewhere: the header then says so, not a guess.
        return f"{path} (no Debian package)"
    return f"{package} {version}"


def _header(top: int, american: Path, british: Path) -> str:
    wordfreq_version = importlib.metadata.version("wordfreq")
    return (
        f"# generated by scripts/make_ordinary_words.py --top {top}"
        f" (wordfreq {wordfreq_version} top_n_list('en', {top});"
        f" {package_version(american)}; {package_version(british)})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--top", type=int, default=DEFAULT_TOP, help="words of wordfreq to take")
    parser.add_argument("--american", type=Path, default=DEFAULT_AMERICAN)
    parser.add_argument("--british", type=Path, default=DEFAULT_BRITISH)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    missing = [p for p in (args.american, args.british) if not p.is_file()]
    if missing:
        names = ", ".join(str(p) for p in missing)
        print(
            f"error: dictionary word list not found: {names}\n"
            "install Debian's word lists (apt-get install wamerican wbritish)"
            " or pass --american/--british",
            file=sys.stderr,
        )
        return 2
    try:
        # Imported here so the selection functions above stay importable (and testable)
        # without the maintainer extra.
        import wordfreq
    except ImportError:
        print(
            "error: wordfreq is not installed (pip install -e '.[maintainer]')",
            file=sys.stderr,
        )
        return 2

    frequent = wordfreq.top_n_list("en", args.top)
    words = select_ordinary(frequent, load_dictionary(args.american), load_dictionary(args.british))
    header = _header(args.top, args.american, args.british)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(header + "\n" + "\n".join(words) + "\n", encoding="utf-8")
    print(f"{len(words)} words -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
