"""Try combining the "no tool found" evidence signals in one logistic regression (issue 12 item 8).

judgement.py claims the best tool by fixed rules over single signals (the covered words, the
transformer's cosine over the chance cosine). Each signal alone was measured before (its module
docs); this script measures them together. For every need of the development catalogs
(metatool, livemcpbench; whole and with a quarter and a half of their servers, as
fit_judgement.py does, so that catalog size is seen) it records, of the best-ranked tool:

- `margin`: the transformer's cosine minus the chance cosine (hybrid ranking, needs it reads);
- `covered`, `share`, `surprise`: the need's terms its own text holds, their idf share, and
  their idf mass minus ln(tools);
- `light`: whether a light verb was among the words it shares (the rule never counts one);
- `score`, `gap`: the published score and its margin over the runner-up;
- `server`: the transformer's cosine to the tool's server;
- `bm25`: the best BM25 score of any tool over the need's idf mass;
- `terms`: the number of distinct search terms of the need.

It then fits, per ranking, a logistic regression (numpy, Newton's method, a little L2) over a
few subsets of them, each class and catalog weighing the same, and chooses its cut as
fit_judgement.py chooses the floors: the most labelled needs found, on average over the
training catalogs (whole), while at least 90 % of each one's English no-match needs are refused.
Every model is fitted on one catalog and checked on the other (the cross-validation), and on
both; the rule of judgement.py is printed beside it on the same needs. The held-out catalogs are
never read here. The result (2026-12-02): no combination was kept; judgement.py's module docs
and docs/benchmarks.md give the figures.

    python bench/discovery/fit_combined.py [--sample N] [--lexical] [--fresh]

The signals are cached in /tmp/wakeful_fit_combined (`--fresh` recollects them); embeddings
are not: the quantised transformer's vector of a text moves with the batch it is embedded in
(padding changes the activations' quantisation range), so a cache filled from other batches
shifts the cosines by about 0.01 from what the index sees.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibrate import DEVELOPMENT_SETS, _embedders
from fit_judgement import FRACTIONS
from no_match import needs_of
from ours import load_catalog
from toolsets import DATA_ROOT, load_toolset, subsample

from report import Table

SAMPLE = 400
CACHE = Path("/tmp/wakeful_fit_combined")
REFUSE_TARGET = 0.90
RIDGE = 1e-2
SAME_LENGTH = (3, 7)
FEATURES = ("margin", "covered", "share", "surprise", "light", "score", "gap", "server", "bm25")
FEATURES += ("terms",)
# The subsets tried, per ranking (the hybrid ones apply to needs the transformer read).
SUBSETS = {
    "lexical": (
        ("covered", "surprise"),
        ("covered", "share", "surprise"),
        ("covered", "share", "surprise", "light"),
        ("covered", "share", "surprise", "light", "terms"),
        ("covered", "share", "surprise", "score", "gap"),
        ("covered", "share", "surprise", "light", "bm25", "terms"),
        ("covered", "share", "surprise", "light", "score", "gap", "bm25", "terms"),
    ),
    "hybrid": (
        ("margin",),
        ("margin", "covered"),
        ("margin", "covered", "surprise"),
        ("margin", "covered", "share", "surprise"),
        ("margin", "covered", "share", "surprise", "light"),
        ("margin", "share", "surprise", "server"),
        ("margin", "covered", "share", "surprise", "light", "terms"),
        ("margin", "covered", "share", "surprise", "score", "gap"),
        ("margin", "covered", "share", "surprise", "light", "server", "bm25", "terms"),
        FEATURES,
    ),
}


@dataclass(frozen=True)
class Row:
    """One need against one (sub-)catalog: the truth, today's verdict and the signals."""

    catalog: str
    tools: int
    lang: str
    served: bool
    stands_out: bool
    rule: bool
    margin: float | None
    covered: int
    share: float
    surprise: float
    light: bool
    score: float
    gap: float
    server: float | None
    bm25: float
    terms: int


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sample", type=int, default=SAMPLE, help="labelled needs of metatool")
    parser.add_argument("--lexical", action="store_true", help="skip the hybrid ranking")
    parser.add_argument("--fresh", action="store_true", help="recollect the cached features")
    args = parser.parse_args()
    CACHE.mkdir(exist_ok=True)
    for ranking in ("lexical",) if args.lexical else ("lexical", "hybrid"):
        rows = load_rows(ranking, args.sample, args.fresh)
        print(f"\n=== {ranking} ranking: {len(rows)} (need, catalog size) pairs")
        report(ranking, rows)


