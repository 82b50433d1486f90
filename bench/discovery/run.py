"""Tool discovery: ours against BM25 and MCP-Zero on every labelled tool set, side by side.

For each set in ../shared/data/toolsets every method builds its index over the whole catalog
(timed), then answers every query with k=10 (each query timed; for dense methods the query
embedding is included, the model load is not). Reported per set and method: recall@5,
complete@5, top-1 on single-tool queries, nDCG@10, p50/p99 query latency, build time, and the
share of queries ours answered "no tool found". Then, per set and ranking of ours, the "no tool
found" judgement by language: the share of needs no tool serves (needs/, see no_match.py)
answered found=false, and of labelled needs answered found=true. The summary checks the issue's
targets, then the context cost of full schema injection against discovery is printed.

    python bench/discovery/run.py [--sets NAME ...] [--quick] [--no-dense] [--json FILE]

`--quick` scores 200 queries per set (fixed seed); `--no-dense` skips the MiniLM methods, which
are also skipped, with the reason printed, when sentence-transformers is not installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from baselines import BM25Search, MCPZeroSearch, build_threads, load_minilm
from context_cost import ContextCost, context_costs, print_context_costs
from metrics import QueryScore, SetScore, average
from no_match import NoMatchResult, measure, print_no_match
from ours import (
    OursSearch,
    embedder_unavailable,
    load_catalog,
    load_embedder,
    ours_unavailable,
)
from retriever import Retriever
from toolsets import DATA_ROOT, SET_NAMES, LabelledQuery, ToolSet, load_toolset, subsample

from report import Table, header, percentile, verdict

K = 10
QUICK_QUERIES = 200
BASELINES = ("BM25 (Codex tool_search)", "MCP-Zero (MiniLM)")
OURS = ("ours", "ours + embeddings")
LATENCY_TARGET_MS = 5.0
LATENCY_TARGET_TOOLS = 4076
UPSERT_TARGET_MS = 50.0
UPSERT_REPEATS = 9
SAVING_TARGET = 0.95


@dataclass
class MethodResult:
    """One method on one set."""

    set_name: str
    method: str
    tools: int
    score: SetScore
    p50_ms: float
    p99_ms: float
    build_s: float
    upsert_ms: list[float] = field(default_factory=list)
    upsert_server: str = ""
    # How many needs the hybrid ranking gave the transformer (the rest took the long path).
    transformer_needs: int | None = None


@dataclass
class Methods:
    """Which methods run, and why the others do not."""

    model: Any = None
    model_path: str = ""
    embedder: Any = None
    skipped: dict[str, str] = field(default_factory=dict)


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    header(f"Tool discovery: recall, latency and context cost{' (--quick)' if args.quick else ''}")
    methods = choose_methods(args.no_dense)
    for name, reason in methods.skipped.items():
        print(f"skipped {name}: {reason}")
    print(
        f"k={K}; top-1 counts single-tool queries only; abstain = share of queries answered "
        "'no tool found' (ours) or with nothing at all (baselines)\n"
    )

    results: list[MethodResult] = []
    judged: list[NoMatchResult] = []
    dense_cache: dict[tuple[str, str], tuple[Retriever, float]] = {}
    for set_name in args.sets:
        toolset = load_toolset(DATA_ROOT / set_name)
        queries = subsample(toolset.queries, QUICK_QUERIES) if args.quick else toolset.queries
        set_results, set_judged = run_set(toolset, queries, methods, dense_cache)
        print_set(toolset, queries, set_results)
        results.extend(set_results)
        judged.extend(set_judged)

    if judged:
        print_no_match(judged)
        print()
    costs, token_method, origin = context_costs(QUICK_QUERIES if args.quick else None)
    print_summary(results, costs, methods)
    print()
    print_context_costs(costs, token_method, origin)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    if args.json is not None:
        write_json(args.json, results, judged, costs, methods, token_method)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=SET_NAMES, default=list(SET_NAMES))
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_QUERIES} queries per set")
    parser.add_argument("--no-dense", action="store_true", help="skip the MiniLM methods")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    return parser.parse_args()


def choose_methods(no_dense: bool) -> Methods:
    methods = Methods()
    ours_missing = ours_unavailable()
    if ours_missing is not None:
        methods.skipped["ours"] = ours_missing
    if no_dense:
        methods.skipped["MCP-Zero (MiniLM)"] = "--no-dense was given."
        methods.skipped["ours + embeddings"] = "--no-dense was given."
        return methods
    model, path_or_reason = load_minilm()
    if model is None:
        methods.skipped["MCP-Zero (MiniLM)"] = path_or_reason
        methods.skipped["ours + embeddings"] = path_or_reason
        return methods
    methods.model, methods.model_path = model, path_or_reason
    embedder_missing = ours_missing or embedder_unavailable()
    if embedder_missing is not None:
        methods.skipped["ours + embeddings"] = embedder_missing
    else:
        methods.embedder = load_embedder(path_or_reason)
    return methods


def run_set(
    toolset: ToolSet,
    queries: Sequence[LabelledQuery],
    methods: Methods,
    dense_cache: dict[tuple[str, str], tuple[Retriever, float]],
) -> tuple[list[MethodResult], list[NoMatchResult]]:
    """Build every available method over `toolset`, score it on `queries`, and judge ours on
    the needs of no_match.py."""
    # The two seal_tools sets share one catalog (only its "name" differs): a dense index is
    # embedded once and reused, reporting the build time it took.
    catalog_digest = hashlib.sha256(repr(toolset.servers).encode()).hexdigest()
    builders: list[tuple[str, Callable[[], Retriever], bool]] = [
        (BASELINES[0], lambda: BM25Search(toolset.servers), False)
    ]
    if methods.model is not None:
        builders.append((BASELINES[1], lambda: MCPZeroSearch(toolset.servers, methods.model), True))
    if "ours" not in methods.skipped:
        catalog = load_catalog(toolset.catalog_path)
        builders.append((OURS[0], lambda: OursSearch(catalog), False))
        if methods.embedder is not None:
            builders.append((OURS[1], lambda: OursSearch(catalog, methods.embedder), True))

    results = []
    judged = []
    for name, build, cacheable in builders:
        cached = dense_cache.get((name, catalog_digest)) if cacheable else None
        if cached is None:
            with build_threads():
                start = time.perf_counter()
                retriever = build()
                cached = (retriever, time.perf_counter() - start)
            if cacheable:
                dense_cache[(name, catalog_digest)] = cached
        retriever, build_s = cached
        result = evaluate(toolset, queries, retriever, build_s)
        results.append(result)
        if isinstance(retriever, OursSearch):
            judged.append(measure(toolset, queries, retriever, K))
        if isinstance(retriever, OursSearch) and toolset.name.startswith("seal_tools"):
            # Measured last: it edits the index this set was just scored on.
            largest = max(toolset.servers, key=lambda server: len(server.tools))
            samples = retriever.time_upsert(largest.name, UPSERT_REPEATS)
            result.upsert_ms = [sample * 1000 for sample in samples]
            result.upsert_server = f"{largest.name!r}, {len(largest.tools)} tools"
    return results, judged


def evaluate(
    toolset: ToolSet, queries: Sequence[LabelledQuery], retriever: Retriever, build_s: float
) -> MethodResult:
    """Answer every query once, timing each, and score the rankings."""
    retriever.search(queries[0].text, K)  # warm caches and lazy set-up outside the timings
    read_before = retriever.transformer_needs if isinstance(retriever, OursSearch) else None
    scores: list[QueryScore] = []
    latencies: list[float] = []
    for query in queries:
        start = time.perf_counter()
        ranking = retriever.search(query.text, K)
        latencies.append(time.perf_counter() - start)
        scores.append(QueryScore.of(ranking.keys, query.expected, found=ranking.found))
    read_after = retriever.transformer_needs if isinstance(retriever, OursSearch) else None
    return MethodResult(
        set_name=toolset.name,
        method=retriever.name,
        tools=len(toolset.tools),
        score=average(scores),
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        build_s=build_s,
        transformer_needs=(
            None if read_before is None or read_after is None else read_after - read_before
        ),
    )


def print_set(
    toolset: ToolSet, queries: Sequence[LabelledQuery], results: Sequence[MethodResult]
) -> None:
    singles = results[0].score.single_queries if results else 0
    print(
        f"{toolset.name}: {len(toolset.servers):,} servers, {len(toolset.tools):,} tools, "
        f"{len(queries):,} of {len(toolset.queries):,} queries ({singles:,} single-tool)"
    )
    table = Table(
        [
            "method",
            "recall@5",
            "complete@5",
            "top-1",
            "nDCG@10",
            "p50 ms",
            "p99 ms",
            "build s",
            "abstain",
        ]
    )
    for r in results:
        table.add(
            r.method,
            f"{r.score.recall5:.3f}",
            f"{r.score.complete5:.3f}",
            "n/a" if math.isnan(r.score.top1) else f"{r.score.top1:.3f}",
            f"{r.score.ndcg10:.3f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            f"{r.build_s:.2f}",
            f"{r.score.abstain_share:.1%}",
        )
    table.print()
    for r in results:
        if r.transformer_needs is not None:
            print(
                f"{r.method}: the transformer read {r.transformer_needs:,} of {len(queries):,} "
                f"needs whole; the others, over 48 tokens, were split into their requests and "
                "matched by words and static embeddings"
            )
    print()


def print_summary(
    results: Sequence[MethodResult], costs: Sequence[ContextCost], methods: Methods
) -> None:
    print("Targets")
    table = Table(["target", "set", "measured", "verdict"])
    by_set: dict[str, dict[str, MethodResult]] = {}
    for r in results:
        by_set.setdefault(r.set_name, {})[r.method] = r
    for ours_name in OURS:
        if ours_name in methods.skipped:
            table.add(f"{ours_name} beats baselines", "all", "skipped", "n/a")
            continue
        for set_name, rows in by_set.items():
            ours = rows[ours_name]
            rivals = [rows[b] for b in BASELINES if b in rows]
            for metric in ("recall5", "top1"):
                mine = getattr(ours.score, metric)
                best = max((getattr(r.score, metric) for r in rivals), default=math.nan)
                label = "recall@5" if metric == "recall5" else "top-1"
                rival_names = "BM25" if len(rivals) == 1 else "both baselines"
                met = mine > best
                table.add(
                    f"{ours_name} {label} > {rival_names}",
                    set_name,
                    f"{mine:.3f} vs {best:.3f}",
                    "n/a" if math.isnan(best) or math.isnan(mine) else ("PASS" if met else "FAIL"),
                )
    for set_name, rows in by_set.items():
        for name in OURS:
            row = rows.get(name)
            if row is not None and row.tools >= LATENCY_TARGET_TOOLS:
                table.add(
                    f"{name} p50 ≤ {LATENCY_TARGET_MS:g} ms at {row.tools:,} tools",
                    set_name,
                    f"{row.p50_ms:.2f} ms",
                    verdict(row.p50_ms, LATENCY_TARGET_MS),
                )
            if row is not None and row.upsert_ms:
                upsert = statistics.median(row.upsert_ms)
                table.add(
                    f"{name} upsert_server ≤ {UPSERT_TARGET_MS:g} ms "
                    f"(median of {len(row.upsert_ms)})",
                    f"{set_name}: {row.upsert_server}",
                    f"{upsert:.2f} ms",
                    verdict(upsert, UPSERT_TARGET_MS),
                )
    largest = max(costs, key=lambda cost: cost.tools)
    table.add(
        f"context saving ≥ {SAVING_TARGET:.0%} at {largest.tools:,} tools",
        largest.label,
        f"{largest.saving:.1%}",
        verdict(largest.saving, SAVING_TARGET, higher_is_better=True),
    )
    table.print()


def write_json(
    path: Path,
    results: Sequence[MethodResult],
    judged: Sequence[NoMatchResult],
    costs: Sequence[ContextCost],
    methods: Methods,
    token_method: str,
) -> None:
    document = {
        "k": K,
        "skipped": methods.skipped,
        "results": [asdict(r) for r in results],
        "no_tool_found": [asdict(r) for r in judged],
        "context_cost": {
            "tokenizer": token_method,
            "catalogs": [asdict(c) | {"discovery": c.discovery, "saving": c.saving} for c in costs],
        },
    }
    text = json.dumps(_without_nan(document), indent=2, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")
    print(f"results written to {path}")


def _without_nan(value: Any) -> Any:
    """`value` with NaN (top-1 on a set without single-tool queries) as None: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: _without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nan(item) for item in value]
    return value


if __name__ == "__main__":
    main()
