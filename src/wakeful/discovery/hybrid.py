"""The hybrid ranking: words, static token embeddings and the transformer, standardised per need.

Three signals score every tool for a need, each mixing the tool's own similarity with its
server's (:func:`.fusion.levels`): BM25F over the tools' words, static token embeddings
(:class:`.StaticEmbedder`, microseconds) and the full sentence transformer (:class:`.OnnxEmbedder`,
about 0.13 ms a token). Their raw scales differ from signal to signal and from need to need
(a long need covers a small share of its own words; cosines crowd together), so each is
standardised over the catalog's tools before they are added: a tool's score is how many
standard deviations it stands above the typical tool. A signal that singles out a few tools
therefore speaks loudly for this need, and one that scores everything alike barely moves the
ranking, which is what fixed weights over raw scores could not do.

Two paths, by the need's length in the transformer's tokens:

- **Up to `precise_max_tokens` (48)**, a need is one request, often a paraphrase sharing few
  words with the tool's description: the transformer reads it whole and leads (weights 0.25
  words, 0.55 transformer, 0.2 static).
- **Longer**, a need usually makes several requests (:mod:`.need_parts`); one sentence vector
  would average them, and embedding it would cost 7 ms and more. Each part is scored by words
  and static embeddings (0.7 / 0.3), a tool keeps its best part, and that is averaged with the
  same score of the whole need, so a tool that serves the need as a whole still ranks.

A catalog of a handful of tools has no distribution to speak of (one tool is always exactly
average), so each signal's mean and spread are shrunk toward a prior: the typical mean and
spread of that signal over the development catalogs, weighted as `prior_weight` (16) tools.
Over hundreds of tools the prior hardly matters; over three it keeps a matching tool above an
unrelated one by what the signal says in absolute terms.

Everything was chosen on the development sets (metatool, livemcpbench); see docs/benchmarks.md
for the evaluation sets. The published score maps the standardised sum `z` to `z / (z + c)`,
in [0, 1), with `c` = 4.4 (a score of 0.5 is a tool 4.4 standard deviations above the typical).

"No tool found" (:mod:`.judgement`) asks two things of the best tool. It must stand out:
a published score of at least `threshold`, 0.3 (z ≥ 1.9). And it must show evidence of serving
the need, which standing out does not prove (for a need no tool serves, some tool still stands
out on a shared word): where the transformer read the need, its cosine to the tool clears the
chance cosine of a catalog that size (`cosine_spread` times sqrt(2 ln tools)) by
`precise_floor` (0.16), or by `precise_floor_with_words` (-0.16) when the tool's own text also
covers the need's words; otherwise the words alone must cover the need. Fitted on the
development catalogs with needs no tool there serves (bench/discovery/fit_judgement.py) to
refuse at least 90 % of the English ones: 93 % (metatool) and 91 % (livemcpbench) are refused,
while 76 % and 81 % of the labelled needs still find a tool. all-MiniLM-L6-v2 was trained on
English: its cosines for a mostly Chinese need say nothing (a Chinese need no tool serves
scores as high as one that is served), so such needs are judged by their words
(`precise_reads_han` False).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from .fusion import Ranking, dense_levels, levels

__all__ = ["HybridRanking", "LevelScores", "hybrid_scores", "mostly_han", "standardise"]

_FloatArray = npt.NDArray[np.float64]
_BoolArray = npt.NDArray[np.bool_]

# How each signal mixes a tool with its server: the lexical constants of `Ranking.lexical`, and
# the dense ones of `Ranking.always_dense`.
_LEXICAL_LEVELS = Ranking.lexical()
_DENSE_LEVELS = Ranking.always_dense()

# A Han (CJK unified ideograph) character, and a run of Latin letters or digits.
_HAN: Final = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD: Final = re.compile(r"[A-Za-z0-9]+")

# Under this the others agree so closely that any difference is noise.
_LEAST_VARIANCE = 1e-12

# One signal of one text: (per-tool similarity, its server's similarity), by tool slot.
LevelScores = tuple[_FloatArray, _FloatArray]


@dataclass(frozen=True)
class HybridRanking:
    """The weights of the two paths, the length that separates them, and the calibration."""

    lexical_weight: float = 0.25
    precise_weight: float = 0.55
    static_weight: float = 0.2
    long_lexical_weight: float = 0.7
    parts_weight: float = 0.5
    precise_max_tokens: int = 48
    # The standardised sum that publishes as 0.5, and the published score the best tool must
    # reach to be claimed (with the evidence below; see the module docs).
    calibration: float = 4.4
    threshold: float = 0.3
    # The transformer's cosine the best tool needs as evidence, over the chance cosine (the
    # highest one tool of the catalog reaches for a need none serves: `cosine_spread`, the
    # typical spread of a need's cosines, times sqrt(2 ln tools)), alone or when its own text
    # also covers the need's words; and whether the transformer reads mostly Chinese text.
    precise_floor: float = 0.16
    precise_floor_with_words: float = -0.16
    cosine_spread: float = 0.065
    precise_reads_han: bool = False
    # Each signal's typical (mean, standard deviation) over a catalog's tools for one need
    # (medians over the development needs, all-MiniLM-L6-v2 for the dense ones), and how many
    # tools' worth of weight that prior carries against the catalog's own figures.
    lexical_prior: tuple[float, float] = (0.004, 0.01)
    static_prior: tuple[float, float] = (0.21, 0.075)
    precise_prior: tuple[float, float] = (0.056, 0.05)
    prior_weight: float = 16.0


def mostly_han(text: str) -> bool:
    """Whether `text` is mostly Chinese: more words' worth of Han characters (two to a word)
    than Latin words, so "查询 Maven 的最新版本" is and "get the 八字 of a date" is not."""
    return len(_HAN.findall(text)) / 2 > len(_LATIN_WORD.findall(text))


def standardise(
    values: _FloatArray,
    live: _BoolArray,
    prior: tuple[float, float] = (0.0, 0.0),
    prior_weight: float = 0.0,
) -> _FloatArray:
    """Each slot's value in standard deviations above the other live slots' mean, their mean
    and spread pooled with `prior` (mean, deviation) counted as `prior_weight` slots.

    Leaving the slot itself out keeps a clear winner from pulling the mean and spread toward
    itself, so its distance does not saturate at the square root of the catalog's size: one
    tool among three can stand as far out as one among thousands.
    """
    alive = values[live]
    others = len(alive) - 1 + prior_weight
    if others <= 0:
        return np.zeros_like(values)
    prior_mean, prior_spread = prior
    total = float(alive.sum()) + prior_weight * prior_mean
    squares = float(np.square(alive).sum()) + prior_weight * (prior_spread**2 + prior_mean**2)
    mean = (total - values) / others
    variance = (squares - np.square(values)) / others - np.square(mean)
    spread = np.sqrt(np.maximum(variance, _LEAST_VARIANCE))
    standardised: _FloatArray = np.where(live, (values - mean) / spread, 0.0)
    return standardised


def hybrid_scores(
    ranking: HybridRanking,
    *,
    live: _BoolArray,
    lexical: Sequence[LevelScores],
    static: Sequence[LevelScores] | None,
    precise: LevelScores | None,
) -> _FloatArray:
    """The published score of every tool slot, in [0, 1) (0 for free slots).

    `lexical` and `static` hold the whole need first, then its parts (long needs only);
    `precise` is the transformer's view of the whole need, None on the long path.
    """
    prior_weight = ranking.prior_weight
    words = [
        standardise(
            levels(tool, server, _LEXICAL_LEVELS), live, ranking.lexical_prior, prior_weight
        )
        for tool, server in lexical
    ]
    tokens = (
        [
            standardise(
                dense_levels(tool, server, _DENSE_LEVELS), live, ranking.static_prior, prior_weight
            )
            for tool, server in static
        ]
        if static is not None
        else None
    )
    if precise is not None:
        signals = [(ranking.lexical_weight, words[0])]
        transformer = standardise(
            dense_levels(*precise, _DENSE_LEVELS), live, ranking.precise_prior, prior_weight
        )
        signals.append((ranking.precise_weight, transformer))
        if tokens is not None:
            signals.append((ranking.static_weight, tokens[0]))
        total = sum(weight for weight, _ in signals)
        fused = sum((weight / total) * signal for weight, signal in signals)
    else:

        def matched(i: int) -> _FloatArray:
            if tokens is None:
                return words[i]
            share = ranking.long_lexical_weight
            return share * words[i] + (1.0 - share) * tokens[i]

        fused = matched(0)
        if len(words) > 1:
            best_part = np.max([matched(i) for i in range(1, len(words))], axis=0)
            fused = (1.0 - ranking.parts_weight) * fused + ranking.parts_weight * best_part
    return _publish(np.asarray(fused, dtype=np.float64), ranking.calibration, live)


def _publish(fused: _FloatArray, calibration: float, live: _BoolArray) -> _FloatArray:
    positive = np.where(live, np.maximum(fused, 0.0), 0.0)
    published: _FloatArray = positive / (positive + calibration)
    return published
