"""The fielded BM25 index: scoring several parts of a need at once, and staying right as
documents come and go."""

from __future__ import annotations

import numpy as np

from wakeful.discovery.bm25 import FieldedBM25


def index() -> FieldedBM25:
    bm25 = FieldedBM25((2.0, 1.0))
    bm25.add("quote", [["stock", "quote"], ["get", "the", "stock", "price"]])
    bm25.add("weather", [["forecast"], ["weather", "forecast", "for", "a", "city"]])
    bm25.add("mail", [["send", "email"], ["send", "an", "email", "message"]])
    return bm25


def test_the_parts_of_a_need_score_as_if_each_were_asked_alone() -> None:
    bm25 = index()
    parts = [["stock", "price", "email"], ["stock", "price"], ["email", "unknown"]]
    together = bm25.scores_of_parts(parts)
    for part, scores in zip(parts, together, strict=True):
        np.testing.assert_allclose(scores, bm25.scores(part))
    assert together[1][bm25.slot("quote")] > together[0][bm25.slot("quote")]


def test_scores_follow_every_change_to_the_documents() -> None:
    bm25 = index()
    before = bm25.scores(["forecast", "city"])
    bm25.add("radar", [["rain", "radar"], ["rain", "radar", "for", "a", "city"]])
    fresh = index()
    fresh.add("radar", [["rain", "radar"], ["rain", "radar", "for", "a", "city"]])
    after = bm25.scores(["forecast", "city"])
    np.testing.assert_allclose(after, fresh.scores(["forecast", "city"]))
    assert after[bm25.slot("weather")] != before[bm25.slot("weather")]  # idf and lengths moved
    bm25.remove("radar")
    np.testing.assert_allclose(bm25.scores(["forecast", "city"]), before)
