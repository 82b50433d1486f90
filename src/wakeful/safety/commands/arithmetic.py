"""Text bash evaluates as arithmetic, where an array subscript is code.

In `(( … ))`, `$(( … ))`, `let`, `[[ a -eq b ]]`, `declare -i` and friends, bash evaluates
`x[SUBSCRIPT]` by expanding SUBSCRIPT, command substitutions included, and it evaluates the value
of a variable named in the expression the same way, recursively. So `x='a[$(id)]'; (( x ))` runs
`id`. A subscript written in such text, or a variable this line sets to something other than a
plain number (from input, a file name, a substitution, a string), is asked about; variables the
line does not set come from the environment the runtime gives every command.
"""

from __future__ import annotations

import re
from typing import Final

from .analysis import Analysis
from .options import operands

__all__ = ["judge_arithmetic"]

_NAME: Final = re.compile(r"(?<![A-Za-z0-9_#@])[A-Za-z_][A-Za-z0-9_]*")
_NUMBER: Final = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)$")
_SETS_NAMES: Final = frozenset({"read", "mapfile", "readarray", "getopts", "select"})


def judge_arithmetic(analysis: Analysis) -> None:
    """Ask about arithmetic that evaluates a subscript or a value the line cannot vouch for."""
    if not analysis.arithmetic:
        return
    tainted = _names_set_to_non_numbers(analysis)
    for statement, expression in analysis.arithmetic:
        if "[" in expression or "`" in expression:
            analysis.flag_line(
                statement,
                "ask",
                "evaluates an array subscript as arithmetic, which runs the command "
                "substitutions in it",
            )
            continue
        named = set(_NAME.findall(expression)) & tainted
        if named:
            analysis.flag_line(
                statement,
                "ask",
                f"evaluates {', '.join(sorted(named))} as arithmetic, a value this line sets to "
                "something other than a number, which bash may run as code",
            )


def _arithmetic_result(text: str) -> bool:
    """Whether `text` is exactly one arithmetic expansion, `$(( … ))`, whose value is a number."""
    if not (text.startswith("$((") and text.endswith("))")):
        return False
    depth = 0
    for index, char in enumerate(text[1:], start=1):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index == len(text) - 1  # the first "((" closes only at the very end
    return False


def _names_set_to_non_numbers(analysis: Analysis) -> set[str]:
    tainted = set(analysis.loop_variables)
    for command in analysis.commands:
        for name, value in command.assignments:
            if _arithmetic_result(value.text):
                continue  # `p=$((i*3))` is a number; the expression itself is judged above
            if value.value is None or not _NUMBER.match(value.value.strip()):
                tainted.add(name)
        program = command.name
        if program in _SETS_NAMES:
            tainted.update(
                w.value or ""
                for w in operands(
                    command.args, ("-d", "-n", "-N", "-p", "-t", "-u", "-C", "-c", "-O", "-s")
                )
            )
            tainted.add("REPLY")
            tainted.add("MAPFILE")
        if program == "printf":
            args = command.args
            tainted.update(
                args[i + 1].value or "" for i, w in enumerate(args[:-1]) if w.value == "-v"
            )
    return tainted
