"""The two-level tool index: which servers fit a need, then which of their tools.

Each level is a fielded BM25 index (:mod:`.bm25`); optional dense embeddings are fused in. A
tool's score combines its own match with its server's (:mod:`.fusion`), so a need phrased in a
server's vocabulary ("on GitHub") lifts that server's tools, while a flat tool-level term keeps a
strong tool in a weakly described server from being lost. Updating one server re-indexes only
its own documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from .bm25 import FieldedBM25
from .catalog import Catalog, CatalogServer, CatalogTool
from .embeddings import Embedder
from .fusion import Ranking, fuse
from .tokenize import tokenize

__all__ = [
    "NOT_FOUND_ADVICE",
    "Match",
    "SearchResult",
    "ToolIndex",
    "server_text",
    "tool_text",
]

NOT_FOUND_ADVICE: Final = (
    "No tool matches this need well enough. Rephrase the need with the concrete action and "
    "object (e.g. 'convert a PDF to text' rather than 'handle my document'), do it with a "
    "general tool such as code_interpreter, or ask the user how they want it done."
)

# Field weights of the tool-level documents: tool name, description, parameter names, parameter
# descriptions, server name, server description. Tuned on the development sets (metatool,
# livemcpbench); see docs in `fusion.Ranking`.
TOOL_FIELDS: Final = (2.0, 1.0, 0.5, 0.3, 0.5, 0.2)
# Server-level documents: server name, server description, its tools' names, their descriptions.
SERVER_FIELDS: Final = (2.0, 1.0, 0.5, 0.3)

_FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Match:
    """One tool that fits the need, and its score: higher is better, within [0, 1]."""

    server: str
    tool: str
    score: float


@dataclass(frozen=True)
class SearchResult:
    """The confident matches, best first; `found` is False (and `advice` set) when there are none.

    Candidates scoring under the calibrated threshold are never presented as matches: a weak
    guess invites the model to call the wrong tool. :meth:`ToolIndex.rank` gives the full
    ranking for measurement.
    """

    matches: tuple[Match, ...]
    found: bool
    advice: str | None


def tool_text(tool: CatalogTool) -> str:
    """The text a dense embedder sees for a tool."""
    return f"{tool.name}: {tool.description}"


def server_text(server: CatalogServer) -> str:
    """The text a dense embedder sees for a server."""
    return f"{server.name}: {server.description}"


@lru_cache(maxsize=1 << 14)
def _terms(text: str) -> tuple[str, ...]:
    """Tokenised text, cached: a server's update re-reads mostly unchanged descriptions."""
    return tuple(tokenize(text))


def _tool_fields(server: CatalogServer, tool: CatalogTool) -> list[list[str]]:
    names: list[str] = []
    descriptions: list[str] = []
    properties = tool.input_schema.get("properties")
    if isinstance(properties, Mapping):
        for name, spec in properties.items():
            names.extend(_terms(str(name)))
            if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
                descriptions.extend(_terms(spec["description"]))
    return [
        list(_terms(tool.name)),
        list(_terms(tool.description)),
        names,
        descriptions,
        list(_terms(server.name)),
        list(_terms(server.description)),
    ]


def _server_fields(server: CatalogServer) -> list[list[str]]:
    return [
        list(_terms(server.name)),
        list(_terms(server.description)),
        [term for tool in server.tools for term in _terms(tool.name)],
        [term for tool in server.tools for term in _terms(tool.description)],
    ]


