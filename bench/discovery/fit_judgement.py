"""Fit the constants of the "no tool found" judgement on the development catalogs.

The judgement (src/wakeful/discovery/judgement.py) claims the best tool only with evidence: its
own words cover the need beyond coincidence, or (hybrid ranking) the transformer's cosine to it
clears the chance cosine of a catalog that size by a floor, lower when the words corroborate.
This script measures that evidence (`ToolIndex.evidence_of`) for every need of the development
catalogs (metatool, livemcpbench), whole and with a quarter and a half of their servers (so
the size terms are seen at work over 49 to 527 tools), and fits:

1. `MIN_WORD_SURPRISE`: the strictest guard on the covered words' rarity (their idf mass minus
   ln(tools)) that costs at most half a point of labelled needs found on either catalog.
2. The hybrid floors: a logistic regression (numpy, L2, classes weighted equally, weights kept
   non-negative) of "a tool serves the need" on (cosine - chance cosine, words evidence), fitted
   on one catalog and checked on the other, then on both; its decision boundary, moved until
   `REFUSE_TARGET` of the training catalog's English no-match needs are refused, gives the two
   floors of `HybridRanking`.

The held-out catalogs (seal_tools, stabletoolbench) are never read here.

    python bench/discovery/fit_judgement.py [--sample N] [--lexical]

About a minute with the hybrid ranking on 2 CPUs (the sample is 400 of metatool's labelled
needs by default; livemcpbench's 90 are all used).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibrate import DEVELOPMENT_SETS, _embedders
from no_match import needs_of
from ours import load_catalog
from toolsets import DATA_ROOT, load_toolset, subsample

from report import Table

SAMPLE = 400
# Shares of a catalog's servers kept (two draws each below 1), so the size terms vary.
FRACTIONS = ((0.25, 0), (0.25, 1), (0.5, 0), (0.5, 1), (1.0, 0))
GUARDS = (None, -4.0, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0)
GUARD_COST = 0.005
REFUSE_TARGET = 0.93
L2 = 1.0


@dataclass(frozen=True)
class Judged:
    """One need against one (sub-)catalog: what the judgement weighs, and the truth."""

    catalog: str
    tools: int
    lang: str
    served: bool
    stands_out: bool
    covered_terms: int
    covered_share: float
    word_surprise: float
    cosine_margin: float | None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sample", type=int, default=SAMPLE, help="labelled needs of metatool")
    parser.add_argument("--lexical", action="store_true", help="skip the hybrid ranking")
    args = parser.parse_args()
    embedders = None if args.lexical else _embedders()

    lexical = collect(None, args.sample)
    print("1. Words evidence guard, lexical ranking: labelled needs found / English no-match")
    print("   needs refused, per catalog size (tools), for each MIN_WORD_SURPRISE")
    print_guards(lexical)
    if embedders is None:
        return
    hybrid = collect(embedders, args.sample)
    print("\n   ... and the same with the hybrid ranking's words evidence alone")
    print_guards([j for j in hybrid if j.cosine_margin is not None])
    print("\n2. Hybrid floors: logistic regression on (cosine - chance cosine, words evidence)")
    fit_floors([j for j in hybrid if j.cosine_margin is not None])


def collect(embedders: Any, sample: int) -> list[Judged]:
    """Every need's evidence against each development catalog, whole and in part."""
    from wakeful.discovery import Catalog, ToolIndex

    judged: list[Judged] = []
    for name in DEVELOPMENT_SETS:
        toolset = load_toolset(DATA_ROOT / name)
        catalog = load_catalog(toolset.catalog_path)
        expected = {query.text: query.expected for query in toolset.queries}
        needs = needs_of(toolset, subsample(toolset.queries, sample, seed=3))
        names = sorted(catalog.servers)
        for fraction, seed in FRACTIONS:
            kept = set(random.Random(seed).sample(names, max(2, int(len(names) * fraction))))
            part = Catalog.from_servers([catalog.servers[n] for n in names if n in kept])
            static, transformer = embedders if embedders is not None else (None, None)
            index = ToolIndex.build(part, embedder=static, precise_embedder=transformer)
            for need in needs:
                # A labelled need whose tools were dropped with their servers is neither.
                tools = expected.get(need.text, ())
                if need.served and tools and not any(server in kept for server, _ in tools):
                    continue
                if need.served and not tools:
                    continue  # the Chinese labelled needs: measured by calibrate.py
                ranked, _ = index.rank_judged(need.text, 1)
                found = index.evidence_of(need.text)
                if found is None:
                    continue  # nothing scored: refused whatever the constants
                judged.append(
                    Judged(
                        catalog=name,
                        tools=len(index),
                        lang=need.lang,
                        served=need.served,
                        stands_out=bool(ranked) and ranked[0].score >= index.ranking.threshold,
                        covered_terms=found.covered_terms,
                        covered_share=found.covered_share,
                        word_surprise=found.word_surprise,
                        cosine_margin=None
                        if found.cosine is None
                        else found.cosine - found.chance_cosine,
                    )
                )
    return judged


def words(judged: Judged, guard: float | None) -> bool:
    """The words evidence of judgement.py with the rarity guard `guard` (None: no guard)."""
    from wakeful.discovery.judgement import MIN_COVERED_SHARE, MIN_COVERED_TERMS

    covers = judged.covered_terms >= MIN_COVERED_TERMS or judged.covered_share >= MIN_COVERED_SHARE
    return covers and (guard is None or judged.word_surprise >= guard)


