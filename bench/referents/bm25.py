"""A standard-library BM25 relevance scorer, as a harness's pruner would use it.

Choices (documented in BENCHMARKS.md, "Referents on real dialogues"):

* **documents** are the live spans of the session at the scoring pass, and the
  collection statistics (document frequency, average length) are those of that
  live set: the scorer sees only the context it prunes, as a harness would;
* **query** is the latest user turn's text;
* **tokens** are lower-cased runs of letters and digits (``[a-z0-9]+`` after
  case-folding), minus a short list of English stop words;
* **formula** is Okapi BM25 with ``k1 = 1.2``, ``b = 0.75`` and the
  non-negative idf ``ln(1 + (N - n + 0.5) / (n + 0.5))`` (Lucene's), each query
  term counted once per occurrence in the query;
* **normalisation** per pass: every score is divided by the pass's highest
  score, so the best span scores 1.0 (usually the query turn itself) and a span
  that shares no term with the query scores 0.0; when nothing scores above 0
  (a query of stop words only) every span scores 0.0.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping

K1 = 1.2
B = 0.75

_STOP_WORDS = """a an and are as at be but by can could did do does for from had has have he her
    him his i if in into is it its me my no not of on or our please she so than that
    the their them then there these they this those to too us was we were what when
    where which who will with would you your yes ok okay thanks thank"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
"""Words that carry no relevance (BM25's idf would mostly discount them anyway)."""

_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased letter-and-digit runs of ``text`` without :data:`STOP_WORDS`."""
    return [w for w in _WORD.findall(text.casefold()) if w not in STOP_WORDS]


def bm25(query: str, documents: Mapping[str, str]) -> dict[str, float]:
    """Raw Okapi BM25 score of every document (id -> text) against ``query``,
    with the collection statistics of ``documents`` themselves."""
    tokens = {doc_id: tokenize(text) for doc_id, text in documents.items()}
    n_docs = len(tokens)
    if n_docs == 0:
        return {}
    avg_len = sum(len(t) for t in tokens.values()) / n_docs or 1.0
    df: Counter[str] = Counter()
    for words in tokens.values():
        df.update(set(words))
    query_terms = Counter(tokenize(query))
    scores: dict[str, float] = {}
    for doc_id, words in tokens.items():
        tf = Counter(words)
        length_norm = K1 * (1 - B + B * len(words) / avg_len)
        total = 0.0
        for term, q_count in query_terms.items():
            f = tf.get(term, 0)
            if not f:
                continue
            n = df[term]
            idf = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
            total += q_count * idf * f * (K1 + 1) / (f + length_norm)
        scores[doc_id] = total
    return scores


def normalised(scores: Mapping[str, float]) -> dict[str, float]:
    """``scores`` divided by their maximum (all 0.0 when none is above 0)."""
    top = max(scores.values(), default=0.0)
    if top <= 0:
        return dict.fromkeys(scores, 0.0)
    return {doc_id: value / top for doc_id, value in scores.items()}


def score_pass(query: str, documents: Mapping[str, str]) -> dict[str, float]:
    """One scoring pass: BM25 of every live span against the query, in [0, 1]."""
    return normalised(bm25(query, documents))