class ToolIndex:
    """Searchable servers and tools; lexical by default, dense-fused when given an embedder."""

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        ranking: Ranking | None = None,
    ) -> None:
        self.embedder = embedder
        self.ranking = ranking or (Ranking.dense() if embedder else Ranking.lexical())
        self.servers: dict[str, CatalogServer] = {}
        self._tools = FieldedBM25(TOOL_FIELDS)
        self._servers = FieldedBM25(SERVER_FIELDS)
        # Per tool slot: the slot of its server in `_servers`; -1 for free slots.
        self._server_slot_of_tool = np.full(self._tools.capacity, -1, dtype=np.int64)
        self._tool_vectors: npt.NDArray[np.float32] | None = None
        self._server_vectors: npt.NDArray[np.float32] | None = None

    @classmethod
    def build(
        cls,
        catalog: Catalog,
        *,
        embedder: Embedder | None = None,
        ranking: Ranking | None = None,
    ) -> ToolIndex:
        index = cls(embedder=embedder, ranking=ranking)
        index.upsert_servers(catalog.servers.values())
        return index

    def __len__(self) -> int:
        return len(self._tools)

    def catalog(self) -> Catalog:
        """The servers this index holds, as a catalog."""
        return Catalog.from_servers(self.servers.values())

    def upsert_server(self, server: CatalogServer) -> None:
        """Add a server or replace its tools; only this server's entries are recomputed."""
        self.upsert_servers([server])

    def upsert_servers(self, servers: Iterable[CatalogServer]) -> None:
        """Add or replace several servers, embedding their texts in one batch."""
        batch = list(servers)
        for server in batch:
            self._index_server(server)
        if self.embedder is not None and batch:
            self._embed(batch)

    def remove_server(self, name: str) -> None:
        """Forget a server and its tools; unknown names are ignored."""
        server = self.servers.pop(name, None)
        if server is None:
            return
        for tool in server.tools:
            slot = self._tools.slot((name, tool.name))
            if slot is not None:
                self._server_slot_of_tool[slot] = -1
            self._tools.remove((name, tool.name))
        self._servers.remove(name)

    def _index_server(self, server: CatalogServer) -> None:
        self.remove_server(server.name)
        self.servers[server.name] = server
        server_slot = self._servers.add(server.name, _server_fields(server))
        for tool in server.tools:
            slot = self._tools.add((server.name, tool.name), _tool_fields(server, tool))
            if slot >= len(self._server_slot_of_tool):
                grown = np.full(self._tools.capacity, -1, dtype=np.int64)
                grown[: len(self._server_slot_of_tool)] = self._server_slot_of_tool
                self._server_slot_of_tool = grown
            self._server_slot_of_tool[slot] = server_slot

    def _embed(self, servers: Sequence[CatalogServer]) -> None:
        assert self.embedder is not None
        tools = [(s, t) for s in servers for t in s.tools]
        vectors = self.embedder.embed(
            [server_text(s) for s in servers] + [tool_text(t) for _, t in tools]
        )
        self._store_vectors(
            [self._servers.slot(s.name) for s in servers],
            vectors[: len(servers)],
            level="server",
        )
        self._store_vectors(
            [self._tools.slot((s.name, t.name)) for s, t in tools],
            vectors[len(servers) :],
            level="tool",
        )

    def _store_vectors(
        self, slots: Sequence[int | None], vectors: npt.NDArray[np.float32], *, level: str
    ) -> None:
        capacity = self._servers.capacity if level == "server" else self._tools.capacity
        current = self._server_vectors if level == "server" else self._tool_vectors
        dimension = int(vectors.shape[1]) if vectors.size else 0
        if current is None or current.shape[0] < capacity:
            grown = np.zeros((capacity, dimension or _dimension(current)), dtype=np.float32)
            if current is not None:
                grown[: current.shape[0]] = current
            current = grown
        for slot, vector in zip(slots, vectors, strict=True):
            if slot is not None:
                current[slot] = vector
        if level == "server":
            self._server_vectors = current
        else:
            self._tool_vectors = current

    def rank(self, need: str, k: int = 10) -> tuple[Match, ...]:
        """The `k` best tools for `need`, best first, however weak (for measurement and review)."""
        if k <= 0:
            raise ValueError(f"k must be at least 1, got {k}")
        scores = self._scores(need)
        if scores is None:
            return ()
        count = min(k, int(np.count_nonzero(scores > 0.0)))
        if count == 0:
            return ()
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        matches = []
        for slot in best:
            server, tool = self._key(int(slot))
            matches.append(Match(server=server, tool=tool, score=float(scores[slot])))
        return tuple(matches)

    def _key(self, slot: int) -> tuple[str, str]:
        key = self._tools.key(slot)
        assert isinstance(key, tuple)
        return key[0], key[1]

    def search(self, need: str, k: int = 5) -> SearchResult:
        """The tools that fit `need` with confidence, best first; "not found" advice otherwise."""
        confident = tuple(m for m in self.rank(need, k) if m.score >= self.ranking.threshold)
        if not confident:
            return SearchResult(matches=(), found=False, advice=NOT_FOUND_ADVICE)
        return SearchResult(matches=confident, found=True, advice=None)

    def _scores(self, need: str) -> _FloatArray | None:
        if not self._tools:
            return None
        terms = tokenize(need)
        tool_lexical = self._tools.scores(terms)
        server_lexical = self._servers.scores(terms)
        live = self._server_slot_of_tool >= 0
        owner = np.where(live, self._server_slot_of_tool, 0)[: len(tool_lexical)]
        tool_dense = server_dense = None
        if self.embedder is not None and self._tool_vectors is not None:
            query = self.embedder.embed([need])[0]
            tool_dense = self._tool_vectors @ query
            assert self._server_vectors is not None
            server_dense = self._server_vectors @ query
        scores = fuse(
            self.ranking,
            tool_lexical=tool_lexical,
            server_lexical=server_lexical[owner],
            tool_dense=None if tool_dense is None else tool_dense[: len(tool_lexical)],
            server_dense=None if server_dense is None else server_dense[owner],
        )
        scores[~live[: len(scores)]] = 0.0
        return scores

    # --- persistence lives in `.persist`; these are its entry points -------------------------

    def save(self, path: Path) -> None:
        """Write the index (catalog, settings and any vectors) to one versioned file."""
        from .persist import save_index

        save_index(self, path)

    @classmethod
    def load(
        cls, path: Path, *, embedder: Embedder | None = None, ranking: Ranking | None = None
    ) -> ToolIndex:
        """Read an index written by :meth:`save`; a corrupt or old file raises `UserError`."""
        from .persist import load_index

        return load_index(path, embedder=embedder, ranking=ranking)

    def vectors(self) -> tuple[npt.NDArray[np.float32] | None, npt.NDArray[np.float32] | None]:
        """The server and tool vectors by name order (for persistence), or None without any."""
        if self._server_vectors is None or self._tool_vectors is None:
            return None, None
        server_rows = [self._servers.slot(name) for name in self.servers]
        tool_rows = [
            self._tools.slot((s.name, t.name)) for s in self.servers.values() for t in s.tools
        ]
        return (
            self._server_vectors[[r for r in server_rows if r is not None]],
            self._tool_vectors[[r for r in tool_rows if r is not None]],
        )

    def restore(
        self,
        servers: Sequence[CatalogServer],
        server_vectors: npt.NDArray[np.float32] | None,
        tool_vectors: npt.NDArray[np.float32] | None,
    ) -> None:
        """Index `servers` lexically and take their vectors as given instead of embedding."""
        for server in servers:
            self._index_server(server)
        if server_vectors is None or tool_vectors is None:
            if self.embedder is not None:
                self._embed(servers)
            return
        self._store_vectors(
            [self._servers.slot(s.name) for s in servers], server_vectors, level="server"
        )
        self._store_vectors(
            [self._tools.slot((s.name, t.name)) for s in servers for t in s.tools],
            tool_vectors,
            level="tool",
        )


def _dimension(vectors: npt.NDArray[np.float32] | None) -> int:
    return 0 if vectors is None else int(vectors.shape[1])
