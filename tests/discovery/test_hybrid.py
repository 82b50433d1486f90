"""The hybrid ranking: words, static token embeddings and the transformer, standardised per need.

The embedders are tiny static ones over a fixed vocabulary (synonyms share an axis), so the
tests run without a model; the "transformer" is the same kind of embedder that also counts
tokens and how many texts it was asked to embed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from wakeful.discovery import Catalog, CatalogServer, CatalogTool, ToolIndex
from wakeful.discovery.hybrid import HybridRanking, standardise
from wakeful.discovery.static_embeddings import StaticEmbedder

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "stock", "price", "quote", "share", "value"]
WORDS += ["weather", "forecast", "rain", "city", "email", "send", "message", "mail", "team"]
WORDS += ["translate", "text", "language", "calendar", "event", "meeting", "schedule"]
SYNONYMS: tuple[tuple[str, str], ...] = (
    ("share", "stock"),
    ("value", "price"),
    ("rain", "weather"),
)
SYNONYMS += (("mail", "email"),)
SYNONYMS += (("meeting", "event"),)


def tiny_static() -> StaticEmbedder:
    tokenizer = Tokenizer(WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    matrix = np.eye(len(WORDS), dtype=np.float32)
    matrix[: WORDS.index("stock")] = 0.0
    for synonym, word in SYNONYMS:
        matrix[WORDS.index(synonym)] = matrix[WORDS.index(word)]
    return StaticEmbedder(matrix, tokenizer, weights=np.ones(len(WORDS)))


class CountingTransformer:
    """Stands in for the transformer: counts its tokens (a word each, plus two) and the texts
    it embeds."""

    def __init__(self) -> None:
        self.inner = tiny_static()
        self.texts: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def tool(server: str, name: str, description: str) -> CatalogTool:
    return CatalogTool(server=server, name=name, description=description, input_schema={})


def catalog() -> Catalog:
    return Catalog.from_servers(
        [
            CatalogServer("finance", "Markets.", (tool("finance", "quote", "stock price"),)),
            CatalogServer("meteo", "Weather.", (tool("meteo", "outlook", "city forecast"),)),
            CatalogServer(
                "mailer",
                "Mail.",
                (
                    tool("mailer", "send_email", "send an email message"),
                    tool("mailer", "list_inbox", "list the inbox"),
                ),
            ),
            CatalogServer("words", "Languages.", (tool("words", "translate", "translate text"),)),
            CatalogServer("agenda", "Calendar.", (tool("agenda", "add_event", "calendar event"),)),
        ]
    )


def hybrid(**overrides: Any) -> tuple[ToolIndex, CountingTransformer]:
    transformer = CountingTransformer()
    index = ToolIndex.build(
        catalog(),
        embedder=tiny_static(),
        precise_embedder=transformer,
        ranking=HybridRanking(**overrides) if overrides else None,
    )
    transformer.texts.clear()
    return index, transformer


def test_with_a_static_and_a_precise_embedder_the_default_is_the_hybrid_ranking() -> None:
    index, _ = hybrid()
    assert index.ranking == HybridRanking()


def test_a_short_need_is_read_whole_by_the_transformer() -> None:
    index, transformer = hybrid()
    result = index.search("share value")  # no word of the tool's own: only embeddings see it
    assert result.found
    assert result.matches[0].tool == "quote"
    assert transformer.texts == ["share value"]
    assert (index.needs_ranked, index.dense_needs) == (1, 1)


def test_a_long_need_is_split_and_each_request_finds_its_tool_without_the_transformer() -> None:
    index, transformer = hybrid(precise_max_tokens=8)
    need = "Get the stock price of the company today. Then send an email message to the team."
    # Both requests are confident matches; scored only as a whole, the stock quote covers too
    # little of the need to clear the threshold.
    assert {m.tool for m in index.search(need, 2).matches} == {"quote", "send_email"}
    assert transformer.texts == []
    assert index.dense_needs == 0


def test_scores_lie_in_zero_to_one_and_the_calibrated_threshold_judges_them() -> None:
    index, _ = hybrid()
    ranked, threshold = index.rank_judged("send an email message", 10)
    assert threshold == HybridRanking().threshold
    assert ranked[0].tool == "send_email" and ranked[0].score > threshold
    assert all(0.0 < m.score < 1.0 for m in ranked)


def test_a_tool_that_stands_out_without_the_transformers_evidence_is_not_found() -> None:
    permissive, _ = hybrid(precise_floor=0.0, precise_floor_with_words=0.0)
    strict, _ = hybrid(precise_floor=0.99, precise_floor_with_words=0.99)
    ranked, threshold = strict.rank_judged("message team", 5)
    assert ranked[0].tool == "send_email" and ranked[0].score >= HybridRanking().threshold
    assert threshold == float("inf")  # the cosine, not the score, decides
    assert not strict.search("message team").found
    assert permissive.search("message team").found


def test_the_cosine_a_tool_needs_grows_with_the_catalog_it_was_picked_from() -> None:
    # Among more tools, an unrelated one reaches a higher cosine by chance: the same cosine is
    # evidence in a small catalog and not in a large one.
    ranking = HybridRanking(precise_floor=0.05)
    small = ToolIndex.build(
        catalog(), embedder=tiny_static(), precise_embedder=CountingTransformer(), ranking=ranking
    )
    notes = tuple(tool("notes", f"note_{i}", "calendar event") for i in range(400))
    large = ToolIndex.build(
        Catalog.from_servers(
            [*catalog().servers.values(), CatalogServer("notes", "Notes.", notes)]
        ),
        embedder=tiny_static(),
        precise_embedder=CountingTransformer(),
        ranking=ranking,
    )
    at_small, at_large = small.evidence_of("message team"), large.evidence_of("message team")
    assert at_small is not None and at_large is not None
    assert at_small.cosine == pytest.approx(at_large.cosine)  # the same tool, the same cosine
    for index, found in ((small, at_small), (large, at_large)):
        spread = HybridRanking().cosine_spread
        assert found.chance_cosine == pytest.approx(spread * np.sqrt(2 * np.log(len(index))))
    assert small.search("message team").matches[0].tool == "send_email"
    assert large.search("message team").ranked[0].tool == "send_email"
    assert not large.search("message team").found


def test_a_mostly_chinese_need_is_judged_by_its_words_not_the_transformer() -> None:
    servers = [
        *catalog().servers.values(),
        CatalogServer("youjian", "邮件。", (tool("youjian", "fasong", "发送电子邮件"),)),
    ]
    index = ToolIndex.build(
        Catalog.from_servers(servers),
        embedder=tiny_static(),
        precise_embedder=CountingTransformer(),
        ranking=HybridRanking(threshold=0.0),
    )
    assert index.search("发送电子邮件给团队").matches[0].tool == "fasong"
    # One known word in a Chinese need: the transformer's cosine to the calendar tool is high,
    # but it is not evidence for a need mostly in a language it does not read, and the words
    # cover too little of the need. The same word in an English need is judged by the cosine.
    ranked, threshold = index.rank_judged("关掉客厅的灯 calendar", 5)
    assert ranked[0].tool == "add_event" and threshold == float("inf")
    assert not index.search("关掉客厅的灯 calendar").found
    assert index.search("switch off living room lights calendar").found


def test_a_need_nothing_matches_is_no_tool_found() -> None:
    index, _ = hybrid()
    result = index.search("qwzx vlorp frobnicate")
    assert not result.found
    assert result.advice is not None and "Rephrase" in result.advice


def test_a_catalog_of_one_tool_finds_it_and_refuses_an_unrelated_need() -> None:
    single = Catalog.from_servers(
        [CatalogServer("finance", "Markets.", (tool("finance", "quote", "stock price"),))]
    )
    index = ToolIndex.build(single, embedder=tiny_static(), precise_embedder=CountingTransformer())
    assert [m.tool for m in index.search("stock price").matches] == ["quote"]
    assert not index.search("translate this text to another language").found


def test_a_removed_server_is_never_ranked() -> None:
    index, _ = hybrid()
    index.remove_server("finance")
    assert "quote" not in {m.tool for m in index.rank("stock price share value", 10)}


def test_a_saved_hybrid_index_ranks_the_same_when_loaded(tmp_path: Path) -> None:
    index, _ = hybrid()
    index.save(tmp_path / "index.npz")
    loaded = ToolIndex.load(
        tmp_path / "index.npz", embedder=tiny_static(), precise_embedder=CountingTransformer()
    )
    assert isinstance(loaded.ranking, HybridRanking)
    for need in ("share value", "calendar meeting", "send mail and translate text"):
        assert loaded.rank(need) == index.rank(need)


def test_standardise_leaves_each_slot_out_of_its_own_reference() -> None:
    live = np.ones(5, dtype=bool)
    values = np.array([0.0, 0.0, 0.1, 0.0, 1.0])
    z = standardise(values, live)
    # The outlier is measured against the other four: far out, not capped by its own pull.
    others = values[:4]
    assert z[4] == pytest.approx((1.0 - others.mean()) / others.std())
    assert z[4] > np.sqrt(len(values))
    assert np.all(z[:4] < z[4])


def test_standardise_with_one_slot_measures_it_against_the_prior() -> None:
    z = standardise(np.array([0.3]), np.ones(1, dtype=bool), (0.1, 0.05), 16.0)
    assert z[0] == pytest.approx((0.3 - 0.1) / 0.05)


def test_standardise_gives_zero_to_free_slots_and_to_a_catalog_where_all_agree() -> None:
    live = np.array([True, True, False, True])
    z = standardise(np.array([0.5, 0.2, 9.0, 0.1]), live)
    assert z[2] == 0.0
    assert np.all(standardise(np.full(4, 0.3), np.ones(4, dtype=bool)) == 0.0)
    assert np.all(standardise(np.zeros(3), np.zeros(3, dtype=bool)) == 0.0)


def test_updating_one_tool_of_a_server_embeds_only_that_tool_again() -> None:
    index, transformer = hybrid()
    mailer = index.servers["mailer"]
    send, inbox = mailer.tools
    changed = tool("mailer", "send_email", "send an email message to the team")
    index.upsert_server(CatalogServer("mailer", mailer.description, (changed, inbox)))
    assert transformer.texts == ["send_email: send an email message to the team"]
    fresh = ToolIndex.build(
        index.catalog(), embedder=tiny_static(), precise_embedder=CountingTransformer()
    )
    for need in ("mail the team", "list the inbox", "share value"):
        assert index.rank(need) == fresh.rank(need)
    assert send != changed


def test_vectors_embedded_ahead_are_used_and_nothing_is_embedded_twice() -> None:
    """The runtime embeds a change's new texts in a worker thread (`embed_texts`), then
    applies it on the event loop: the upsert itself embeds nothing."""
    index, transformer = hybrid()
    agenda = CatalogServer(
        "agenda",
        "Calendar.",
        (tool("agenda", "add_event", "calendar event"), tool("agenda", "move", "move a meeting")),
    )
    fast, precise = index.texts_to_embed([agenda])
    assert fast == precise == ["move: move a meeting"]  # the rest is held already
    embedded = index.embed_texts(fast, precise)
    assert transformer.texts == ["move: move a meeting"]
    index.upsert_servers([agenda], embedded=embedded)
    assert transformer.texts == ["move: move a meeting"]
    assert index.rank("meeting", 2)[0].tool in {"add_event", "move"}
    assert index.texts_to_embed([agenda]) == ([], [])


def test_without_embedders_there_is_nothing_to_embed() -> None:
    index = ToolIndex.build(catalog())
    assert index.texts_to_embed(catalog().servers.values()) == ([], [])
    assert index.embed_texts([], []) == ({}, {})