def load_rows(ranking: str, sample: int, fresh: bool) -> list[Row]:
    path = CACHE / f"{ranking}_{sample}.json"
    if path.exists() and not fresh:
        return [Row(**entry) for entry in json.loads(path.read_text())]
    rows = collect(_embedders() if ranking == "hybrid" else None, sample)
    path.write_text(json.dumps([asdict(row) for row in rows]))
    return rows


def collect(embedders: Any, sample: int) -> list[Row]:
    """Every need's signals against each development catalog, whole and in part."""
    from wakeful.discovery import Catalog, ToolIndex

    rows: list[Row] = []
    for name in DEVELOPMENT_SETS:
        toolset = load_toolset(DATA_ROOT / name)
        catalog = load_catalog(toolset.catalog_path)
        needs = needs_of(toolset, subsample(toolset.queries, sample, seed=3))
        names = sorted(catalog.servers)
        for fraction, seed in FRACTIONS:
            kept = set(random.Random(seed).sample(names, max(2, int(len(names) * fraction))))
            part = (
                catalog
                if len(kept) == len(names)
                else Catalog.from_servers([catalog.servers[n] for n in names if n in kept])
            )
            static, precise = embedders if embedders is not None else (None, None)
            index = ToolIndex.build(part, embedder=static, precise_embedder=precise)
            for need in needs:
                if need.served and not any(server in kept for server, _ in need.expected):
                    continue  # its tools left with their servers: neither served nor not
                row = signals(index, name, need, precise)
                if row is not None:
                    rows.append(row)
    return rows


def signals(index: Any, catalog: str, need: Any, precise: Any) -> Row | None:
    """The signals of the best-ranked tool for `need`; None when no tool scores above zero
    (refused whatever the rule)."""
    from wakeful.discovery.judgement import OWN_FIELDS, evidence, shows_evidence

    scored = index._scores(need.text)
    if scored is None or not np.any(scored.scores > 0.0):
        return None
    order = np.argsort(-scored.scores, kind="stable")
    best = int(order[0])
    runner_up = float(scored.scores[order[1]]) if len(order) > 1 else 0.0
    tools = index._tools
    found = evidence(scored, best, tools, index.ranking)
    terms = list(dict.fromkeys(scored.terms))
    with_light, _ = tools.coverage(terms, best, OWN_FIELDS)
    mass = sum(tools.idf(term) for term in terms)
    lexical = tools.scores(terms)
    server = None
    if found.cosine is not None and precise is not None:
        owner = int(index._server_slot_of_tool[best])
        server = float(index._precise.servers[owner] @ precise.embed([need.text])[0])
    stands_out = bool(scored.scores[best] >= scored.threshold)
    return Row(
        catalog=catalog,
        tools=len(index),
        lang=need.lang,
        served=need.served,
        stands_out=stands_out,
        rule=stands_out and shows_evidence(scored, best, tools, index.ranking),
        margin=None if found.cosine is None else found.cosine - found.chance_cosine,
        covered=found.covered_terms,
        share=found.covered_share,
        surprise=found.word_surprise,
        light=with_light > found.covered_terms,
        score=float(scored.scores[best]),
        gap=float(scored.scores[best]) - runner_up,
        server=server,
        bm25=float(lexical.max()) / mass if mass > 0.0 else 0.0,
        terms=len(terms),
    )


# --- the model --------------------------------------------------------------------------------


def matrix(rows: Sequence[Row], features: Sequence[str]) -> np.ndarray:
    """The rows' features as floats (word surprise clipped: past ±8 it says nothing more)."""
    values = []
    for row in rows:
        entry = asdict(row)
        values.append(
            [
                max(-8.0, min(8.0, entry[f])) if f == "surprise" else float(entry[f] or 0.0)
                for f in features
            ]
        )
    return np.asarray(values, dtype=np.float64)


