"""Query-adaptive fusion: a confident lexical match answers alone; unsure needs are embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from wakeful.discovery import Catalog, CatalogServer, CatalogTool, Ranking, ToolIndex
from wakeful.discovery.embeddings import normalise_rows
from wakeful.discovery.fusion import fuse
from wakeful.errors import UserError


class TrigramEmbedder:
    """A deterministic stand-in for a sentence model that records every text it embeds."""

    dimension = 256

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
                rows[row, int.from_bytes(digest, "little") % self.dimension] += 1.0
        return normalise_rows(rows)


def server(name: str, description: str, *tools: tuple[str, str]) -> CatalogServer:
    return CatalogServer(
        name,
        description,
        tuple(CatalogTool(name, n, d, {"type": "object", "properties": {}}) for n, d in tools),
    )


CATALOG = Catalog.from_servers(
    [
        server(
            "yahoo_finance",
            "Stock market data from Yahoo Finance.",
            ("get_stock_price", "Get the current price of a stock."),
            ("get_company_news", "Latest news articles about a company."),
        ),
        server(
            "github",
            "Work with GitHub repositories, issues and pull requests.",
            ("search_repositories", "Search repositories by keyword."),
            ("create_issue", "Open a new issue in a repository."),
        ),
        server(
            "weather",
            "Weather forecasts.",
            ("get_forecast", "Get the weather forecast for a city."),
        ),
        server("maps", "Maps and places.", ("geocode", "Turn a street address into coordinates.")),
    ]
)
# Shares the exact words of one tool and server: lexically confident.
CLEAR = "open a new github issue in a repository"
# Misspelt: shares no word with any tool, so lexically unsure; only the dense signal finds it.
VAGUE = "wether forcast"


def test_the_default_ranking_with_an_embedder_is_adaptive() -> None:
    index = ToolIndex.build(CATALOG, embedder=TrigramEmbedder())
    assert index.ranking == Ranking.dense()
    assert index.ranking.lexical_gate > 0.0
    assert ToolIndex.build(CATALOG).ranking == Ranking.lexical()


def test_a_confident_lexical_need_is_never_embedded_and_ranks_as_lexical() -> None:
    embedder = TrigramEmbedder()
    index = ToolIndex.build(CATALOG, embedder=embedder)
    built = len(embedder.texts)
    ranked, threshold = index.rank_judged(CLEAR, 5)
    assert len(embedder.texts) == built
    assert (index.needs_ranked, index.dense_needs) == (1, 0)
    assert threshold == Ranking.lexical().threshold
    assert ranked == ToolIndex.build(CATALOG).rank(CLEAR, 5)
    assert (ranked[0].server, ranked[0].tool) == ("github", "create_issue")
    assert index.search(CLEAR).found


def test_an_unsure_need_is_embedded_and_fused() -> None:
    embedder = TrigramEmbedder()
    index = ToolIndex.build(CATALOG, embedder=embedder)
    ranked, threshold = index.rank_judged(VAGUE, 5)
    assert embedder.texts[-1] == VAGUE
    assert (index.needs_ranked, index.dense_needs) == (1, 1)
    assert threshold == Ranking.dense().threshold
    assert (ranked[0].server, ranked[0].tool) == ("weather", "get_forecast")
    assert ToolIndex.build(CATALOG).rank(VAGUE, 5) == ()


def test_always_dense_embeds_every_need() -> None:
    embedder = TrigramEmbedder()
    index = ToolIndex.build(CATALOG, embedder=embedder, ranking=Ranking.always_dense())
    index.rank(CLEAR)
    index.rank(VAGUE)
    assert embedder.texts[-2:] == [CLEAR, VAGUE]
    assert index.dense_needs == 2


def test_confidence_needs_the_gate_and_the_margin() -> None:
    ranking = Ranking.dense()
    gate = ranking.lexical_gate
    assert ranking.confident(np.array([gate, gate * (1 - 2 * ranking.gate_margin)]))
    assert not ranking.confident(np.array([gate * 0.99, 0.0]))
    # Two tools tie for first: the lexical ranking cannot choose, so the dense signal decides.
    assert not ranking.confident(np.array([0.5, 0.5, 0.1]))
    assert ranking.confident(np.array([0.5]))
    assert not ranking.confident(np.array([]))
    assert not Ranking.always_dense().confident(np.array([1.0, 0.0]))


def test_the_dense_weight_grows_as_lexical_confidence_falls() -> None:
    ranking = Ranking.dense()
    gate = ranking.lexical_gate
    assert ranking.unsure(np.array([gate, 0.0])).dense_weight == pytest.approx(
        ranking.gate_dense_weight
    )
    assert ranking.unsure(np.array([0.0, 0.0])).dense_weight == pytest.approx(ranking.dense_weight)
    halfway = (ranking.gate_dense_weight + ranking.dense_weight) / 2
    assert ranking.unsure(np.array([gate / 2])).dense_weight == pytest.approx(halfway)
    assert Ranking.always_dense().unsure(np.array([0.0])) == Ranking.always_dense()


def test_an_unsure_need_moves_scores_toward_the_dense_signal() -> None:
    tool, server_ = np.array([0.2, 0.4]), np.array([0.1, 0.3])
    lexical = fuse(Ranking.dense(), tool_lexical=tool, server_lexical=server_)
    fused = fuse(
        Ranking.dense().unsure(np.array([Ranking.dense().lexical_gate])),
        tool_lexical=tool,
        server_lexical=server_,
        tool_dense=np.array([0.9, 0.0]),
        server_dense=np.array([0.9, 0.0]),
    )
    assert fused[0] > lexical[0] and fused[1] < lexical[1]


def test_rank_judged_rejects_a_k_under_one() -> None:
    index = ToolIndex.build(CATALOG, embedder=TrigramEmbedder())
    with pytest.raises(UserError, match="k must be at least 1"):
        index.rank_judged(CLEAR, 0)


def test_an_empty_index_ranks_nothing_with_the_rankings_threshold() -> None:
    index = ToolIndex(embedder=TrigramEmbedder())
    assert index.rank_judged(CLEAR) == ((), Ranking.dense().threshold)
    assert not index.search(CLEAR).found
