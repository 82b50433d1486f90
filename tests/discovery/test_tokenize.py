"""Tokenisation of tool names, descriptions and needs, in English and Chinese."""

from __future__ import annotations

import pytest

from wakeful.discovery.tokenize import STOPWORDS, stem, tokenize


@pytest.mark.parametrize(
    "name",
    ["getStockPrice", "get_stock_price", "get-stock-price", "GetStockPrice", "GET_STOCK_PRICE"],
)
def test_identifier_styles_give_the_same_terms(name: str) -> None:
    assert tokenize(name) == ["stock", "pric"]


def test_acronyms_and_digits_are_split() -> None:
    assert tokenize("HTTPServer") == ["http", "server"]
    assert tokenize("mp3ToWav") == ["mp", "3", "wav"]
    assert tokenize("ipv6") == ["ipv", "6"]


def test_stopwords_and_single_letters_are_dropped() -> None:
    assert tokenize("Can you please help me find the prices of stocks? I'm searching") == [
        "pric",
        "stock",
        "search",
    ]
    assert "the" in STOPWORDS
    assert tokenize("the", keep_stopwords=True) == ["the"]


@pytest.mark.parametrize(
    ("words", "common"),
    [
        (["create", "created", "creating", "creates"], "creat"),
        (["image", "images"], "imag"),
        (["match", "matches", "matching"], "match"),
        (["map", "mapping", "maps"], "map"),
        (["city", "cities"], "city"),
    ],
)
def test_inflections_conflate(words: list[str], common: str) -> None:
    assert {stem(w) for w in words} == {common}


@pytest.mark.parametrize("word", ["class", "status", "analysis", "string", "business", "api"])
def test_words_that_only_look_inflected_are_kept(word: str) -> None:
    assert stem(word) == word


def test_chinese_becomes_character_bigrams() -> None:
    assert tokenize("搜索关键词") == ["搜索", "索关", "关键", "键词"]
    assert tokenize("查 股价") == ["查", "股价"]


def test_mixed_chinese_and_english() -> None:
    assert tokenize("使用必应搜索 bing_search") == [
        "使用",
        "用必",
        "必应",
        "应搜",
        "搜索",
        "bing",
        "search",
    ]


def test_punctuation_only_gives_nothing() -> None:
    assert tokenize("?!，。 ...") == []
