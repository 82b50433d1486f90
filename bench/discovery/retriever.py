"""What every method of the benchmark offers: a name and `search(query, k) -> Ranking`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from toolsets import ToolKey


@dataclass(frozen=True, slots=True)
class Ranking:
    """Tools for one query, best first, and whether the method claims it found one.

    The baselines always claim a find when they return anything; ours may answer "no tool
    found", which the benchmark reports as an abstention rather than hiding it.
    """

    keys: tuple[ToolKey, ...]
    found: bool


class Retriever(Protocol):
    name: str

    def search(self, query: str, k: int) -> Ranking: ...
