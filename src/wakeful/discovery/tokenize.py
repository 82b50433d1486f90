"""Turn tool names, descriptions and needs into search terms, in English and Chinese.

Identifiers are split where their authors joined words (`getStockPrice`, `get_stock_price`,
`get-stock-price`, `mp3`), everything is lowercased, a small stopword list is dropped and English
words are reduced by a light suffix stemmer so that "prices" finds "price". Chinese has no spaces,
so a run of Han characters becomes its overlapping character bigrams (a lone character stays a
unigram): bigrams match most two-character words without a dictionary, which keeps the tokenizer
dependency-free and fast.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

__all__ = ["STOPWORDS", "stem", "tokenize"]

# Words that carry no capability: articles, pronouns, auxiliaries, and the politeness and framing
# of requests ("can you please help me ...") that every need shares.
STOPWORDS: Final = frozenset(
    {
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "please",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "help",
        "want",
        "need",
        "like",
        "know",
        "tell",
        "give",
        "find",
        "get",
        "use",
        "using",
        "used",
        "make",
        "show",
        "able",
        "may",
        "might",
        "must",
    }
)

# A chunk of ASCII letters/digits, or a run of Han characters (CJK unified ideographs).
_CHUNK: Final = re.compile(r"[A-Za-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Inside an ASCII chunk: an acronym (HTTPServer → HTTP, Server), a capitalised or lower word, or
# a number.
_WORD: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_HAN: Final = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# Suffixes removed by :func:`stem`, longest first, with the shortest stem each may leave.
_SUFFIXES: Final = (
    ("ational", "ate", 3),
    ("ization", "ize", 3),
    ("ations", "ate", 3),
    ("ation", "ate", 3),
    ("ities", "ity", 3),
    ("ness", "", 5),
    ("ments", "", 4),
    ("ment", "", 4),
    ("ings", "", 4),
    ("ing", "", 4),
    ("ies", "y", 3),
    ("ied", "y", 3),
    ("sses", "ss", 2),
    ("ed", "", 4),
    ("es", "", 4),
    ("s", "", 3),
)


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light English stemmer: plural, -ing, -ed and a few derivational endings.

    It is deliberately conservative (Porter-like rules without the exceptions tables): a wrong
    conflation costs precision on every query, a missed one only a little recall.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, replacement, min_stem in _SUFFIXES:
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            if len(base) < min_stem:
                continue
            if suffix == "s" and base.endswith(("s", "u", "i")):
                return word  # "class", "status", "analysis" keep their s
            if suffix == "es" and not base.endswith(("ch", "sh", "x", "z", "ss")):
                return _drop_final_e(word[:-1])  # "images" → "imag", "matches" → "match"
            if suffix in {"ing", "ed"} and len(base) > 2 and base[-1] == base[-2] != "s":
                base = base[:-1]  # "mapping" → "map", "stopped" → "stop"
            return _drop_final_e(base + replacement)
    return _drop_final_e(word)


def _drop_final_e(word: str) -> str:
    """Porter's last step: "create", "created" and "creating" all become "creat"."""
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """The search terms of `text`, in order, repeats kept (term frequency matters to BM25)."""
    terms: list[str] = []
    for chunk in _CHUNK.findall(text):
        if _HAN.match(chunk):
            if len(chunk) == 1:
                terms.append(chunk)
            else:
                terms.extend(chunk[i : i + 2] for i in range(len(chunk) - 1))
            continue
        for word in _WORD.findall(chunk):
            lowered = word.lower()
            if len(lowered) == 1 and lowered.isalpha():
                continue  # the "s" of "it's", the "m" of "I'm"
            if not keep_stopwords and lowered in STOPWORDS:
                continue
            terms.append(stem(lowered))
    return terms
