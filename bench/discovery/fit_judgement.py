"""Fit the constants of the "no tool found" judgement on the development catalogs.

The judgement (src/wakeful/discovery/judgement.py) claims the best tool only with evidence: its
own words cover the need beyond coincidence, or (hybrid ranking) the transformer's cosine to it
clears the chance cosine of a catalog that size by a floor, lower when the words corroborate.
This script measures that evidence (`ToolIndex.evidence_of`) for every need of the development
catalogs (metatool, livemcpbench), whole and with a quarter and a half of their servers (so
the size terms are seen at work over 49 to 527 tools), and fits:

1. `MIN_WORD_SURPRISE`: the strictest guard on the covered words' rarity (their idf mass minus
   ln(tools)) that costs at most half a point of labelled needs found on either catalog.
2. The hybrid floors, by a grid search against the issue's targets: the pair (floor alone,
   floor with words) that claims a tool for the most labelled needs, on average over the
   training catalogs (whole), while refusing at least `REFUSE_TARGET` (90 %) of each one's
   English no-match needs; fitted on each catalog alone (checked on the other: the cross-validation)
   and on both (the constants kept), and every fit checked at every catalog size. Needs the
   transformer did not read (long or mostly Chinese) are judged by their words, as in the index.
   (Until 2026-12-02 a logistic regression on the cosine margin and the words evidence, its
   boundary moved to refuse 93 % of the training needs, chose them: with 30 no-match needs a
   catalog that left the fit at the mercy of two or three needs; the grid search states the
   target it meets instead of a proxy for it.)

The held-out catalogs (seal_tools, stabletoolbench) are never read here.

    python bench/discovery/fit_judgement.py [--sample N] [--lexical]

About a minute and a half with the hybrid ranking on 2 CPUs (the sample is 400 of metatool's
labelled needs by default; livemcpbench's 90 are all used).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

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
REFUSE_TARGET = 0.90
# The floors tried, in cosine over the chance cosine (the floor with words never above the other).
FLOORS = tuple(round(0.01 * step, 2) for step in range(0, 31))
FLOORS_WITH_WORDS = tuple(round(0.01 * step, 2) for step in range(-25, 16))


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
    print("\n2. Hybrid floors: the most labelled needs found (mean over the training catalogs)")
    print(f"   with at least {REFUSE_TARGET:.0%} of each one's English no-match needs refused")
    fit_floors(hybrid)


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
            # The whole catalog as the index gets it (server order decides near ties).
            part = (
                catalog
                if len(kept) == len(names)
                else Catalog.from_servers([catalog.servers[n] for n in names if n in kept])
            )
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
    """Fit the two floors on each development catalog and on both (see the module docs), and
    print each fit's rates at every catalog size."""
    table = Table(["fitted on", "floor", "with words", "training: found (mean) / refused (min)"])
    checks = Table(["fitted on", *(f"{c[:4]} {n}" for c, n in sizes(judged))])
    whole = {
        catalog: max(n for c, n in sizes(judged) if c == catalog) for catalog, _ in sizes(judged)
    }
    for training in (*DEVELOPMENT_SETS, "both"):
        catalogs = DEVELOPMENT_SETS if training == "both" else (training,)
        fitted = best_floors(judged, [(c, whole[c]) for c in catalogs])
        if fitted is None:
            print(f"fitted on {training}: no floors refuse {REFUSE_TARGET:.0%}")
            continue
        floor, with_words, found, refused = fitted
        table.add(training, f"{floor:.2f}", f"{with_words:.2f}", f"{found:.3f} / {refused:.3f}")
        cells = []
        for catalog, tools in sizes(judged):
            found_there, refused_there, _, _ = rates(
                judged, claims_with(floor, with_words), catalog, tools
            )
            cells.append(f"{found_there:.3f} / {refused_there:.3f}")
        checks.add(training, *cells)
    table.print()
    print("\nlabelled needs found / English no-match needs refused with those floors")
    checks.print()


def claims_with(floor: float, with_words: float) -> Callable[[Judged], bool]:
    """The judgement with these floors: the best tool stands out, and its cosine clears the
    chance cosine by `floor` (by `with_words` when its words cover the need), or, where the
    transformer did not read the need, its words cover the need."""
    from wakeful.discovery.judgement import MIN_WORD_SURPRISE

    def claims(judged: Judged) -> bool:
        covered = words(judged, MIN_WORD_SURPRISE)
        if judged.cosine_margin is None:
            return judged.stands_out and covered
        return judged.stands_out and judged.cosine_margin >= (with_words if covered else floor)

    return claims


def best_floors(
    judged: Sequence[Judged], training: Sequence[tuple[str, int]]
) -> tuple[float, float, float, float] | None:
    """(floor, floor with words, labelled found, no-match refused) of the pair that finds the
    most labelled needs, on average over the `training` catalogs (each weighing the same),
    while refusing at least `REFUSE_TARGET` of each one's English no-match needs (found is that
    average, refused the worse catalog's). Of tied pairs the strictest is kept (the highest
    floor, then the highest floor with words): a tie says the training needs cannot tell them
    apart, and unseen needs are better refused. None if no pair refuses enough."""
    feasible: list[tuple[float, float, float, float]] = []
    for floor in FLOORS:
        for with_words in FLOORS_WITH_WORDS:
            if with_words > floor:
                continue
            measured = [rates(judged, claims_with(floor, with_words), c, n) for c, n in training]
            refused = min(m[1] for m in measured)
            if refused >= REFUSE_TARGET:
                found = sum(m[0] for m in measured) / len(measured)
                feasible.append((floor, with_words, found, refused))
    if not feasible:
        return None
    most = max(found for _, _, found, _ in feasible)
    tied = [pair for pair in feasible if pair[2] >= most - 1e-12]
    return max(tied, key=lambda pair: (pair[0], pair[1]))


if __name__ == "__main__":
    main()
