"""Finding the tools an agent needs among hundreds or thousands: catalog, index and search.

:class:`Catalog` holds servers and their tools (from MCP `tools/list` or a catalog file);
:class:`ToolIndex` ranks them for a need in two levels, server then tool, lexically by default
and fused with dense embeddings when given an :class:`Embedder` (:class:`OnnxEmbedder` runs
all-MiniLM-L6-v2 in about 3 ms a need, :class:`StaticEmbedder` in microseconds); below a
calibrated score it answers "no tool found" with advice instead of a weak guess.
"""

from __future__ import annotations

from .catalog import Catalog, CatalogServer, CatalogTool, Query, load_queries
from .embeddings import Embedder, SentenceTransformerEmbedder
from .fusion import Ranking
from .index import NOT_FOUND_ADVICE, Match, SearchResult, ToolIndex
from .onnx_embeddings import OnnxEmbedder
from .static_embeddings import StaticEmbedder
from .tokenize import tokenize

__all__ = [
    "NOT_FOUND_ADVICE",
    "Catalog",
    "CatalogServer",
    "CatalogTool",
    "Embedder",
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
