"""How the signals of the two levels, lexical and dense, become one score per tool.

For each signal (lexical, dense) a tool's score mixes its own similarity `t` with its server's
`s`: `(t + server_weight·s + product_weight·(s·t)·max(s, t))`, divided by the sum of the weights.
The last term is MCP-Zero's hierarchical score, which rewards agreement between the levels; the
first keeps the flat tool-level match so that a strong tool in a weakly described server still
ranks; the second lets a need phrased in a server's words ("on GitHub") lift that server's tools.
The dense mix is then blended with the lexical one by `dense_weight` (normalised-score fusion:
both are similarities on comparable [0, 1] scales, so no rank conversion is needed).

The constants were chosen on the development sets only (metatool, livemcpbench), by recall@5
and top-1. Lexical scores are BM25F normalised by the need's idf mass; their scale is low because
unmatched words of the need count against it.

The "no tool found" thresholds were calibrated on the same sets. The lexical one, 0.03, is a
floor under the evidence rule of :mod:`.judgement` (the best tool's own text must cover two of
the need's terms, light verbs such as "turn" or "set" not counted, or half their idf mass, and
words rare enough for the catalog's size), which does the real judging: the score alone (once
0.075) could not tell a tool that shares one rare word with a need from one that serves it. With
needs no tool serves, written beforehand, the rule rejects 93 % (metatool) and 88 %
(livemcpbench) of English ones and still claims a tool for 62 % and 80 % of the labelled needs,
whose paraphrases often share a single word with their tool. The dense-fused threshold, 0.14
(all-MiniLM-L6-v2), sits at the equal-error point between the top score when the top tool is
right and the top score after removing the servers of the expected tools: it keeps about 75 %
and rejects about 75-80 %. Static-fused 0.14 (static tokens of
all-MiniLM-L6-v2, dense weight 0.2) keeps 66-70 % and rejects 68 % (approximate: the servers
were masked rather than removed, so idf did not change).

`Ranking.static` asks the precise embedder for a second opinion when the two best scores are
within 5 % of the best: on the development sets that is 21 % (metatool) and 44 % (livemcpbench)
of needs, and 46 % at 4,076 tools, keeping the median need on the static path. A 10 % margin
ranks better (metatool recall@5 .744, top-1 .538 against .733/.519) but asks on 70 % of needs
at 4,076 tools, which puts the median over the 5 ms budget.

`Ranking.dense` is query-adaptive: lexical matching is scored first (about 1 ms at 4,076
tools) and, when it is confident, answers alone, so the need is never embedded. Confidence is
the best lexical score (BM25F normalised by the need's idf mass, mixed as in `Ranking.lexical`)
and its relative margin over the runner-up: at or above `lexical_gate` (0.12) with a margin of
at least `gate_margin` (5 %) the lexical ranking stands. On the development sets lexical top-1
is right for 68 % of needs scoring at least 0.10 and 78 % at 0.15, against 44 % overall. Under
the gate the need is embedded and fused with a dense weight that grows as lexical confidence
falls: `gate_dense_weight` (0.3) just under the gate, `dense_weight` (0.5) at a score of zero.
Chosen on metatool and livemcpbench only: metatool .762/.564 with 80 % of needs embedded,
livemcpbench .432/.250 with 81 % (the fixed weight 0.4 for every need: .773/.565 and .437/.250).
The development needs are paraphrases with little lexical overlap; where needs share the tools'
words, more of them take the fast path and the weak dense signal weighs less.

`Ranking.always_dense` (the fixed weight 0.4) serves the int8 ONNX export of all-MiniLM-L6-v2
(:mod:`.onnx_embeddings`) as well as the torch model: with it for every need, metatool
recall@5 / top-1 / nDCG@10 are .773/.565/.699 and livemcpbench .437/.250/.437 (torch:
.774/.564/.698 and .441/.250/.442), at 3.5-4 ms per need embedding instead of ~17 ms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

__all__ = ["Ranking", "dense_levels", "fuse", "levels"]

_FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Ranking:
    """The fusion constants and the "no tool found" threshold of one kind of index."""

    server_weight: float
    product_weight: float
    dense_weight: float
    threshold: float
    # With a precise embedder (see `ToolIndex`): the relative gap between the two best scores
    # under which the ranking counts as ambiguous and the precise embedder re-scores it, and
    # the dense weight of that second opinion.
    second_opinion_margin: float = 0.0
    precise_dense_weight: float = 0.4
    # Query-adaptive fusion (see the module docs); a gate of 0 embeds every need. At or above the
    # gate, with the relative `gate_margin` over the runner-up, the lexical ranking (mixed as in
    # `lexical()`, judged by its threshold) answers alone. Under it the dense weight runs from
    # `gate_dense_weight` at the gate up to `dense_weight` at a lexical score of zero.
    lexical_gate: float = 0.0
    gate_margin: float = 0.0
    gate_dense_weight: float = 0.0

    @classmethod
    def lexical(cls) -> Ranking:
        return cls(server_weight=0.3, product_weight=0.5, dense_weight=0.0, threshold=0.03)

    @classmethod
    def dense(cls) -> Ranking:
        """Dense-fused only where lexical matching is unsure (the default with an embedder)."""
        return cls(
            server_weight=0.5,
            product_weight=0.5,
            dense_weight=0.5,
            threshold=0.14,
            lexical_gate=0.12,
            gate_margin=0.05,
            gate_dense_weight=0.3,
        )

    @classmethod
    def always_dense(cls) -> Ranking:
        """Every need embedded and fused with the fixed dense weight 0.4."""
        return cls(server_weight=0.5, product_weight=0.5, dense_weight=0.4, threshold=0.14)

    @classmethod
    def static(cls) -> Ranking:
        """Static token embeddings fused in, with the full model's second opinion when close."""
        return cls(
            server_weight=0.5,
            product_weight=0.5,
            dense_weight=0.2,
            threshold=0.14,
            second_opinion_margin=0.05,
            precise_dense_weight=0.4,
        )

    def precise(self) -> Ranking:
        """The constants of the second opinion: the same mix with the precise dense weight."""
        return replace(self, dense_weight=self.precise_dense_weight, second_opinion_margin=0.0)

    def confident(self, lexical: _FloatArray) -> bool:
        """Whether the lexical scores `lexical` (mixed as in `lexical()`) may answer alone."""
        if self.lexical_gate <= 0.0 or len(lexical) == 0:
            return False
        first, second = (-np.partition(-lexical, 1)[:2]) if len(lexical) > 1 else (lexical[0], 0.0)
        if first < self.lexical_gate:
            return False
        return bool((first - second) / first >= self.gate_margin)

    def unsure(self, lexical: _FloatArray) -> Ranking:
        """The constants for a need whose lexical scores are not confident: the dense weight
        grows linearly from `gate_dense_weight` at the gate to `dense_weight` at zero."""
        if self.lexical_gate <= 0.0:
            return self
        best = float(lexical.max()) if len(lexical) else 0.0
        doubt = min(max(1.0 - best / self.lexical_gate, 0.0), 1.0)
        weight = self.gate_dense_weight + (self.dense_weight - self.gate_dense_weight) * doubt
        return replace(self, dense_weight=weight)


