"""The ONNX Runtime embedder, over graphs built here: no download, and torch only for the export.

A hand-made graph (an embedding table, masked mean pooling, L2 normalisation) stands in for a
sentence model, so every similarity is known; the export is checked against a tiny random BERT
when torch and transformers are installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing
from typer.testing import CliRunner, Result

from wakeful.cli.tools_search import register
from wakeful.discovery import Catalog, CatalogServer, CatalogTool, OnnxEmbedder, ToolIndex
from wakeful.discovery.model_cache import model_digest
from wakeful.discovery.onnx_embeddings import export_onnx, onnx_cache_path
from wakeful.errors import UserError

onnx = pytest.importorskip("onnx", reason="building test graphs needs the onnx package")
pytest.importorskip("onnxruntime", reason="ONNX embeddings need onnxruntime")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "stock", "price", "share", "value", "weather"]
WORDS += ["forecast", "rain", "city", "news", "company", "get", "the", "##s"]


def tiny_tokenizer() -> Any:
    tokenizer = Tokenizer(WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = BertPreTokenizer()
    tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tokenizer


def table() -> np.ndarray[Any, np.dtype[np.float32]]:
    """One axis per word; synonyms share theirs; [CLS] and [SEP] embed as zero."""
    rows = np.eye(len(WORDS), dtype=np.float32)
    rows[[WORDS.index("[CLS]"), WORDS.index("[SEP]")]] = 0.0
    for synonym, word in (("share", "stock"), ("value", "price"), ("rain", "weather")):
        rows[WORDS.index(synonym)] = rows[WORDS.index(word)]
    return rows


def mean_pooling_graph(path: Path, embeddings: np.ndarray[Any, Any]) -> Path:
    """An ONNX model: rows of `embeddings` for the ids, averaged over the mask, normalised."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["states"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "last_axis"], ["mask3"]),
        helper.make_node("Mul", ["states", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "token_axis"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "token_axis"], ["count"], keepdims=0),
        helper.make_node("Div", ["summed", "count"], ["pooled"]),
        helper.make_node("LpNormalization", ["pooled"], ["embedding"], axis=1, p=2),
    ]
    graph = helper.make_graph(
        nodes,
        "mean_pooling",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", None])],
        initializer=[
            numpy_helper.from_array(np.asarray(embeddings, dtype=np.float32), "table"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "last_axis"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "token_axis"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def tool(server: str, name: str, description: str) -> CatalogTool:
    return CatalogTool(server=server, name=name, description=description, input_schema={})


@pytest.fixture
def embedder(tmp_path: Path) -> OnnxEmbedder:
    return OnnxEmbedder(mean_pooling_graph(tmp_path / "tiny.onnx", table()), tiny_tokenizer())


def test_a_text_is_the_models_normalised_sentence_embedding(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed(["stock price", "share value", "weather"])
    assert vectors.shape == (3, len(WORDS))
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert vectors[0] @ vectors[1] == pytest.approx(1.0)
    assert vectors[0] @ vectors[2] == pytest.approx(0.0)
    assert embedder.dimension == len(WORDS)


def test_a_batch_padded_to_its_longest_text_equals_the_texts_one_by_one(
    embedder: OnnxEmbedder,
) -> None:
    texts = ["the weather forecast for the city", "stock", "get company news", "rain"] * 20
    batch = embedder.embed(texts)
    alone = np.vstack([embedder.embed([text]) for text in texts])
    np.testing.assert_allclose(batch, alone, atol=1e-6)


def test_truncation_keeps_the_first_tokens(tmp_path: Path) -> None:
    short = OnnxEmbedder(
        mean_pooling_graph(tmp_path / "tiny.onnx", table()), tiny_tokenizer(), max_tokens=3
    )
    # [CLS] stock [SEP]: "weather" is cut off.
    assert short.embed(["stock weather"])[0] @ short.embed(["stock"])[0] == pytest.approx(1.0)


def test_no_texts_give_no_rows(embedder: OnnxEmbedder) -> None:
    assert embedder.embed([]).shape == (0, len(WORDS))


def test_the_index_ranks_with_it(embedder: OnnxEmbedder) -> None:
    catalog = Catalog.from_servers(
        [
            CatalogServer(
                "markets", "Financial data.", (tool("markets", "quote", "Stock price."),)
            ),
            CatalogServer(
                "meteo", "Outdoor data.", (tool("meteo", "outlook", "Weather forecast."),)
            ),
        ]
    )
    index = ToolIndex.build(catalog, embedder=embedder)
    # No word of the need is in the catalog: only the embedding's synonyms connect them.
    assert index.rank("share value", 2)[0].tool == "quote"
    assert index.rank("rain", 2)[0].tool == "outlook"


def test_bad_settings_and_models_are_user_errors(tmp_path: Path) -> None:
    graph = mean_pooling_graph(tmp_path / "tiny.onnx", table())
    with pytest.raises(UserError, match="max_tokens must leave room"):
        OnnxEmbedder(graph, tiny_tokenizer(), max_tokens=1)
    with pytest.raises(UserError, match="at least one thread"):
        OnnxEmbedder(graph, tiny_tokenizer(), threads=0)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(UserError, match="Cannot load the ONNX model"):
        OnnxEmbedder(garbage, tiny_tokenizer())
    # A table with fewer rows than the tokenizer's ids: the graph fails on the probe.
    with pytest.raises(UserError, match="does not take input_ids"):
        OnnxEmbedder(mean_pooling_graph(tmp_path / "small.onnx", np.eye(3)), tiny_tokenizer())


def test_a_model_that_does_not_mean_pool_is_refused_before_any_export(tmp_path: Path) -> None:
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    with pytest.raises(UserError, match="does not mean-pool"):
        export_onnx(tmp_path, tmp_path / "out.onnx", quantise=True)
    assert not (tmp_path / "out.onnx").exists()


def test_cache_names_follow_the_model_files_and_the_recipe(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    quantised = onnx_cache_path(tmp_path, tmp_path / "cache", quantise=True)
    exact = onnx_cache_path(tmp_path, tmp_path / "cache", quantise=False)
    assert quantised.parent == tmp_path / "cache"
    assert quantised.suffix == ".onnx"
    assert quantised != exact
    before = model_digest(tmp_path, "recipe")
    (tmp_path / "config.json").write_text('{"changed": true}')
    assert model_digest(tmp_path, "recipe") != before
    assert onnx_cache_path(tmp_path, tmp_path / "cache", quantise=True) != quantised


def cli(*args: str) -> Result:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Test root."""

    tools = typer.Typer()
    register(tools)
    app.add_typer(tools, name="tools")
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    ("flags", "named"), [(["--torch"], "--torch"), (["--ranking", "adaptive"], "--ranking")]
)
def test_model_flags_need_a_model(flags: list[str], named: str) -> None:
    result = cli("tools", "search", "--catalog", "x", *flags, "a need")
    assert result.exit_code == 1
    assert f"{named} sets how the --embeddings model is used" in result.output
    assert "give --embeddings" in result.output


def test_an_unknown_ranking_is_refused_with_the_choices() -> None:
    result = cli("tools", "search", "--catalog", "x", "--ranking", "best", "a need")
    assert result.exit_code == 2
    assert "hybrid" in result.output and "second-opinion" in result.output


def tiny_bert(folder: Path) -> Path:
    """A random 2-layer BERT over the tiny vocabulary, saved as a sentence-transformers folder."""
    transformers = pytest.importorskip("transformers", reason="the export needs transformers")
    torch = pytest.importorskip("torch", reason="the export needs torch")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    transformers.BertModel(config).save_pretrained(str(folder))
    tiny_tokenizer().save(str(folder / "tokenizer.json"))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    return folder


def torch_embedding(folder: Path, texts: list[str]) -> np.ndarray[Any, Any]:
    import torch
    from transformers import BertModel

    model = BertModel.from_pretrained(str(folder)).eval()
    tokenizer = tiny_tokenizer()
    rows = []
    with torch.inference_mode():
        for text in texts:
            ids = torch.tensor([tokenizer.encode(text).ids])
            states = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            rows.append(torch.nn.functional.normalize(states.mean(dim=1), dim=-1)[0].numpy())
    return np.vstack(rows)


@pytest.mark.parametrize(("quantise", "least_cosine"), [(False, 0.9999), (True, 0.99)])
def test_export_reproduces_the_torch_model(
    tmp_path: Path, quantise: bool, least_cosine: float
) -> None:
    folder = tiny_bert(tmp_path / "model")
    texts = ["get the stock price", "weather forecast for the city", "news"]
    exported = OnnxEmbedder.from_model(folder, cache_dir=tmp_path / "cache", quantise=quantise)
    assert exported.model_file == onnx_cache_path(folder, tmp_path / "cache", quantise=quantise)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [exported.model_file.name]
    cosines = np.sum(exported.embed(texts) * torch_embedding(folder, texts), axis=1)
    assert cosines.min() >= least_cosine
    # The second time the cached graph is read, not exported again.
    stamp = exported.model_file.stat().st_mtime_ns
    again = OnnxEmbedder.from_model(folder, cache_dir=tmp_path / "cache", quantise=quantise)
    assert again.model_file.stat().st_mtime_ns == stamp


def test_a_quantised_texts_vector_does_not_depend_on_the_texts_beside_it(tmp_path: Path) -> None:
    # int8 matrix products quantise their input over the whole tensor: in one batch, a long
    # text (and the padding of a short one) would move a short text's vector.
    folder = tiny_bert(tmp_path / "model")
    exported = OnnxEmbedder.from_model(folder, cache_dir=tmp_path / "cache", quantise=True)
    need = "stock price"
    neighbours = ["weather forecast for the city rain rain news company", "the news", need]
    alone = exported.embed([need])[0]
    for row in exported.embed(neighbours * 4)[2::3]:
        np.testing.assert_array_equal(row, alone)


@pytest.mark.parametrize(
    ("ranking", "cached"),
    [([], [".npy", ".onnx"]), (["--ranking", "adaptive"], [".onnx"]),
     (["--ranking", "second-opinion"], [".npy", ".onnx"])],
)  # fmt: skip
def test_cli_runs_the_embeddings_model_with_onnx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ranking: list[str], cached: list[str]
) -> None:
    """By default the hybrid ranking: the model through ONNX Runtime plus its static token
    embeddings, both derived once into the cache."""
    folder = tiny_bert(tmp_path / "model")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    catalog = tmp_path / "catalog.json"
    catalog.write_text(
        json.dumps(
            {
                "name": "tiny",
                "servers": [
                    {
                        "name": "markets",
                        "description": "Stock data.",
                        "tools": [{"name": "quote", "description": "Get the stock price."}],
                    }
                ],
            }
        )
    )
    result = cli(
        "tools", "search", "--catalog", str(catalog), "--embeddings", str(folder), *ranking,
        "--json", "stock price",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["tool"] == "quote"
    assert sorted(p.suffix for p in (tmp_path / "cache" / "wakeful").iterdir()) == cached


def test_a_saved_index_keeps_its_onnx_vectors(embedder: OnnxEmbedder, tmp_path: Path) -> None:
    catalog = Catalog.from_servers(
        [CatalogServer("markets", "Financial data.", (tool("markets", "quote", "Stock price."),))]
    )
    index = ToolIndex.build(catalog, embedder=embedder)
    index.save(tmp_path / "index.npz")
    loaded = ToolIndex.load(tmp_path / "index.npz", embedder=embedder)
    _, saved = index.vectors()
    _, restored = loaded.vectors()
    assert saved is not None and restored is not None
    np.testing.assert_array_equal(saved, restored)
    assert loaded.rank("share value", 1)[0].tool == "quote"


@pytest.mark.anyio
async def test_a_runtime_with_an_embeddings_model_discovers_through_the_hybrid_ranking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[discovery] embeddings_model` gives the session the hybrid index: the model through
    ONNX Runtime plus its static token embeddings, both derived into the cache at start-up."""
    from catalog_servers import catalog_servers

    from wakeful.discovery.session_tools import DiscoverySettings
    from wakeful.events import user_input
    from wakeful.messages import ToolMessage
    from wakeful.models import ScriptedModel, call, say, use
    from wakeful.runtime import Runtime

    folder = tiny_bert(tmp_path / "model")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = ScriptedModel(
        [use(call("discover_tools", need="get the current stock price of a company")), say("")]
    )
    settings = DiscoverySettings(embeddings_model=str(folder))
    async with Runtime(
        model=model,
        with_timers=False,
        workdir=tmp_path,
        discovery=settings,
        mcp_in_process=catalog_servers(),
    ) as rt:
        await rt.submit(user_input("What is Apple's stock price?"))
        await rt.wait_idle()
        messages = rt.sessions["main"].trajectory.messages
    (answer,) = [
        json.loads(m.content)
        for m in messages
        if isinstance(m, ToolMessage) and m.name == "discover_tools"
    ]
    # The random tiny model adds noise, so the match may fall under the threshold; the words
    # still put the stock price tools first, loaded or offered as the closest candidates.
    candidates = [t["name"] for t in answer["loaded"]] or answer["closest_weak_candidates"]
    assert "get_current_stock_price" in candidates[:3]
    assert sorted(p.suffix for p in (tmp_path / "cache" / "wakeful").iterdir()) == [".npy", ".onnx"]
