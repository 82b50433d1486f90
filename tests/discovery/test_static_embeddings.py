"""Static token embeddings and the precise embedder's second opinion, without torch.

A tiny WordPiece tokenizer and a hand-made matrix stand in for a distilled model: each word has
its own axis, so similarities are known exactly.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from wakeful.discovery import Catalog, CatalogServer, CatalogTool, Ranking, ToolIndex
from wakeful.discovery.static_embeddings import StaticEmbedder, sif_weights, static_cache_path
from wakeful.errors import UserError

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "a", "stock", "price", "weather", "forecast"]
WORDS += ["share", "value", "rain", "city", "news", "company", "get", "##s"]


def tiny_tokenizer() -> Any:
    tokenizer = Tokenizer(WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    return tokenizer


def tiny_matrix() -> np.ndarray[Any, np.dtype[np.float32]]:
    """One axis per word, except synonyms share one: share~stock, value~price, rain~weather."""
    matrix = np.eye(len(WORDS), dtype=np.float32)
    for synonym, word in (("share", "stock"), ("value", "price"), ("rain", "weather")):
        matrix[WORDS.index(synonym)] = matrix[WORDS.index(word)]
    return matrix


def embedder() -> StaticEmbedder:
    return StaticEmbedder(tiny_matrix(), tiny_tokenizer(), weights=np.ones(len(WORDS)))


def test_a_text_is_the_normalised_weighted_mean_of_its_token_rows() -> None:
    vectors = embedder().embed(["stock price", "share value", "weather"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert vectors[0] @ vectors[1] == pytest.approx(1.0)  # synonyms share their rows
    assert vectors[0] @ vectors[2] == pytest.approx(0.0)


def test_weights_scale_each_token() -> None:
    weights = np.ones(len(WORDS))
    weights[WORDS.index("the")] = 0.0
    quiet = StaticEmbedder(tiny_matrix(), tiny_tokenizer(), weights=weights)
    assert quiet.embed(["the stock"])[0] @ quiet.embed(["stock"])[0] == pytest.approx(1.0)
    assert embedder().embed(["the stock"])[0] @ embedder().embed(["stock"])[0] < 0.8


def test_a_text_without_known_tokens_embeds_as_zero() -> None:
    vectors = embedder().embed(["", "   "])
    assert not vectors.any()


def test_sif_weights_silence_frequent_tokens() -> None:
    weights = sif_weights(30_000)
    assert weights.shape == (30_000,)
    assert weights[0] < weights[1000] < weights[-1] <= 1.0


def test_bad_matrices_and_weights_are_user_errors() -> None:
    with pytest.raises(UserError, match="one row per token"):
        StaticEmbedder(np.zeros(5), tiny_tokenizer())
    with pytest.raises(UserError, match="different models"):
        StaticEmbedder(np.zeros((3, 4)), tiny_tokenizer())
    with pytest.raises(UserError, match="one weight per row"):
        StaticEmbedder(tiny_matrix(), tiny_tokenizer(), weights=np.ones(3))


def test_from_model_reads_the_cached_matrix(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    tiny_tokenizer().save(str(model / "tokenizer.json"))
    (model / "config.json").write_text("{}", encoding="utf-8")
    cache = static_cache_path(model, tmp_path / "cache")
    cache.parent.mkdir()
    np.save(cache, tiny_matrix().astype(np.float16))
    loaded = StaticEmbedder.from_model(model, cache_dir=tmp_path / "cache")
    assert loaded.dimension == len(WORDS)
    assert loaded.embed(["stock"])[0] @ loaded.embed(["share"])[0] == pytest.approx(1.0)


def test_the_cache_name_follows_the_model_files(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    first = static_cache_path(model, tmp_path)
    (model / "config.json").write_text('{"changed": true}', encoding="utf-8")
    assert static_cache_path(model, tmp_path) != first
    assert first.parent == tmp_path and first.name.startswith("static-")


def test_missing_tokenizer_and_corrupt_cache_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"tokenizer\.json"):
        StaticEmbedder.from_model(tmp_path / "nowhere", cache_dir=tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    tiny_tokenizer().save(str(model / "tokenizer.json"))
    cache = static_cache_path(model, tmp_path / "cache")
    cache.parent.mkdir()
    cache.write_bytes(b"not an array")
    with pytest.raises(UserError, match="Delete the file"):
        StaticEmbedder.from_model(model, cache_dir=tmp_path / "cache")


def tool(server: str, name: str, description: str) -> CatalogTool:
    return CatalogTool(server=server, name=name, description=description, input_schema={})


def catalog() -> Catalog:
    return Catalog.from_servers(
        [
            CatalogServer(
                name="finance",
                description="company news",
                tools=(
                    tool("finance", "quote", "stock price"),
                    tool("finance", "headlines", "company news"),
                ),
            ),
            CatalogServer(
                name="meteo",
                description="weather",
                tools=(tool("meteo", "outlook", "city forecast"),),
            ),
        ]
    )


def test_static_similarity_finds_a_tool_no_word_of_the_need_names() -> None:
    lexical = ToolIndex.build(catalog())
    assert lexical.rank("share value") == ()
    index = ToolIndex.build(catalog(), embedder=embedder(), ranking=Ranking.static())
    assert index.rank("share value")[0].tool == "quote"


class CountingEmbedder:
    """Wraps an embedder and counts the texts it was asked to embed."""

    def __init__(self, inner: StaticEmbedder) -> None:
        self.inner = inner
        self.texts = 0

    def embed(self, texts: Any) -> Any:
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_the_precise_embedder_is_asked_only_when_the_ranking_is_ambiguous() -> None:
    precise = CountingEmbedder(embedder())
    index = ToolIndex.build(
        catalog(), embedder=embedder(), precise_embedder=precise, ranking=Ranking.static()
    )
    after_build = precise.texts
    assert after_build == 5  # two servers and three tools, embedded once when indexed
    assert index.rank("stock price")[0].tool == "quote"  # a clear winner: no second opinion
    assert (index.second_opinions, precise.texts) == (0, after_build)
    # A margin of 100 % makes every ranking ambiguous: now the precise embedder is asked.
    index.ranking = replace(Ranking.static(), second_opinion_margin=1.0)
    assert index.rank("stock price")[0].tool == "quote"
    assert (index.second_opinions, precise.texts) == (1, after_build + 1)
    assert index.needs_ranked == 2


def test_precise_vectors_are_saved_and_reused(tmp_path: Path) -> None:
    index = ToolIndex.build(catalog(), embedder=embedder(), precise_embedder=embedder())
    index.save(tmp_path / "index.npz")
    precise = CountingEmbedder(embedder())
    loaded = ToolIndex.load(tmp_path / "index.npz", embedder=embedder(), precise_embedder=precise)
    assert precise.texts == 1  # only the dimension probe
    assert loaded.rank("share value") == index.rank("share value")
    servers, tools = loaded.vectors(precise=True)
    assert servers is not None and tools is not None and tools.shape == (3, len(WORDS))


def test_precise_vectors_of_another_model_are_refused(tmp_path: Path) -> None:
    ToolIndex.build(catalog(), embedder=embedder(), precise_embedder=embedder()).save(
        tmp_path / "index.npz"
    )
    other = StaticEmbedder(np.eye(len(WORDS), 4, dtype=np.float32), tiny_tokenizer())
    with pytest.raises(UserError, match="another model"):
        ToolIndex.load(tmp_path / "index.npz", embedder=embedder(), precise_embedder=other)


def test_a_precise_embedder_needs_a_fast_one() -> None:
    with pytest.raises(UserError, match="give embedder= too"):
        ToolIndex(precise_embedder=embedder())
