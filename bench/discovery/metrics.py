"""Retrieval metrics of the discovery benchmark, per query and averaged over a set.

Relevance is binary: a returned tool is relevant when it is one of the query's expected
(server, tool) pairs. A tool returned twice counts once, at its first rank, so a retriever cannot
gain by repeating a hit. Definitions follow ../shared/data/toolsets/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass


def recall_at(ranked: Sequence[Hashable], expected: Sequence[Hashable], k: int) -> float:
    """The share of expected items found among the first `k` of `ranked`."""
    wanted = _expected_set(expected)
    return len(wanted & set(ranked[:k])) / len(wanted)


def complete_at(ranked: Sequence[Hashable], expected: Sequence[Hashable], k: int) -> bool:
    """Whether every expected item is among the first `k` of `ranked`."""
    return _expected_set(expected) <= set(ranked[:k])


def top1_hit(ranked: Sequence[Hashable], expected: Sequence[Hashable]) -> bool | None:
    """For a single-item query, whether `ranked` starts with it; None for multi-item queries."""
    wanted = _expected_set(expected)
    if len(wanted) != 1:
        return None
    return bool(ranked) and ranked[0] in wanted


def ndcg_at(ranked: Sequence[Hashable], expected: Sequence[Hashable], k: int) -> float:
    """Normalised discounted cumulative gain over the first `k` ranks, binary relevance."""
    wanted = _expected_set(expected)
    seen: set[Hashable] = set()
    gain = 0.0
    for rank, item in enumerate(ranked[:k]):
        if item in wanted and item not in seen:
            gain += 1 / math.log2(rank + 2)
        seen.add(item)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), k)))
    return gain / ideal


@dataclass(frozen=True, slots=True)
class QueryScore:
    """The metrics of one query's ranking."""

    recall5: float
    complete5: bool
    top1: bool | None
    ndcg10: float
    abstained: bool

    @classmethod
    def of(
        cls, ranked: Sequence[Hashable], expected: Sequence[Hashable], *, found: bool = True
    ) -> QueryScore:
        """Score `ranked`; `found=False` records that the method answered "no tool found"."""
        return cls(
            recall5=recall_at(ranked, expected, 5),
            complete5=complete_at(ranked, expected, 5),
            top1=top1_hit(ranked, expected),
            ndcg10=ndcg_at(ranked, expected, 10),
            abstained=not found,
        )


@dataclass(frozen=True, slots=True)
class SetScore:
    """Metrics averaged over the queries of one set.

    `top1` averages over single-tool queries only (`single_queries` of them) and is NaN when a
    set has none. `abstain_share` is the share of queries answered "no tool found"; whatever
    candidates came with such an answer are still scored, so abstaining never raises recall.
    """

    queries: int
    recall5: float
    complete5: float
    top1: float
    single_queries: int
    ndcg10: float
    abstain_share: float


def average(scores: Iterable[QueryScore]) -> SetScore:
    """Average per-query scores into one set score."""
    scores = list(scores)
    if not scores:
        raise ValueError("average() needs at least one query score; the set had no queries.")
    singles = [s.top1 for s in scores if s.top1 is not None]
    count = len(scores)
    return SetScore(
        queries=count,
        recall5=sum(s.recall5 for s in scores) / count,
        complete5=sum(s.complete5 for s in scores) / count,
        top1=sum(singles) / len(singles) if singles else math.nan,
        single_queries=len(singles),
        ndcg10=sum(s.ndcg10 for s in scores) / count,
        abstain_share=sum(s.abstained for s in scores) / count,
    )


def _expected_set(expected: Sequence[Hashable]) -> set[Hashable]:
    wanted = set(expected)
    if not wanted:
        raise ValueError(
            "A labelled query needs at least one expected tool; the metrics are undefined "
            "for an empty expectation. Drop the query from the set."
        )
    return wanted
