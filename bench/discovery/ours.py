"""`wakeful.discovery` seen through the benchmark's `Retriever` interface.

Imported lazily so that the baselines run while the index is still being written: when
`wakeful.discovery` lacks `ToolIndex`, the benchmark prints why "ours" was skipped.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from retriever import Ranking


def ours_unavailable() -> str | None:
    """Why `wakeful.discovery` cannot be benchmarked, or None when it can."""
    try:
        from wakeful.discovery import Catalog, ToolIndex  # noqa: F401
    except ImportError as exc:
        return f"wakeful.discovery does not offer Catalog and ToolIndex yet ({exc})."
    return None


def embedder_unavailable() -> str | None:
    """Why the index cannot be given an embedder, or None when it can."""
    try:
        import onnxruntime  # noqa: F401

        from wakeful.discovery import OnnxEmbedder  # noqa: F401
    except ImportError as exc:
        return f"the ONNX embedder cannot run here ({exc}); pip install 'wakeful[embeddings]'."
    return None


def load_catalog(path: Path) -> Any:
    """The catalog at `path` as `wakeful.discovery` reads it (not part of the build time)."""
    from wakeful.discovery import Catalog

    return Catalog.load(path)


def load_embedder(model_path: str) -> Any:
    """The embedders of the hybrid ranking for a sentence-transformers model folder, as
    `wakeful tools search --embeddings MODEL` builds them: the model's static token embeddings
    and the model exported once to ONNX (int8), run with ONNX Runtime (derivation and load time
    excluded)."""
    from wakeful.discovery import OnnxEmbedder, StaticEmbedder

    return StaticEmbedder.from_model(model_path), OnnxEmbedder.from_model(model_path)


class OursSearch:
    """A `ToolIndex` built over one catalog: lexical, or hybrid when given the embedders."""

    def __init__(self, catalog: Any, embedders: Any = None) -> None:
        from wakeful.discovery import ToolIndex

        self.name = "ours" if embedders is None else "ours + embeddings"
        self.catalog = catalog
        static, transformer = embedders if embedders is not None else (None, None)
        self.index = ToolIndex.build(catalog, embedder=static, precise_embedder=transformer)

    @property
    def transformer_needs(self) -> int | None:
        """How many needs so far the hybrid ranking gave the transformer; None when lexical."""
        return None if self.index.precise_embedder is None else int(self.index.dense_needs)

    def search(self, query: str, k: int) -> Ranking:
        """The ranked tools, best first, as `wakeful tools search --json` prints them; `found`
        is the index's own verdict (`ToolIndex.search`: the best tool stands out and shows
        evidence of serving the need), so the abstain column shows how often the agent would be
        told "no tool found"."""
        result = self.index.search(query, k)
        keys = tuple((match.server, match.tool) for match in result.ranked)
        return Ranking(keys, found=result.found)

    def time_upsert(self, server_name: str, repeats: int) -> list[float]:
        """Seconds for `upsert_server` of `server_name`, changed anew before every call.

        Each round edits the first tool's description, so the index sees a real change every time
        rather than a no-op it might detect and skip (with embeddings, that one tool is embedded
        again by each embedder; the server's other texts keep their vectors).
        """
        server = self.catalog.servers[server_name]
        first, *rest = server.tools
        samples = []
        for round_ in range(repeats):
            edited = dataclasses.replace(
                first, description=f"{first.description} (revision {round_ + 1})"
            )
            changed = dataclasses.replace(server, tools=(edited, *rest))
            start = time.perf_counter()
            self.index.upsert_server(changed)
            samples.append(time.perf_counter() - start)
        # Put the server back: a dense index is shared by the two seal_tools sets.
        self.index.upsert_server(server)
        return samples
