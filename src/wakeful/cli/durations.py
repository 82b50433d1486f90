"""Durations on the command line, as `wakeful audit --since` and `wakeful workers --older-than`
take them: a number and a unit, `90s`, `30m`, `24h`, `7d`, `2w`."""

from __future__ import annotations

import re
from typing import Final

import typer

__all__ = ["DURATION_EXAMPLES", "duration_seconds", "parse_duration"]

_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

DURATION_EXAMPLES: Final = "30m, 24h, 7d or 2w"
"""How the messages about a bad duration show good ones."""


def duration_seconds(text: str) -> float | None:
    """The seconds `text` names, or None when it is not a duration."""
    found = _DURATION.match(text)
    if found is None:
        return None
    return float(found.group(1)) * _UNIT_SECONDS[found.group(2)]


def parse_duration(text: str, *, option: str) -> float:
    """The seconds `text` names; a usage error (exit 2) naming `option` and good values when it
    names none."""
    seconds = duration_seconds(text)
    if seconds is None:
        raise typer.BadParameter(
            f"{text!r} is not a duration. Give a number and a unit (s, m, h, d, w), such as "
            f"{DURATION_EXAMPLES}.",
            param_hint=option,
        )
    return seconds
