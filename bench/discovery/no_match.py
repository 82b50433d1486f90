"""How often ours says "no tool found" when it should, and claims a tool when it should.

Each catalog has needs no tool of it serves (`needs/<catalog>_no_match.jsonl`, English and
Chinese, written from the catalog's topics before any score was seen; see needs/README.md).
The no-match rate is the share of them answered `found == false`; the match rate is the share
of the catalog's labelled needs (its queries, plus `needs/<catalog>_match_zh.jsonl` where the
queries lack Chinese) answered `found == true`. Both are split by language. `match_right`
counts the labelled needs answered `found == true` with one of their expected tools first: a
labelled need refused is often one the ranking would have answered wrongly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retriever import Retriever
from toolsets import LabelledQuery, ToolSet

from report import Table

NEEDS = Path(__file__).resolve().parent / "needs"
LANGUAGES = ("en", "zh")
# The two seal_tools sets share one catalog, so one set of needs serves both.
_NEEDS_OF_SET = {
    "seal_tools_test_in_domain": "seal_tools",
    "seal_tools_test_out_domain": "seal_tools",
}
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class Need:
    """A need in words, its language, and whether some tool of the catalog serves it."""

    text: str
    lang: str
    served: bool
    expected: frozenset[tuple[str, str]] = frozenset()


@dataclass
class NoMatchResult:
    """One method on one set: per language, (needs judged right, needs), for each side."""

    set_name: str
    method: str
    no_match: dict[str, tuple[int, int]]
    match: dict[str, tuple[int, int]]
    match_right: dict[str, tuple[int, int]] = field(default_factory=dict)


def language(text: str) -> str:
    """The language of `text`: "zh" when it is mostly Chinese (more words' worth of Han
    characters, two to a word, than Latin words), else "en"."""
    return "zh" if len(_HAN.findall(text)) / 2 > len(_LATIN_WORD.findall(text)) else "en"


def needs_of(toolset: ToolSet, labelled: Sequence[LabelledQuery]) -> list[Need]:
    """The set's no-match needs, then its labelled needs (`labelled`, plus the extra Chinese
    ones of its catalog)."""
    stem = _NEEDS_OF_SET.get(toolset.name, toolset.name)
    needs = [
        Need(entry["query"], entry["lang"], served=False)
        for entry in _read(NEEDS / f"{stem}_no_match.jsonl")
    ]
    needs.extend(
        Need(query.text, language(query.text), served=True, expected=frozenset(query.expected))
        for query in labelled
    )
    needs.extend(
        Need(
            entry["query"],
            entry["lang"],
            served=True,
            expected=frozenset((tool["server"], tool["tool"]) for tool in entry["expected"]),
        )
        for entry in _read(NEEDS / f"{stem}_match_zh.jsonl")
    )
    return needs


def measure(
    toolset: ToolSet, labelled: Sequence[LabelledQuery], retriever: Retriever, k: int
) -> NoMatchResult:
    """Ask `retriever` every need of `needs_of` and count the right verdicts."""
    no_match: dict[str, list[int]] = {}
    match: dict[str, list[int]] = {}
    match_right: dict[str, list[int]] = {}
    for need in needs_of(toolset, labelled):
        ranking = retriever.search(need.text, k)
        found = ranking.found
        tally = (match if need.served else no_match).setdefault(need.lang, [0, 0])
        tally[0] += int(found == need.served)
        tally[1] += 1
        if need.served:
            first = ranking.keys[0] if ranking.keys else None
            right = match_right.setdefault(need.lang, [0, 0])
            right[0] += int(bool(found) and first in need.expected)
            right[1] += 1
    return NoMatchResult(
        set_name=toolset.name,
        method=retriever.name,
        no_match={lang: (right, total) for lang, (right, total) in no_match.items()},
        match={lang: (right, total) for lang, (right, total) in match.items()},
        match_right={lang: (right, total) for lang, (right, total) in match_right.items()},
    )


def print_no_match(results: Sequence[NoMatchResult], *, right: bool = False) -> None:
    """The table of no-match and match rates, per set, method and language; with `right`, also
    the share of labelled needs found with an expected tool first."""
    print('"No tool found": no-match = share of needs no tool serves answered found=false;')
    print("match = share of labelled needs answered found=true (n in brackets)")
    if right:
        print(
            "match right = share of labelled needs answered found=true with an expected tool first"
        )
    columns = ["set", "method", *(f"no-match {lang}" for lang in LANGUAGES)]
    columns += [f"match {lang}" for lang in LANGUAGES]
    if right:
        columns += [f"match right {lang}" for lang in LANGUAGES]
    table = Table(columns)
    for r in results:
        cells = [
            *(_rate(r.no_match.get(lang)) for lang in LANGUAGES),
            *(_rate(r.match.get(lang)) for lang in LANGUAGES),
        ]
        if right:
            cells += [_rate(r.match_right.get(lang)) for lang in LANGUAGES]
        table.add(r.set_name, r.method, *cells)
    table.print()


def _rate(tally: tuple[int, int] | None) -> str:
    if not tally or tally[1] == 0:
        return "n/a"
    right, total = tally
    return f"{right / total:.1%} ({total})"


def _read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