def rates(
    judged: Sequence[Judged], claims: Callable[[Judged], bool], catalog: str, tools: int
) -> tuple[float, float, int, int]:
    """(labelled needs found, English no-match needs refused, their counts) for one catalog.

    Needs that scored nothing are not in `judged`: they count as refused, which only the
    no-match side has (every labelled need's tool shares a word or a meaning with it)."""
    chosen = [j for j in judged if j.catalog == catalog and j.tools == tools and j.lang == "en"]
    served = [claims(j) for j in chosen if j.served]
    unserved = [not claims(j) for j in chosen if not j.served]
    total = max(_english_no_match(catalog), len(unserved), 1)
    refused = (sum(unserved) + total - len(unserved)) / total
    return (sum(served) / max(len(served), 1), refused, len(served), total)


@cache
def _english_no_match(catalog: str) -> int:
    toolset = load_toolset(DATA_ROOT / catalog)
    return sum(1 for need in needs_of(toolset, ()) if not need.served and need.lang == "en")


def sizes(judged: Sequence[Judged]) -> list[tuple[str, int]]:
    return sorted({(j.catalog, j.tools) for j in judged})


def print_guards(judged: Sequence[Judged]) -> float | None:
    """Print the rates under each guard; return the strictest that costs at most
    `GUARD_COST` of the labelled needs found at any catalog size."""
    table = Table(["MIN_WORD_SURPRISE", *(f"{c[:4]} {n}" for c, n in sizes(judged))])
    unguarded: list[float] = []
    chosen: float | None = None
    for guard in GUARDS:
        cells = []
        found_rates = []
        for catalog, tools in sizes(judged):
            found, refused, _, _ = rates(
                judged, lambda j, g=guard: j.stands_out and words(j, g), catalog, tools
            )
            cells.append(f"{found:.3f} / {refused:.3f}")
            found_rates.append(found)
        table.add("none" if guard is None else f"{guard:g}", *cells)
        if guard is None:
            unguarded = found_rates
        elif all(b - a <= GUARD_COST for a, b in zip(found_rates, unguarded, strict=True)):
            chosen = guard
    table.print()
    print(f"strictest guard costing at most {GUARD_COST:.1%} of labelled needs found: {chosen}")
    return chosen


def fit_floors(judged: Sequence[Judged]) -> None:
    from wakeful.discovery.judgement import MIN_WORD_SURPRISE

    table = Table(["fitted on", "w0", "w cosine", "w words", "floor", "with words"])
    checks = Table(["fitted on", *(f"{c[:4]} {n}" for c, n in sizes(judged))])
    for training in (*DEVELOPMENT_SETS, "both"):
        train = [j for j in judged if training in (j.catalog, "both")]
        features = _features(train, MIN_WORD_SURPRISE)
        truth = np.array([j.served for j in train])
        weights = fit_logistic(features, truth)
        logits = np.column_stack([np.ones(len(train)), features]) @ weights
        refused = np.sort(logits[[not j.served and j.lang == "en" for j in train]])
        cut = float(refused[math.ceil(REFUSE_TARGET * len(refused)) - 1]) + 1e-9
        w0, w_cosine, w_words = (float(w) for w in weights)
        if w_cosine <= 0.0:
            print(f"fitted on {training}: the cosine got no weight; no floors")
            continue
        floor = (cut - w0) / w_cosine
        with_words = (cut - w0 - w_words) / w_cosine
        table.add(
            training,
            f"{w0:.2f}",
            f"{w_cosine:.2f}",
            f"{w_words:.2f}",
            f"{floor:.3f}",
            f"{with_words:.3f}",
        )
        cells = []
        for catalog, tools in sizes(judged):

            def claims(j: Judged, a: float = floor, b: float = with_words) -> bool:
                margin = j.cosine_margin if j.cosine_margin is not None else -math.inf
                return j.stands_out and margin >= (b if words(j, MIN_WORD_SURPRISE) else a)

            found, refused_share, _, _ = rates(judged, claims, catalog, tools)
            cells.append(f"{found:.3f} / {refused_share:.3f}")
        checks.add(training, *cells)
    table.print()
    print("\nlabelled needs found / English no-match needs refused with those floors")
    checks.print()


def _features(judged: Sequence[Judged], guard: float) -> npt.NDArray[np.float64]:
    return np.array(
        [[j.cosine_margin or 0.0, float(words(j, guard))] for j in judged], dtype=np.float64
    )


def fit_logistic(
    features: npt.NDArray[np.float64], truth: npt.NDArray[np.bool_], l2: float = L2
) -> npt.NDArray[np.float64]:
    """Intercept and weights of an L2-regularised logistic regression (Newton's method), both
    classes weighted equally; a feature whose weight comes out negative is dropped and the rest
    refitted, since more evidence must never count against a tool."""
    active = list(range(features.shape[1]))
    while True:
        weights = _newton(features[:, active], truth, l2)
        negative = [a for a, w in zip(active, weights[1:], strict=True) if w < 0.0]
        if not negative:
            break
        active.remove(negative[0])
    full = np.zeros(features.shape[1] + 1)
    full[0] = weights[0]
    for a, w in zip(active, weights[1:], strict=True):
        full[1 + a] = w
    return full


def _newton(
    features: npt.NDArray[np.float64], truth: npt.NDArray[np.bool_], l2: float
) -> npt.NDArray[np.float64]:
    x = np.column_stack([np.ones(len(truth)), features])
    y = truth.astype(np.float64)
    share = y.mean()
    sample_weight = np.where(truth, 0.5 / share, 0.5 / (1.0 - share)) / len(y)
    penalty = l2 * np.diag(np.r_[0.0, np.ones(x.shape[1] - 1)]) / len(y)
    weights = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ weights)))
        gradient = x.T @ (sample_weight * (p - y)) + penalty @ weights
        hessian = (x * (sample_weight * p * (1.0 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return weights


if __name__ == "__main__":
    main()