def fit(rows: Sequence[Row], features: Sequence[str]) -> tuple[np.ndarray, float]:
    """Logistic regression weights (raw units) and bias; each (catalog, class) weighs the same."""
    x = matrix(rows, features)
    y = np.asarray([row.served for row in rows], dtype=np.float64)
    groups: dict[tuple[str, bool], int] = {}
    for row in rows:
        groups[(row.catalog, row.served)] = groups.get((row.catalog, row.served), 0) + 1
    weight = np.asarray([1.0 / groups[(row.catalog, row.served)] for row in rows])
    weight *= len(rows) / weight.sum()
    mean, spread = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - mean) / spread, np.ones((len(rows), 1))])
    beta = np.zeros(z.shape[1])
    ridge = RIDGE * len(rows) * np.eye(z.shape[1])
    ridge[-1, -1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (weight * (p - y)) + ridge @ beta
        hessian = (z * (weight * p * (1.0 - p))[:, None]).T @ z + ridge
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    weights = beta[:-1] / spread
    return weights, float(beta[-1] - weights @ mean)


def claims(
    rows: Sequence[Row], features: Sequence[str], model: tuple[np.ndarray, float], cut: float
) -> np.ndarray:
    """The combined rule's verdicts: the best tool stands out and its logit reaches `cut`;
    needs the model does not cover (hybrid: not read by the transformer) keep today's rule."""
    weights, bias = model
    logit = matrix(rows, features) @ weights + bias
    stands = np.asarray([row.stands_out for row in rows])
    uncovered = np.asarray([row.margin is None and "margin" in features for row in rows])
    rule = np.asarray([row.rule for row in rows])
    return np.where(uncovered, rule, stands & (logit >= cut))


def rates(
    rows: Sequence[Row], verdicts: np.ndarray, catalog: str, tools: int, lang: str = "en"
) -> tuple[float, float]:
    """(labelled needs found, no-match needs refused) of one catalog size and language; needs
    that scored nothing (absent from `rows`) count as refused."""
    chosen = [
        i for i, r in enumerate(rows) if (r.catalog, r.tools, r.lang) == (catalog, tools, lang)
    ]
    served = [bool(verdicts[i]) for i in chosen if rows[i].served]
    unserved = [not verdicts[i] for i in chosen if not rows[i].served]
    total = max(_no_match_count(catalog, lang), len(unserved), 1)
    return sum(served) / max(len(served), 1), (sum(unserved) + total - len(unserved)) / total


_COUNTS: dict[tuple[str, str], int] = {}


def _no_match_count(catalog: str, lang: str) -> int:
    if (catalog, lang) not in _COUNTS:
        toolset = load_toolset(DATA_ROOT / catalog)
        _COUNTS[(catalog, lang)] = sum(
            1 for n in needs_of(toolset, ()) if not n.served and n.lang == lang
        )
    return _COUNTS[(catalog, lang)]


def whole(rows: Sequence[Row], catalog: str) -> int:
    return max(r.tools for r in rows if r.catalog == catalog)


def choose_cut(
    rows: Sequence[Row],
    features: Sequence[str],
    model: tuple[np.ndarray, float],
    training: Sequence[str],
) -> float | None:
    """The cut that finds the most labelled needs (mean over `training`, whole) while refusing
    at least REFUSE_TARGET of each one's English no-match needs; ties go to the stricter. Only
    cuts just above a training no-match need's logit can be best, so only those are tried."""
    weights, bias = model
    logits = matrix(rows, features) @ weights + bias
    largest = {catalog: whole(rows, catalog) for catalog in training}
    sides = [
        logits[i]
        for i, r in enumerate(rows)
        if r.catalog in training and r.tools == largest[r.catalog] and not r.served
    ]
    best: tuple[float, float] | None = None
    for cut in sorted({-math.inf, *(float(v) + 1e-9 for v in sides)}, reverse=True):
        verdicts = claims(rows, features, model, cut)
        measured = [rates(rows, verdicts, c, largest[c]) for c in training]
        if min(m[1] for m in measured) < REFUSE_TARGET:
            continue
        found = sum(m[0] for m in measured) / len(measured)
        if best is None or found > best[1] + 1e-12:
            best = (cut, found)
    return None if best is None else best[0]


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: the chance a labelled need outscores a no-match one."""
    positive, negative = scores[labels], scores[~labels]
    if not len(positive) or not len(negative):
        return math.nan
    wins = (positive[:, None] > negative[None, :]).sum() + 0.5 * (
        positive[:, None] == negative[None, :]
    ).sum()
    return float(wins / (len(positive) * len(negative)))


def report(ranking: str, rows: list[Row]) -> None:
    """Print, for each feature subset and training choice, the rates at every catalog size."""
    if ranking == "hybrid":
        rows = [r for r in rows if r.margin is not None] + [r for r in rows if r.margin is None]
    sizes = sorted({(r.catalog, r.tools) for r in rows})
    english = [r for r in rows if r.lang == "en"]
    labels = np.asarray([r.served for r in english])
    print("AUC of each signal alone (English needs, whole catalogs):")
    for feature in FEATURES:
        cells = []
        for catalog in DEVELOPMENT_SETS:
            size = whole(rows, catalog)
            keep = [i for i, r in enumerate(english) if (r.catalog, r.tools) == (catalog, size)]
            values = matrix([english[i] for i in keep], [feature])[:, 0]
            cells.append(f"{auc(values, labels[keep]):.3f}")
        print(f"  {feature:9} {' / '.join(cells)}")
    table = Table(["model", "fitted on", *(f"{c[:4]} {n}" for c, n in sizes), "zh whole"])
    rule = np.asarray([r.rule for r in rows])
    table.add("today's rule", "-", *(_cell(rows, rule, c, n) for c, n in sizes), _zh(rows, rule))
    sizes0 = DEVELOPMENT_SETS
    for features in SUBSETS[ranking]:
        modelled = [r for r in rows if r.margin is not None or "margin" not in features]
        for training in (*DEVELOPMENT_SETS, "both"):
            catalogs = DEVELOPMENT_SETS if training == "both" else (training,)
            train = [r for r in modelled if r.catalog in catalogs and r.stands_out]
            model = fit(train, features)
            cut = choose_cut(rows, features, model, catalogs)
            name = "+".join(features)
            if cut is None:
                table.add(name, training, *("-" for _ in sizes), "-")
                continue
            verdicts = claims(rows, features, model, cut)
            table.add(
                name,
                training,
                *(_cell(rows, verdicts, c, n) for c, n in sizes),
                _zh(rows, verdicts),
            )
            if training == "both":
                weights, bias = model
                terms = ", ".join(f"{f} {w:+.3f}" for f, w in zip(features, weights, strict=True))
                same = " | ".join(
                    _same_length(rows, v, c) for v in (rule, verdicts) for c in sizes0
                )
                print(f"  {name}: logit = {bias - cut:+.3f}, {terms}")
                print(f"    needs of {SAME_LENGTH} terms, rule then model: {same}")
    print("labelled needs found / English no-match needs refused, per catalog size")
    table.print()


def _cell(rows: Sequence[Row], verdicts: np.ndarray, catalog: str, tools: int) -> str:
    found, refused = rates(rows, verdicts, catalog, tools)
    return f"{found:.3f} / {refused:.3f}"


def _same_length(rows: Sequence[Row], verdicts: np.ndarray, catalog: str) -> str:
    """Found / refused over the whole catalog's English needs of `SAME_LENGTH` search terms:
    the labelled needs are longer than the no-match ones (median 9-11 terms against 5), so a
    model can separate them by length; among needs of the same length it cannot."""
    low, high = SAME_LENGTH
    size = whole(rows, catalog)
    chosen = [
        i
        for i, r in enumerate(rows)
        if (r.catalog, r.tools, r.lang) == (catalog, size, "en") and low <= r.terms <= high
    ]
    found = np.mean([verdicts[i] for i in chosen if rows[i].served])
    refused = 1.0 - np.mean([verdicts[i] for i in chosen if not rows[i].served])
    return f"{catalog[:4]} {found:.3f} / {refused:.3f}"


def _zh(rows: Sequence[Row], verdicts: np.ndarray) -> str:
    cells = []
    for catalog in DEVELOPMENT_SETS:
        _, refused = rates(rows, verdicts, catalog, whole(rows, catalog), "zh")
        cells.append(f"{refused:.2f}")
    return "refused " + " / ".join(cells)


if __name__ == "__main__":
    main()