def levels(tool: _FloatArray, server: _FloatArray, ranking: Ranking) -> _FloatArray:
    """A tool's own similarity mixed with its server's, as the module docs describe."""
    mixed = (
        tool
        + ranking.server_weight * server
        + ranking.product_weight * (server * tool) * np.maximum(server, tool)
    )
    return mixed / (1.0 + ranking.server_weight + ranking.product_weight)


def dense_levels(tool: _FloatArray, server: _FloatArray, ranking: Ranking) -> _FloatArray:
    """:func:`levels` of cosine similarities, clipped to [0, 1] first (a negative cosine says
    no more than an unrelated text)."""
    return levels(
        np.clip(tool.astype(np.float64), 0.0, 1.0),
        np.clip(server.astype(np.float64), 0.0, 1.0),
        ranking,
    )


def fuse(
    ranking: Ranking,
    *,
    tool_lexical: _FloatArray,
    server_lexical: _FloatArray,
    tool_dense: _FloatArray | None = None,
    server_dense: _FloatArray | None = None,
) -> _FloatArray:
    """One score per tool slot from the per-slot similarities of each level and signal."""
    lexical = levels(tool_lexical, server_lexical, ranking)
    if tool_dense is None or server_dense is None or ranking.dense_weight == 0.0:
        return lexical
    dense = dense_levels(tool_dense, server_dense, ranking)
    return (1.0 - ranking.dense_weight) * lexical + ranking.dense_weight * dense
