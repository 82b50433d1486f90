"""The two-level tool index: which servers fit a need, then which of their tools.

Each level is a fielded BM25 index (:mod:`.bm25`); optional dense embeddings are fused in. A
tool's score combines its own match with its server's (:mod:`.fusion`), so a need phrased in a
server's vocabulary ("on GitHub") lifts that server's tools, while a flat tool-level term keeps a
strong tool in a weakly described server from being lost. Updating one server re-indexes only
its own documents.

Dense similarity can come from two embedders: a fast one (static token embeddings,
microseconds) and a precise one (the full transformer: 10-20 ms with torch, 2-7 ms as int8 ONNX
depending on the need's length). With both, the default is the hybrid ranking (:mod:`.hybrid`):
every signal standardised per need, the transformer reading needs of up to 48 tokens, longer
needs split into their requests and matched by words and static embeddings. With one embedder
the default (`Ranking.dense`) is query-adaptive: a need whose lexical match is confident is
answered lexically and never embedded; the unsure ones are fused with a dense weight that grows
as lexical confidence falls. `Ranking.static` (the precise embedder asked only when the fast
ranking is ambiguous) remains available.

"No tool found" is one judgement (:mod:`.judgement`), shared by :meth:`ToolIndex.search`,
batches of needs and the session's `find_tools` through :meth:`ToolIndex.rank_judged`: the best
tool is claimed only when it both stands out and shows evidence of serving the need.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from ..errors import UserError
from .bm25 import FieldedBM25
from .catalog import Catalog, CatalogServer, CatalogTool
from .embeddings import Embedder
from .fusion import Ranking, fuse
from .hybrid import HybridRanking, LevelScores, hybrid_scores, mostly_han
from .judgement import Evidence, Scored, claim_threshold, evidence
from .need_parts import need_parts
from .persist import read_index, save_index
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
# Vectors computed ahead of an upsert, by text: the fast embedder's, then the precise one's.
Embedded = tuple[dict[str, npt.NDArray[np.float32]], dict[str, npt.NDArray[np.float32]]]


@dataclass(frozen=True)
class Match:
    """One tool that fits the need, and its score: higher is better, within [0, 1]."""

    server: str
    tool: str
    score: float


@dataclass(frozen=True)
class SearchResult:
    """The confident matches, best first; `found` is False (and `advice` set) when there are none.

    Candidates the judgement of :meth:`ToolIndex.rank_judged` rejects are never presented as
    matches: a weak guess invites the model to call the wrong tool. `ranked` holds the whole
    ranking however weak (for measurement, review and batch output).
    """

    matches: tuple[Match, ...]
    found: bool
    advice: str | None
    ranked: tuple[Match, ...] = ()


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


class _Vectors:
    """One embedder's vectors of every server slot and tool slot, grown with the slots."""

    def __init__(self) -> None:
        self.servers: npt.NDArray[np.float32] | None = None
        self.tools: npt.NDArray[np.float32] | None = None
        # One past the highest tool slot ever stored: a query multiplies only these rows, since
        # the capacity doubles and reading the free half costs memory bandwidth for nothing.
        self.tool_rows = 0

    def store(
        self,
        slots: Sequence[int | None],
        vectors: npt.NDArray[np.float32],
        *,
        level: str,
        capacity: int,
    ) -> None:
        current = self.servers if level == "server" else self.tools
        dimension = int(vectors.shape[1]) if vectors.size else 0
        if current is None or current.shape[0] < capacity:
            grown = np.zeros((capacity, dimension or _dimension(current)), dtype=np.float32)
            if current is not None:
                grown[: current.shape[0]] = current
            current = grown
        for slot, vector in zip(slots, vectors, strict=True):
            if slot is not None:
                current[slot] = vector
                if level == "tool":
                    self.tool_rows = max(self.tool_rows, slot + 1)
        if level == "server":
            self.servers = current
        else:
            self.tools = current


