"""The discovery benchmark's metrics, data reader and BM25 baseline (bench/discovery).

The benchmark lives outside the package, so its folder is put on sys.path the way the bench
scripts find each other; each test checks a value worked out by hand.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH_DISCOVERY = Path(__file__).resolve().parents[2] / "bench" / "discovery"
sys.path.append(str(BENCH_DISCOVERY))

from baselines import BM25Search  # noqa: E402
from context_cost import ContextCost, first_tools, openai_tools  # noqa: E402
from metrics import (  # noqa: E402
    QueryScore,
    average,
    complete_at,
    ndcg_at,
    recall_at,
    top1_hit,
)
from no_match import NEEDS, language, measure, needs_of  # noqa: E402
from retriever import Ranking  # noqa: E402
from toolsets import DATA_ROOT, SET_NAMES, load_toolset, subsample  # noqa: E402

A, B, C, D = ("s", "a"), ("s", "b"), ("t", "c"), ("t", "d")


def test_recall_counts_the_share_of_expected_tools_in_the_first_k() -> None:
    assert recall_at([A, C, B], [A, B], 5) == 1.0
    assert recall_at([A, C, B], [A, B], 2) == 0.5
    assert recall_at([C, D], [A, B], 5) == 0.0
    assert recall_at([], [A], 5) == 0.0


def test_recall_does_not_reward_a_repeated_hit() -> None:
    assert recall_at([A, A, A], [A, B], 5) == 0.5


def test_complete_needs_every_expected_tool_in_the_first_k() -> None:
    assert complete_at([B, C, A], [A, B], 3)
    assert not complete_at([B, C, A], [A, B], 2)
    assert not complete_at([], [A], 5)


def test_top1_is_defined_for_single_tool_queries_only() -> None:
    assert top1_hit([A, B], [A]) is True
    assert top1_hit([B, A], [A]) is False
    assert top1_hit([], [A]) is False
    assert top1_hit([A, B], [A, B]) is None


def test_ndcg_is_one_for_a_perfect_ranking_and_discounts_lower_ranks() -> None:
    assert ndcg_at([A, B, C], [A, B], 10) == pytest.approx(1.0)
    assert ndcg_at([C, A], [A], 10) == pytest.approx(1 / math.log2(3))
    # Two expected, one found at rank 1: DCG 1, ideal 1 + 1/log2(3).
    assert ndcg_at([A, C, D], [A, B], 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at([C, D, A], [A], 2) == 0.0


def test_ndcg_counts_a_repeated_hit_once() -> None:
    assert ndcg_at([A, A], [A, B], 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_an_empty_expectation_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="at least one expected tool"):
        recall_at([A], [], 5)


def test_average_takes_top1_over_single_tool_queries_and_counts_abstentions() -> None:
    scores = [
        QueryScore.of([A], [A]),
        QueryScore.of([C], [A]),
        QueryScore.of([], [A, B], found=False),
        QueryScore.of([A, B], [A, B]),
    ]
    result = average(scores)
    assert result.queries == 4
    assert result.single_queries == 2
    assert result.top1 == 0.5
    assert result.recall5 == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert result.complete5 == 0.5
    assert result.abstain_share == 0.25


def test_average_reports_nan_top1_when_no_query_is_single_tool() -> None:
    assert math.isnan(average([QueryScore.of([A, B], [A, B])]).top1)


def test_average_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one query score"):
        average([])


def write_toolset(folder: Path) -> Path:
    folder.mkdir()
    catalog = {
        "name": "tiny",
        "source": "test",
        "servers": [
            {
                "name": "weather",
                "description": "Forecasts",
                "tools": [
                    {
                        "name": "get_forecast",
                        "description": "Weather forecast for a city",
                        "inputSchema": {"type": "object", "properties": {"city": {}}},
                    },
                    {"name": "get_alerts", "description": "Storm alerts", "inputSchema": {}},
                ],
            },
            {
                "name": "mail",
                "description": "",
                "tools": [{"name": "send_email", "description": "Send an email message"}],
            },
        ],
    }
    (folder / "catalog.json").write_text(json.dumps(catalog))
    queries = [
        {
            "id": 1,
            "query": "weather in Paris",
            "expected": [{"server": "weather", "tool": "get_forecast"}],
        },
        {
            "id": 2,
            "query": "email the forecast",
            "expected": [
                {"server": "mail", "tool": "send_email"},
                {"server": "mail", "tool": "send_email"},
                {"server": "weather", "tool": "get_forecast"},
            ],
        },
    ]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    return folder


def test_the_reader_keeps_servers_tools_and_deduplicated_expectations(tmp_path: Path) -> None:
    toolset = load_toolset(write_toolset(tmp_path / "tiny"))
    assert toolset.name == "tiny"
    assert [tool.key for tool in toolset.tools] == [
        ("weather", "get_forecast"),
        ("weather", "get_alerts"),
        ("mail", "send_email"),
    ]
    assert toolset.tools[0].parameter_names == ("city",)
    assert toolset.tools[2].input_schema == {}
    assert toolset.queries[1].expected == (("mail", "send_email"), ("weather", "get_forecast"))


def test_subsample_is_seeded_and_keeps_the_original_order(tmp_path: Path) -> None:
    numbers = list(range(100))
    first = subsample(numbers, 10)
    assert first == subsample(numbers, 10)
    assert list(first) == sorted(first) and len(set(first)) == 10
    assert subsample(numbers[:5], 10) == tuple(numbers[:5])


def test_bm25_finds_by_description_and_returns_nothing_for_unknown_words(tmp_path: Path) -> None:
    toolset = load_toolset(write_toolset(tmp_path / "tiny"))
    search = BM25Search(toolset.servers)
    ranking = search.search("send an email", 10)
    assert ranking.keys[0] == ("mail", "send_email") and ranking.found
    assert len(ranking.keys) == 1  # the other tools share no word with the query
    empty = search.search("zyzzyva", 10)
    assert empty.keys == () and not empty.found


def test_context_cost_keeps_the_first_tools_and_computes_the_saving(tmp_path: Path) -> None:
    toolset = load_toolset(write_toolset(tmp_path / "tiny"))
    kept = first_tools(toolset.servers, 2)
    assert [(s.name, len(s.tools)) for s in kept] == [("weather", 2)]
    tools = json.loads(openai_tools([("f", "does f", {"type": "object"})]))
    assert tools == [
        {
            "type": "function",
            "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}},
        }
    ]
    cost = ContextCost("x", tools=3, full_injection=1000, core=30, loaded=20)
    assert cost.discovery == 50
    assert cost.saving == pytest.approx(0.95)


def test_language_is_chinese_only_for_a_mostly_chinese_need() -> None:
    assert language("关掉客厅的灯") == "zh"
    assert language("查询 Maven 上 spring-core 的最新发布版本") == "zh"
    assert language("What are the 八字 of a boy born on 1 May 2001?") == "en"
    assert language("send an email") == "en"


def test_every_set_has_no_match_needs_in_both_languages() -> None:
    for set_name in SET_NAMES:
        if not (DATA_ROOT / set_name / "catalog.json").exists():
            pytest.skip("the tool sets are not on this machine")
        toolset = load_toolset(DATA_ROOT / set_name)
        unserved = [need for need in needs_of(toolset, ()) if not need.served]
        assert {need.lang for need in unserved} == {"en", "zh"}
        assert len(unserved) >= 50
    for path in NEEDS.glob("*_match_zh.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            assert entry["lang"] == "zh" and entry["expected"]


class AnswersEmailOnly:
    """A retriever that claims a tool exactly when the need mentions email."""

    name = "email only"

    def search(self, query: str, k: int) -> Ranking:
        found = "email" in query
        return Ranking(((("mail", "send_email"),) if found else ()), found=found)


def test_measure_counts_right_verdicts_per_side_and_language(tmp_path: Path) -> None:
    toolset = load_toolset(write_toolset(tmp_path / "tiny"))
    result = measure(toolset, toolset.queries, AnswersEmailOnly(), 10)
    # The tiny set has no needs/ files: only its two English labelled needs, one with email.
    assert result.no_match == {}
    assert result.match == {"en": (1, 2)}
