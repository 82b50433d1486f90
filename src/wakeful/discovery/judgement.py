"""The "no tool found" judgement: whether the best-ranked tool may be claimed for a need.

One judgement serves :meth:`.ToolIndex.search`, batches of needs and the session's `find_tools`
(through :meth:`.ToolIndex.rank_judged`). The best tool is claimed only when it both stands out
and shows evidence of serving the need:

- **Stands out**: its score reaches the ranking's calibrated `threshold` (lexical: 0.03 of the
  need's idf mass; hybrid: 1.9 standard deviations above the typical tool, a published 0.3).
- **Evidence**: a score says how a tool compares, not whether it serves the need: "turn off the
  lights" puts a chess server's `get_turn` first on the one word "turn". So the best tool must
  also *cover* the need in its own text (name, description, parameters; not its server's): at
  least `MIN_COVERED_TERMS` (2) of the need's distinct search terms, or `MIN_COVERED_SHARE` (half)
  of their idf mass, which lets a one- or two-word need ("weather in Paris") through. A light
  verb (`LIGHT_VERBS`: "turn", "set", "check", "start", ...) frames a request rather than naming
  a capability ("turn off the lights", "turn on do-not-disturb mode", "set the thermostat"): it
  weighs in the need's mass but is never evidence. Where the transformer read the need in a
  language it knows (the hybrid ranking, needs of up to 48 tokens, not mostly Chinese for
  all-MiniLM-L6-v2), its cosine to the best tool is the evidence instead: at least
  `HybridRanking.precise_floor` (0.33), or `precise_floor_with_words` (0.21) when the words
  corroborate it. A tool a paraphrase describes in other words passes on meaning; a tool that
  merely shares a word does not. A dense-fused answer of the single-embedder rankings
  (`Ranking.dense`, `Ranking.static`) is judged by its threshold alone.

Calibrated on the development catalogs (metatool, livemcpbench) with needs no tool there serves,
written beforehand (bench/discovery/needs; `bench/discovery/calibrate.py` prints the rates). On
English needs the hybrid ranking says "no tool found" for 90-97 % of them and claims a tool for
80 % of the labelled needs; the lexical ranking rejects 90-100 % and claims 62 % (metatool) and
80 % (livemcpbench). Lexical metatool stays short of 80 % by construction: its needs are
paraphrases, and a third of them share a single word with their best tool, exactly as the needs
no tool serves do; even claiming precisely those of its rejected needs whose right tool is in the
top five would reach only 80.5 %. Chinese needs against English tool descriptions have no
evidence in either signal (BM25 cannot match across languages, all-MiniLM-L6-v2 was trained on
English), so they are mostly answered "no tool found" rather than guessed: see
docs/benchmarks.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from .bm25 import FieldedBM25
from .fusion import Ranking
from .hybrid import HybridRanking
from .tokenize import stem

__all__ = [
    "LIGHT_VERBS",
    "MIN_COVERED_SHARE",
    "MIN_COVERED_TERMS",
    "OWN_FIELDS",
    "Scored",
    "claim_threshold",
    "shows_evidence",
]

_FloatArray = npt.NDArray[np.float64]

# The evidence a best tool must show in its own words (see the module docs): this many of the
# need's distinct search terms in its name, description or parameters, or this share of their
# idf mass. One shared word is a coincidence as often as a match.
MIN_COVERED_TERMS: Final = 2
MIN_COVERED_SHARE: Final = 0.5
# The tool-level fields that are the tool's own text: name, description, parameter names and
# descriptions (the last two fields are its server's).
OWN_FIELDS: Final = (0, 1, 2, 3)
# Light verbs and the heads of phrasal verbs, as search terms: in a request they say that
# something is to be done and take their meaning from the words around them ("turn off",
# "set to", "check whether", "start the vacuum"), so sharing one with a tool says nothing about
# serving the need. The verbs the tokenizer already drops as stopwords (do, get, give, have,
# make, let) are not repeated; verbs that name a capability of their own (run, open, send,
# search) are not light.
LIGHT_VERBS: Final = frozenset(
    stem(word)
    for word in (
        "bring",
        "brought",
        "came",
        "check",
        "come",
        "coming",
        "gone",
        "go",
        "going",
        "held",
        "hold",
        "keep",
        "kept",
        "look",
        "put",
        "saw",
        "see",
        "seen",
        "set",
        "start",
        "take",
        "taking",
        "taken",
        "took",
        "tries",
        "try",
        "trying",
        "turn",
        "went",
    )
)


@dataclass(frozen=True)
class Scored:
    """Every tool slot's score for one need, and what judges the best of them.

    `cosines` holds the transformer's cosine of each tool when it read the need in a language it
    knows (its evidence then replaces the words'); `judge_evidence` is False for a dense-fused
    answer of the single-embedder rankings, judged by its threshold alone.
    """

    scores: _FloatArray
    threshold: float
    terms: Sequence[str] = ()
    cosines: _FloatArray | None = None
    judge_evidence: bool = True


def claim_threshold(
    scored: Scored, best: int, tools: FieldedBM25, ranking: Ranking | HybridRanking
) -> float:
    """The score a match must reach to be claimed, given that the tool in slot `best` ranks
    first: the ranking's calibrated threshold, or infinity when that tool shows no evidence of
    serving the need (then nothing is found, however the scores compare)."""
    if shows_evidence(scored, best, tools, ranking):
        return scored.threshold
    return math.inf


def shows_evidence(
    scored: Scored, slot: int, tools: FieldedBM25, ranking: Ranking | HybridRanking
) -> bool:
    """Whether the tool in `slot` serves the need by more than a shared word: the
    transformer's cosine where it read the need, else the need's words in the tool's own
    text (the module docs give the rule and its calibration)."""
    if not scored.judge_evidence:
        return True
    covered, share = tools.coverage(scored.terms, slot, OWN_FIELDS, weak=LIGHT_VERBS)
    words = covered >= MIN_COVERED_TERMS or share >= MIN_COVERED_SHARE
    if scored.cosines is None or not isinstance(ranking, HybridRanking):
        return words
    floor = ranking.precise_floor_with_words if words else ranking.precise_floor
    return bool(scored.cosines[slot] >= floor)
