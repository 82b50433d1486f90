"""What bash does to a command line before it splits words, done the way bash does it.

tree-sitter-bash disagrees with bash on one thing that matters: a backslash-newline (a line
continuation) inside a word. bash removes the pair before it reads tokens, so `r\\<newline>m` is
the word `rm`; tree-sitter-bash takes the pair for a word separator and sees `r` and `m`. The
policy therefore parses the line with its continuations removed, as bash reads it, except where
bash keeps them: inside single quotes, inside `$'…'`, and in comments (a comment ends at the
newline even after a backslash). Text bash cannot run at all (a NUL byte, text that is not valid
Unicode) is refused before parsing.
"""

from __future__ import annotations

from typing import Final

__all__ = ["refusal", "remove_continuations"]

_WORD_BREAKS: Final = frozenset(" \t\n;&|()<>")


def refusal(line: str) -> str | None:
    """Why bash could not run `line` as it is written, or None when it could."""
    if "\x00" in line:
        return (
            "holds a NUL byte, which bash cannot pass to a command and which hides what follows "
            "it from a reader; remove it"
        )
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds an unpaired surrogate); send it as UTF-8 text"
    return None


def remove_continuations(source: str) -> str:
    """`source` without the backslash-newline pairs bash removes before splitting words."""
    if "\\\n" not in source:
        return source
    out: list[str] = []
    i = 0
    n = len(source)
    state = "plain"  # plain, single ('…'), ansi ($'…'), double ("…"), comment
    while i < n:
        char = source[i]
        if state == "single":
            out.append(char)
            if char == "'":
                state = "plain"
            i += 1
            continue
        if state == "ansi":
            out.append(char)
            if char == "\\" and i + 1 < n:
                out.append(source[i + 1])
                i += 2
                continue
            if char == "'":
                state = "plain"
            i += 1
            continue
        if state == "comment":
            out.append(char)
            if char == "\n":
                state = "plain"
            i += 1
            continue
        if char == "\\" and i + 1 < n:
            if source[i + 1] == "\n":
                i += 2  # a continuation: bash reads on as if neither character were there
                continue
            out.append(char)
            out.append(source[i + 1])
            i += 2
            continue
        if state == "double":
            if char == '"':
                state = "plain"
            out.append(char)
            i += 1
            continue
        if char == "'":
            state = "ansi" if out and out[-1] == "$" else "single"
        elif char == '"':
            state = "double"
        elif char == "#" and (not out or out[-1] in _WORD_BREAKS):
            state = "comment"
        out.append(char)
        i += 1
    return "".join(out)
