"""Calibrated "no tool found": a need no tool serves is refused with advice, never guessed.

The fixture catalog holds tools that share a word with everyday needs they do not serve (the
chess server's `get_turn` and "turn off the lights"), as the development catalogs do. Lexical
ranking, so the tests need no model.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from wakeful.discovery import Catalog, CatalogServer, CatalogTool, ToolIndex
from wakeful.discovery.bm25 import FieldedBM25
from wakeful.discovery.index import NOT_FOUND_ADVICE
from wakeful.discovery.judgement import LIGHT_VERBS, MIN_WORD_SURPRISE
from wakeful.discovery.tokenize import tokenize

FIXTURE = Path(__file__).parent / "fixtures" / "no_match_catalog.json"

NO_MATCH = [
    "Turn off the living room lights.",
    "Send an email to my manager saying I'll be late today.",
    "Set a timer for 15 minutes.",
    "Call an Uber to take me to the airport.",
    "关掉客厅的灯",
    "给我的经理发一封邮件",
    # Shares "start" and "new" with `start_process` ("Start a new terminal process"): two words,
    # but a light verb frames the request and is no evidence of serving it.
    "Start a new timer for my tea.",
]
MATCH = [
    ("Whose turn is it in my chess game?", "get_turn"),
    ("What is the weather forecast for Paris?", "get_weather_by_city"),
    ("Show the status of my git repository", "git_status"),
    ("What is the exchange rate from dollars to euros?", "exchange_rate"),
    ("查询明天北京到上海的火车票", "get-tickets"),
    ("Start a new terminal process running the build command", "start_process"),
]


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    return ToolIndex.build(Catalog.load(FIXTURE))


@pytest.mark.parametrize("need", NO_MATCH)
def test_a_need_no_tool_serves_is_not_found_and_gets_advice(index: ToolIndex, need: str) -> None:
    result = index.search(need)
    assert not result.found
    assert result.matches == ()
    assert result.advice == NOT_FOUND_ADVICE


def test_a_tool_sharing_one_word_with_the_need_is_ranked_but_not_claimed(index: ToolIndex) -> None:
    result = index.search("Turn off the living room lights.")
    assert result.ranked[0].tool == "get_turn"  # the weak guess the judgement refuses
    assert not result.found


@pytest.mark.parametrize(("need", "tool"), MATCH)
def test_a_need_a_tool_serves_finds_it(index: ToolIndex, need: str, tool: str) -> None:
    result = index.search(need)
    assert result.found
    assert result.advice is None
    assert result.matches[0].tool == tool


@pytest.mark.parametrize("need", NO_MATCH + [need for need, _ in MATCH])
def test_a_batch_judges_each_need_as_the_single_path_does(index: ToolIndex, need: str) -> None:
    single = index.search(need)  # one need, its default k
    batch = index.search(need, 10)  # the k of `wakeful tools search --queries`
    ranked, threshold = index.rank_judged(need, 10)
    assert batch.found == single.found
    assert batch.ranked == ranked == index.rank(need, 10)
    assert batch.found == (bool(ranked) and ranked[0].score >= threshold)


def test_light_verbs_are_search_terms_as_the_tokenizer_writes_them() -> None:
    for word in ("Turn", "turned", "turning", "set", "setting", "checks", "started", "took"):
        assert tokenize(word)[0] in LIGHT_VERBS, word
    assert not LIGHT_VERBS & set(tokenize("run open send search translate weather"))


def test_a_weak_term_weighs_in_the_need_but_is_never_covered() -> None:
    bm25 = FieldedBM25([1.0])
    slot = bm25.add("chess", [["turn", "chess", "game"]])
    bm25.add("weather", [["weather", "forecast"]])
    covered, share = bm25.coverage(["turn", "light"], slot, [0])
    assert covered == 1
    assert share == pytest.approx(bm25.idf("turn") / (bm25.idf("turn") + bm25.idf("light")))
    assert bm25.coverage(["turn", "light"], slot, [0], weak={"turn"}) == (0, 0.0)
    covered, share = bm25.coverage(["turn", "chess"], slot, [0], weak={"turn"})
    assert covered == 1
    assert share == pytest.approx(bm25.idf("chess") / (bm25.idf("turn") + bm25.idf("chess")))


def guide_catalog(cities: int) -> Catalog:
    """A travel-guide server with one tool per city, each saying "guide" and "city", and a
    weather tool: a need about a city guide by taxi shares two common words with every guide."""
    guides = [
        CatalogTool(
            server="guides",
            name=f"city_guide_{i}",
            description=f"A guide to the sights of city number {i}.",
            input_schema={},
        )
        for i in range(cities)
    ]
    weather = CatalogTool(
        server="meteo", name="forecast", description="Weather forecast.", input_schema={}
    )
    return Catalog.from_servers(
        [
            CatalogServer("guides", "City guides.", tuple(guides)),
            CatalogServer("meteo", "Weather.", (weather,)),
        ]
    )


def test_two_words_most_tools_hold_are_no_evidence_in_a_large_catalog() -> None:
    index = ToolIndex.build(guide_catalog(300))
    need = "Book a taxi for a city guide."
    result = index.search(need)
    assert result.ranked[0].tool.startswith("city_guide_")  # ranked, as any tool is
    assert not result.found
    found = index.evidence_of(need)
    assert found is not None and found.covered_terms == 2
    assert found.word_surprise < MIN_WORD_SURPRISE  # 300 tools hold both words


def test_the_same_two_words_are_evidence_where_few_tools_hold_them() -> None:
    index = ToolIndex.build(guide_catalog(1))
    result = index.search("Book a taxi for a city guide.")
    assert result.found
    assert result.matches[0].tool == "city_guide_0"


def test_word_surprise_is_the_covered_idf_mass_less_the_log_of_the_catalog_size() -> None:
    index = ToolIndex.build(guide_catalog(20))
    found = index.evidence_of("weather forecast for Paris")
    assert found is not None
    bm25 = FieldedBM25([1.0])
    for i in range(21):
        bm25.add(i, [["weather", "forecast"] if i == 0 else ["guide", "sight", "city"]])
    covered = bm25.idf("weather") + bm25.idf("forecast")
    assert found.covered_terms == 2
    assert found.word_surprise == pytest.approx(covered - math.log(21))
    assert found.cosine is None  # a lexical index has no transformer to ask


def test_a_need_nothing_scores_has_no_evidence() -> None:
    index = ToolIndex.build(guide_catalog(3))
    assert index.evidence_of("qwzx vlorp") is None


def test_a_verb_that_relays_the_request_to_someone_else_is_no_evidence() -> None:
    # "Ask Alexa to play rain sounds": the assistant tool holds "ask" and "play", two words of
    # the need, but asking is how the request is passed on, not what it is.
    assistant = CatalogTool(
        server="tutor",
        name="ask_tutor",
        description="Ask the tutor a question and play the recorded answer.",
        input_schema={},
    )
    weather = CatalogTool(
        server="meteo", name="forecast", description="Weather forecast.", input_schema={}
    )
    index = ToolIndex.build(
        Catalog.from_servers(
            [
                CatalogServer("tutor", "Tutoring.", (assistant,)),
                CatalogServer("meteo", "Weather.", (weather,)),
            ]
        )
    )
    need = "Ask Alexa to play rain sounds in the bedroom."
    result = index.search(need)
    assert result.ranked[0].tool == "ask_tutor"
    assert not result.found
    found = index.evidence_of(need)
    assert found is not None and found.covered_terms == 1  # "play"; "ask" is never covered
    for word in ("ask", "asked", "say", "said"):
        assert tokenize(word)[0] in LIGHT_VERBS, word
