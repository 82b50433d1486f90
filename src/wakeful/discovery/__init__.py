"""Finding the tools an agent needs among hundreds or thousands: catalog, index and search.

:class:`Catalog` holds servers and their tools (from MCP `tools/list` or a catalog file);
:class:`ToolIndex` ranks them for a need in two levels, server then tool, lexically by default
and fused with dense embeddings when given an :class:`Embedder` (:class:`OnnxEmbedder` runs
all-MiniLM-L6-v2 in 2-7 ms a need, :class:`StaticEmbedder` in microseconds; with both, the
:class:`HybridRanking`); below a calibrated score it answers "no tool found" with advice instead
of a weak guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Light modules, bound now (`tokenize` is also a submodule's name: binding the function here
# keeps `from wakeful.discovery import tokenize` the function whatever is imported later).
from ..lazy_exports import lazy_exports
from .catalog import Catalog, CatalogServer, CatalogTool, Query, load_queries
from .tokenize import tokenize

if TYPE_CHECKING:
    from .embeddings import Embedder, SentenceTransformerEmbedder
    from .fusion import Ranking
    from .hybrid import HybridRanking
    from .index import NOT_FOUND_ADVICE, Match, SearchResult, ToolIndex
    from .onnx_embeddings import OnnxEmbedder
    from .static_embeddings import StaticEmbedder

# The rest is loaded on first use, so that a runtime without discovery never imports numpy
# for it (the session module imports `wakeful.discovery.session_tools`, which runs this
# package first).
_HOMES = {
    "Embedder": ".embeddings",
    "SentenceTransformerEmbedder": ".embeddings",
    "Ranking": ".fusion",
    "HybridRanking": ".hybrid",
    "NOT_FOUND_ADVICE": ".index",
    "Match": ".index",
    "SearchResult": ".index",
    "ToolIndex": ".index",
    "OnnxEmbedder": ".onnx_embeddings",
    "StaticEmbedder": ".static_embeddings",
}

__getattr__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "NOT_FOUND_ADVICE",
    "Catalog",
    "CatalogServer",
    "CatalogTool",
    "Embedder",
    "HybridRanking",
    "Match",
    "OnnxEmbedder",
    "Query",
    "Ranking",
    "SearchResult",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "ToolIndex",
    "load_queries",
    "tokenize",
]