class ToolIndex:
    """Searchable servers and tools; lexical by default, dense-fused when given an embedder.

    `embedder` embeds every document and need; `precise_embedder`, when given, embeds every
    document too but only some needs. With both, the default ranking is :class:`HybridRanking`
    (tuned for a `StaticEmbedder` as `embedder` and the transformer as `precise_embedder`): the
    precise one reads the needs that fit its token budget (`dense_needs` counts them). With
    :meth:`Ranking.static` it is asked only when the ranking by `embedder` is ambiguous. With
    one embedder the default is :meth:`Ranking.dense`, which embeds only needs the lexical match
    is unsure of (`dense_needs` counts them).
    """

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        ranking: Ranking | HybridRanking | None = None,
        precise_embedder: Embedder | None = None,
    ) -> None:
        if precise_embedder is not None and embedder is None:
            raise UserError(
                "A precise embedder is a second opinion on a fast one: give embedder= too "
                "(e.g. StaticEmbedder.from_model(path)), or pass the precise one as embedder."
            )
        self.embedder = embedder
        self.precise_embedder = precise_embedder
        if ranking is None:
            if precise_embedder is not None:
                ranking = HybridRanking()
            else:
                ranking = Ranking.dense() if embedder else Ranking.lexical()
        self.ranking: Ranking | HybridRanking = ranking
        self.servers: dict[str, CatalogServer] = {}
        self._tools = FieldedBM25(TOOL_FIELDS)
        self._servers = FieldedBM25(SERVER_FIELDS)
        # Per tool slot: the slot of its server in `_servers`; -1 for free slots.
        self._server_slot_of_tool = np.full(self._tools.capacity, -1, dtype=np.int64)
        self._fast = _Vectors()
        self._precise = _Vectors()
        # How many needs were ranked, how many of them were embedded (the rest were answered
        # lexically with confidence), and how many asked the precise embedder.
        self.needs_ranked = 0
        self.dense_needs = 0
        self.second_opinions = 0

    @classmethod
    def build(
        cls,
        catalog: Catalog,
        *,
        embedder: Embedder | None = None,
        ranking: Ranking | HybridRanking | None = None,
        precise_embedder: Embedder | None = None,
    ) -> ToolIndex:
        index = cls(embedder=embedder, ranking=ranking, precise_embedder=precise_embedder)
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

    def upsert_servers(
        self, servers: Iterable[CatalogServer], *, embedded: Embedded | None = None
    ) -> None:
        """Add or replace several servers, embedding their new texts in one batch.

        A text the index already holds for the same server keeps its vector: when one tool of
        a server changes, only that tool is embedded again. `embedded` holds vectors computed
        beforehand by :meth:`embed_texts` (off the event loop); any text still missing is
        embedded here.
        """
        batch = list(servers)
        kept = [self._stored_vectors(batch, embedder, store) for embedder, store in self._stores()]
        if embedded is not None:
            for held, given in zip(kept, embedded, strict=True):
                held.update(given)
        for server in batch:
            self._index_server(server)
        if batch:
            self._embed(batch, self.embedder, self._fast, kept[0])
            self._embed(batch, self.precise_embedder, self._precise, kept[1])

    def texts_to_embed(self, servers: Iterable[CatalogServer]) -> tuple[list[str], list[str]]:
        """The texts of `servers` that an upsert would have the fast and the precise embedder
        embed (none for an embedder the index lacks)."""
        batch = list(servers)
        texts = _texts(batch)
        fast, precise = (
            _missing(texts, self._stored_vectors(batch, embedder, store))
            if embedder is not None
            else []
            for embedder, store in self._stores()
        )
        return fast, precise

    def embed_texts(self, fast: Sequence[str], precise: Sequence[str]) -> Embedded:
        """Vectors for :meth:`upsert_servers`. It touches only the embedders, never the index,
        so it may run in a worker thread while the event loop keeps searching."""
        vectors: list[dict[str, npt.NDArray[np.float32]]] = []
        for (embedder, _), texts in zip(self._stores(), (fast, precise), strict=True):
            if embedder is None or not texts:
                vectors.append({})
            else:
                vectors.append(dict(zip(texts, embedder.embed(list(texts)), strict=True)))
        return vectors[0], vectors[1]

    def _stores(self) -> tuple[tuple[Embedder | None, _Vectors], tuple[Embedder | None, _Vectors]]:
        return (self.embedder, self._fast), (self.precise_embedder, self._precise)

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

    def _stored_vectors(
        self, servers: Sequence[CatalogServer], embedder: Embedder | None, store: _Vectors
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The vectors `store` holds for the current texts of the servers named in `servers`."""
        if embedder is None or store.servers is None or store.tools is None:
            return {}
        stored: dict[str, npt.NDArray[np.float32]] = {}
        for name in {server.name for server in servers}:
            current = self.servers.get(name)
            slot = self._servers.slot(name)
            if current is None or slot is None:
                continue
            stored[server_text(current)] = store.servers[slot].copy()
            for tool in current.tools:
                tool_slot = self._tools.slot((name, tool.name))
                if tool_slot is not None:
                    stored[tool_text(tool)] = store.tools[tool_slot].copy()
        return stored

    def _embed(
        self,
        servers: Sequence[CatalogServer],
        embedder: Embedder | None,
        into: _Vectors,
        kept: Mapping[str, npt.NDArray[np.float32]] | None = None,
    ) -> None:
        if embedder is None:
            return
        tools = [(s, t) for s in servers for t in s.tools]
        texts = _texts(servers)
        kept = kept or {}
        new = _missing(texts, kept)
        fresh = dict(zip(new, embedder.embed(new), strict=True)) if new else {}
        vectors = np.array([kept[t] if t in kept else fresh[t] for t in texts], dtype=np.float32)
        into.store(
            [self._servers.slot(s.name) for s in servers],
            vectors[: len(servers)],
            level="server",
            capacity=self._servers.capacity,
        )
        into.store(
            [self._tools.slot((s.name, t.name)) for s, t in tools],
            vectors[len(servers) :],
            level="tool",
            capacity=self._tools.capacity,
        )

    def rank(self, need: str, k: int = 10) -> tuple[Match, ...]:
        """The `k` best tools for `need`, best first, however weak (for measurement and review)."""
        return self.rank_judged(need, k)[0]

    def rank_judged(self, need: str, k: int = 10) -> tuple[tuple[Match, ...], float]:
        """The `k` best tools for `need`, best first, and the score a match must reach to be
        claimed: the one "no tool found" judgement, shared by :meth:`search`, batches and the
        session's `find_tools`.

        The threshold is the calibrated one of the path that ranked the need (a confident
        lexical answer of `Ranking.dense` is judged as lexical, a dense-fused one by
        `ranking.threshold`), or infinity when the best tool shows no evidence of serving the
        need (see :mod:`.judgement`): then nothing is found, however the scores compare. So
        `found` is always `bool(ranked) and ranked[0].score >= threshold`.
        """
        if k <= 0:
            raise UserError(f"k must be at least 1, got {k}: ask for one tool or more")
        scored = self._scores(need)
        if scored is None:
            return (), self.ranking.threshold
        scores = scored.scores
        count = min(k, int(np.count_nonzero(scores > 0.0)))
        if count == 0:
            return (), scored.threshold
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        matches = []
        for slot in best:
            server, tool = self._key(int(slot))
            matches.append(Match(server=server, tool=tool, score=float(scores[slot])))
        threshold = claim_threshold(scored, int(best[0]), self._tools, self.ranking)
        return tuple(matches), threshold

    def evidence_of(self, need: str) -> Evidence | None:
        """What the "no tool found" judgement weighs of the best-ranked tool for `need` (for
        measurement and review); None when no tool scores above zero."""
        scored = self._scores(need)
        if scored is None or not np.any(scored.scores > 0.0):
            return None
        best = int(np.argmax(scored.scores))
        return evidence(scored, best, self._tools, self.ranking)

    def _key(self, slot: int) -> tuple[str, str]:
        key = self._tools.key(slot)
        assert isinstance(key, tuple)
        return key[0], key[1]

    def search(self, need: str, k: int = 5) -> SearchResult:
        """The tools that fit `need` with confidence, best first; "not found" advice otherwise.

        `ranked` keeps all `k` ranked tools, so a batch of needs prints the same ranking and
        the same `found` as one need searched alone.
        """
        ranked, threshold = self.rank_judged(need, k)
        confident = tuple(m for m in ranked if m.score >= threshold)
        if not confident:
            return SearchResult(matches=(), found=False, advice=NOT_FOUND_ADVICE, ranked=ranked)
        return SearchResult(matches=confident, found=True, advice=None, ranked=ranked)

    def _scores(self, need: str) -> Scored | None:
        """Every slot's score for `need` and what judges them."""
        if not self._tools:
            return None
        self.needs_ranked += 1
        live = self._server_slot_of_tool[: self._tools.capacity] >= 0
        owner = np.where(live, self._server_slot_of_tool[: self._tools.capacity], 0)
        ranking = self.ranking
        if isinstance(ranking, HybridRanking):
            return self._hybrid(need, ranking, live, owner)
        terms = tokenize(need)
        tool_lexical = self._tools.scores(terms)
        server_lexical = self._servers.scores(terms)
        if self.embedder is not None and ranking.lexical_gate > 0.0:
            lexical_ranking = Ranking.lexical()
            lexical = fuse(
                lexical_ranking, tool_lexical=tool_lexical, server_lexical=server_lexical[owner]
            )
            lexical[~live] = 0.0
            if ranking.confident(lexical):
                return Scored(lexical, lexical_ranking.threshold, terms)
            ranking = ranking.unsure(lexical)
        if self.embedder is not None:
            self.dense_needs += 1
        scores = self._fused(
            need, self.embedder, self._fast, ranking, tool_lexical, server_lexical, owner
        )
        scores[~live] = 0.0
        if self.precise_embedder is not None and _ambiguous(scores, ranking.second_opinion_margin):
            self.second_opinions += 1
            scores = self._fused(
                need,
                self.precise_embedder,
                self._precise,
                ranking.precise(),
                tool_lexical,
                server_lexical,
                owner,
            )
            scores[~live] = 0.0
        return Scored(scores, ranking.threshold, terms, judge_evidence=self.embedder is None)

    def _hybrid(
        self,
        need: str,
        ranking: HybridRanking,
        live: npt.NDArray[np.bool_],
        owner: npt.NDArray[np.int64],
    ) -> Scored:
        """The scores of :mod:`.hybrid`: the transformer reads a need that fits its token
        budget; a longer one is split into its parts, scored by words and static embeddings.
        The transformer's cosines judge the best tool where it reads the need's language."""
        precise = self.precise_embedder
        whole = precise is not None and _fits(precise, need, ranking.precise_max_tokens)
        texts = [need]
        if not whole:
            parts = need_parts(need)
            if len(parts) > 1:
                texts.extend(parts)
        terms = [tokenize(text) for text in texts]
        tools = self._tools.scores_of_parts(terms)
        servers = self._servers.scores_of_parts(terms)
        lexical = [(tool, server[owner]) for tool, server in zip(tools, servers, strict=True)]
        static = (
            self._similarities(self.embedder, self._fast, texts, owner)
            if self.embedder is not None
            else None
        )
        precise_scores = None
        if whole and precise is not None:
            self.dense_needs += 1
            precise_scores = self._similarities(precise, self._precise, [need], owner)[0]
        scores = hybrid_scores(
            ranking, live=live, lexical=lexical, static=static, precise=precise_scores
        )
        reads = precise_scores is not None and (ranking.precise_reads_han or not mostly_han(need))
        cosines = precise_scores[0] if reads and precise_scores is not None else None
        return Scored(scores, ranking.threshold, terms[0], cosines)

    def _similarities(
        self,
        embedder: Embedder,
        vectors: _Vectors,
        texts: Sequence[str],
        owner: npt.NDArray[np.int64],
    ) -> list[LevelScores]:
        """Per text: every tool slot's cosine to it, and its server's."""
        size = len(owner)
        if vectors.tools is None or vectors.servers is None:
            empty = np.zeros(size, dtype=np.float64)
            return [(empty, empty) for _ in texts]
        queries = np.ascontiguousarray(embedder.embed(texts), dtype=np.float32)
        rows = min(vectors.tool_rows, size)
        tools = np.zeros((len(texts), size), dtype=np.float64)
        if len(texts) == 1:
            tools[0, :rows] = vectors.tools[:rows] @ queries[0]
        else:
            tools[:, :rows] = (vectors.tools[:rows] @ queries.T).T
        servers = (vectors.servers @ queries.T).T[:, owner].astype(np.float64)
        return list(zip(tools, servers, strict=True))

    def _fused(
        self,
        need: str,
        embedder: Embedder | None,
        vectors: _Vectors,
        ranking: Ranking,
        tool_lexical: _FloatArray,
        server_lexical: _FloatArray,
        owner: npt.NDArray[np.int64],
    ) -> _FloatArray:
        tool_dense: _FloatArray | None = None
        server_dense: _FloatArray | None = None
        if embedder is not None and vectors.tools is not None and vectors.servers is not None:
            tool_dense, server_dense = self._similarities(embedder, vectors, [need], owner)[0]
        return fuse(
            ranking,
            tool_lexical=tool_lexical,
            server_lexical=server_lexical[owner],
            tool_dense=tool_dense,
            server_dense=server_dense,
        )

    # --- persistence lives in `.persist`; these are its entry points -------------------------

    def save(self, path: Path) -> None:
        """Write the index (catalog, settings and any vectors) to one versioned file."""
        save_index(self, path)

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        embedder: Embedder | None = None,
        ranking: Ranking | HybridRanking | None = None,
        precise_embedder: Embedder | None = None,
    ) -> ToolIndex:
        """Read an index written by :meth:`save`; a corrupt or old file raises `UserError`."""
        saved = read_index(path, embedder=embedder, precise_embedder=precise_embedder)
        index = cls(embedder=embedder, ranking=ranking, precise_embedder=precise_embedder)
        index.restore(
            saved.servers, saved.server_vectors, saved.tool_vectors, precise=saved.precise
        )
        return index

    def vectors(
        self, *, precise: bool = False
    ) -> tuple[npt.NDArray[np.float32] | None, npt.NDArray[np.float32] | None]:
        """The server and tool vectors by name order (for persistence), or None without any.

        `precise=True` gives those of the precise embedder instead of the fast one.
        """
        store = self._precise if precise else self._fast
        if store.servers is None or store.tools is None:
            return None, None
        server_rows = [self._servers.slot(name) for name in self.servers]
        tool_rows = [
            self._tools.slot((s.name, t.name)) for s in self.servers.values() for t in s.tools
        ]
        return (
            store.servers[[r for r in server_rows if r is not None]],
            store.tools[[r for r in tool_rows if r is not None]],
        )

    def restore(
        self,
        servers: Sequence[CatalogServer],
        server_vectors: npt.NDArray[np.float32] | None,
        tool_vectors: npt.NDArray[np.float32] | None,
        *,
        precise: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]] | None = None,
    ) -> None:
        """Index `servers` lexically and take their vectors as given instead of embedding.

        Vectors not given (None) are computed by the embedder they belong to, if any.
        """
        for server in servers:
            self._index_server(server)
        given = (server_vectors, tool_vectors) if server_vectors is not None else None
        for embedder, store, vectors in (
            (self.embedder, self._fast, given),
            (self.precise_embedder, self._precise, precise),
        ):
            if embedder is None:
                continue
            if vectors is None or vectors[1] is None:
                self._embed(servers, embedder, store)
                continue
            store.store(
                [self._servers.slot(s.name) for s in servers],
                vectors[0],
                level="server",
                capacity=self._servers.capacity,
            )
            store.store(
                [self._tools.slot((s.name, t.name)) for s in servers for t in s.tools],
                vectors[1],
                level="tool",
                capacity=self._tools.capacity,
            )


