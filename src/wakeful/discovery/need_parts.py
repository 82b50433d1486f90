"""Splitting a long need into the requests it makes, so that each finds its own tool.

An agent often asks for several things at once: "Get the battery level of vehicle hXQ7, and
calculate the drag of a car at 20 m/s." Scored as one text, every tool matches a fraction of the
need, and one sentence embedding averages the requests into none of them. Scored part by part,
each request ranks its tool as if asked alone (:mod:`.hybrid` takes, per tool, its best part).

Parts are sentences (also Chinese full stops and semicolons) and clauses joined by a
connective: "and then", "also", "additionally", "as well as", "plus", ", and", "and" before an
action verb, and 然后 / 并且 / 同时 / 另外 / 此外 / 接着 / 还要. A fragment of fewer than three
words ("Can you?") joins its neighbour, since alone it names no tool.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["need_parts"]

_SENTENCE: Final = re.compile(r"(?<=[.!?;])\s+|\n+|(?<=[。！？；])")
_ACTION_VERBS: Final = (
    "get|find|fetch|provide|retrieve|calculate|check|search|show|give|tell|list|create|send|"
    "convert|translate|analy[sz]e|generate|compute|look|download|book|update|delete|add|set|"
    "make|write|read|open|run|schedule|summari[sz]e"
)
_CONNECTIVE: Final = re.compile(
    r",?\s+(?:and then|and also|additionally|also|then|as well as|plus|after that|afterwards)\s+"
    r"|,\s*and\s+"
    rf"|\s+and\s+(?=(?:please\s+)?(?:{_ACTION_VERBS})\b)"
    r"|然后|并且|同时|另外|此外|接着|还要",
    re.IGNORECASE,
)
_CJK: Final = re.compile(r"[\u3400-\u9fff]")
_MIN_WORDS: Final = 3


def need_parts(need: str) -> tuple[str, ...]:
    """The requests of `need` in order; one part (the need itself, stripped) when it makes one."""
    pieces = [
        clause.strip()
        for sentence in _SENTENCE.split(need)
        if sentence and sentence.strip()
        for clause in _CONNECTIVE.split(sentence)
        if clause and clause.strip()
    ]
    parts: list[str] = []
    for piece in pieces:
        if parts and _words(piece) < _MIN_WORDS:
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    if len(parts) > 1 and _words(parts[0]) < _MIN_WORDS:
        parts[1] = f"{parts[0]} {parts[1]}"
        del parts[0]
    return tuple(parts) if parts else (need.strip(),)


def _words(text: str) -> int:
    """Whitespace words, counting two Chinese characters as a word."""
    return max(len(text.split()), len(_CJK.findall(text)) // 2)
