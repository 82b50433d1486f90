"""A fielded BM25 (BM25F) index whose documents can be added and removed one at a time.

Discovery must take in one server's changed tools without rebuilding the whole index, so nothing
here is precomputed over the collection: document frequencies are the sizes of live posting
maps, average field lengths are running totals, and the per-term numpy arrays that make a query
fast are rebuilt lazily, only for the terms a change touched.

Scores are normalised by the query's own ceiling (the sum of its terms' idf, which a document
could only reach by saturating every term), so they lie in [0, 1] and mean "how much of the need,
weighted by rarity, this document covers" whatever the catalog size: that is what lets one
calibrated threshold say "no tool found".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["FieldedBM25"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_INITIAL_SLOTS: Final = 64


@dataclass
class _Postings:
    """The documents holding one term: per-field counts by slot, and their array form."""

    counts: dict[int, tuple[float, ...]]
    slots: IntArray | None = None
    frequencies: FloatArray | None = None
    # What the term adds to each of `slots`, valid while the index is at `generation`.
    contribution: FloatArray | None = None
    generation: int = -1

    def arrays(self, fields: int) -> tuple[IntArray, FloatArray]:
        if self.slots is None or self.frequencies is None:
            self.slots = np.fromiter(self.counts.keys(), dtype=np.int64, count=len(self.counts))
            self.frequencies = np.array(list(self.counts.values()), dtype=np.float64).reshape(
                len(self.counts), fields
            )
        return self.slots, self.frequencies


class FieldedBM25:
    """BM25F over documents made of named, weighted fields of terms.

    Documents are identified by any hashable key and stored in integer slots, so that scores
    come back as one array; freed slots are reused. `k1` and `b` are the usual BM25 constants
    (`b` applied per field).
    """

    def __init__(self, weights: Sequence[float], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.k1 = k1
        self.b = b
        fields = len(self.weights)
        self._postings: dict[str, _Postings] = {}
        self._slot_of: dict[Hashable, int] = {}
        self._key_of: dict[int, Hashable] = {}
        self._free: list[int] = []
        self._terms_of: dict[int, tuple[str, ...]] = {}
        self._lengths = np.zeros((_INITIAL_SLOTS, fields), dtype=np.float64)
        self._total_lengths = np.zeros(fields, dtype=np.float64)
        # Bumped by every change: a term's contribution depends on the average lengths and
        # the document count, so the cached contributions hold only within one generation.
        self._generation = 0

    def __len__(self) -> int:
        return len(self._slot_of)

    @property
    def capacity(self) -> int:
        """How many slots score arrays have (live documents plus free slots)."""
        return int(self._lengths.shape[0])

    def slot(self, key: Hashable) -> int | None:
        return self._slot_of.get(key)

    def key(self, slot: int) -> Hashable:
        return self._key_of[slot]

    def add(self, key: Hashable, fields: Sequence[Sequence[str]]) -> int:
        """Index a document (replacing one of the same key) and return its slot."""
        if len(fields) != len(self.weights):
            raise ValueError(f"expected {len(self.weights)} fields, got {len(fields)}")
        self.remove(key)
        self._generation += 1
        slot = self._free.pop() if self._free else len(self._slot_of)
        if slot >= self.capacity:
            grown = np.zeros((self.capacity * 2, len(self.weights)), dtype=np.float64)
            grown[: self.capacity] = self._lengths
            self._lengths = grown
        self._slot_of[key] = slot
        self._key_of[slot] = key
        per_field = [Counter(terms) for terms in fields]
        vocabulary = set().union(*per_field)
        for term in vocabulary:
            postings = self._postings.setdefault(term, _Postings({}))
            postings.counts[slot] = tuple(float(counts[term]) for counts in per_field)
            postings.slots = postings.frequencies = postings.contribution = None
        self._terms_of[slot] = tuple(vocabulary)
        lengths = np.array([len(terms) for terms in fields], dtype=np.float64)
        self._lengths[slot] = lengths
        self._total_lengths += lengths
        return slot

    def remove(self, key: Hashable) -> bool:
        """Forget a document; False when there was none under `key`."""
        slot = self._slot_of.pop(key, None)
        if slot is None:
            return False
        self._generation += 1
        del self._key_of[slot]
        for term in self._terms_of.pop(slot):
            postings = self._postings[term]
            del postings.counts[slot]
            if postings.counts:
                postings.slots = postings.frequencies = postings.contribution = None
            else:
                del self._postings[term]
        self._total_lengths -= self._lengths[slot]
        self._lengths[slot] = 0.0
        self._free.append(slot)
        return True

    def idf(self, term: str) -> float:
        """Robertson–Spärck Jones idf, floored at zero by the +1 inside the log (Lucene's form).

        A term no document holds gets the idf of a term in none of them: the rarest possible,
        so an unmatched word of the need weighs fully in the normalising ceiling.
        """
        documents = len(self._slot_of)
        postings = self._postings.get(term)
        frequency = len(postings.counts) if postings else 0
        return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))

    def scores(self, terms: Sequence[str]) -> FloatArray:
        """Normalised BM25F scores in [0, 1] of every slot for a query of `terms`.

        A repeated query term counts once: needs are short and repetition there is emphasis by
        accident rather than by design.
        """
        return self.scores_of_parts([terms])[0]

    def scores_of_parts(self, parts: Sequence[Sequence[str]]) -> list[FloatArray]:
        """The scores of several queries at once, each as :meth:`scores` gives them.

        The parts of one need share most terms with the whole need, so each term's
        contribution is computed once and added to every part that holds it.
        """
        results = [np.zeros(self.capacity, dtype=np.float64) for _ in parts]
        if not self._slot_of:
            return results
        averages = self._total_lengths / len(self._slot_of)
        averages[averages == 0.0] = 1.0
        contributions: dict[str, tuple[float, tuple[IntArray, FloatArray] | None]] = {}
        for scores, terms in zip(results, parts, strict=True):
            ceiling = 0.0
            for term in dict.fromkeys(terms):
                known = contributions.get(term)
                if known is None:
                    known = contributions[term] = self._contribution(term, averages)
                idf, contribution = known
                ceiling += idf
                if contribution is not None:
                    slots, values = contribution
                    scores[slots] += values
            if ceiling > 0.0:
                scores /= ceiling
        return results

    def coverage(
        self,
        terms: Sequence[str],
        slot: int,
        fields: Sequence[int],
        *,
        weak: AbstractSet[str] = frozenset(),
    ) -> tuple[int, float]:
        """How many distinct `terms` the document in `slot` holds in any of `fields` (indices
        into the field weights), and their share of the terms' idf mass. A `weak` term weighs
        in the mass but never counts as held.

        This is the evidence under a score: BM25F saturates, so one rare word matched many
        times can score as high as several words matched once; coverage tells them apart.
        """
        covered = 0
        covered_idf = 0.0
        total_idf = 0.0
        for term in dict.fromkeys(terms):
            idf = self.idf(term)
            total_idf += idf
            if term in weak:
                continue
            postings = self._postings.get(term)
            counts = postings.counts.get(slot) if postings is not None else None
            if counts is not None and any(counts[field] > 0.0 for field in fields):
                covered += 1
                covered_idf += idf
        return covered, (covered_idf / total_idf if total_idf > 0.0 else 0.0)

    def _contribution(
        self, term: str, averages: FloatArray
    ) -> tuple[float, tuple[IntArray, FloatArray] | None]:
        """A query term's idf, and what it adds to the score of each slot holding it."""
        idf = self.idf(term)
        postings = self._postings.get(term)
        if postings is None or idf == 0.0:
            return idf, None
        slots, frequencies = postings.arrays(len(self.weights))
        if postings.contribution is None or postings.generation != self._generation:
            norms = 1.0 - self.b + self.b * self._lengths[slots] / averages
            weighted = (frequencies / norms) @ self.weights
            postings.contribution = idf * weighted / (self.k1 + weighted)
            postings.generation = self._generation
        return idf, (slots, postings.contribution)