def _ambiguous(scores: _FloatArray, margin: float) -> bool:
    """Whether the two best scores are within `margin` of the best (relative), or all zero."""
    if margin <= 0.0 or len(scores) < 2:
        return False
    first, second = -np.partition(-scores, 1)[:2]
    return bool(first <= 0.0 or (first - second) / first < margin)


def _texts(servers: Sequence[CatalogServer]) -> list[str]:
    """What the embedders read of `servers`: each server's text, then each tool's, in order."""
    return [server_text(s) for s in servers] + [tool_text(t) for s in servers for t in s.tools]


def _missing(texts: Sequence[str], kept: Mapping[str, object]) -> list[str]:
    """The distinct texts without a vector in `kept`, in order: what is left to embed."""
    return list(dict.fromkeys(text for text in texts if text not in kept))


def _fits(embedder: Embedder, text: str, limit: int) -> bool:
    """Whether `embedder` reads `text` in at most `limit` tokens. Every word is at least one
    token, so a text of `limit` words or more is too long without tokenising it; an embedder
    that cannot count is assumed to read four tokens for every three words, plus two."""
    words = len(text.split())
    if words >= limit:
        return False
    count = getattr(embedder, "count_tokens", None)
    tokens = int(count(text)) if callable(count) else words * 4 // 3 + 2
    return tokens <= limit


def _dimension(vectors: npt.NDArray[np.float32] | None) -> int:
    return 0 if vectors is None else int(vectors.shape[1])
