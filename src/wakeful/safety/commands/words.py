"""The static value of one shell word: what bash would pass after quote removal, or "unknown".

A word whose value depends on the running shell (a variable, a command or process substitution,
arithmetic) has no static value; the policy must then ask instead of guessing. Quoting is
removed exactly as bash does (`r''m`, `\\rm` and `"rm"` are all `rm`), so quoting cannot hide a
command name. An unquoted glob or brace pattern is marked, because it names more than one path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from tree_sitter import Node

__all__ = ["Word", "word_of"]

_GLOB_CHARS: Final = frozenset("*?[{")
# Variables whose value is the same for the whole check, so a path built on them stays static.
_KNOWN_VARIABLES: Final = frozenset({"HOME", "PWD"})
_ANSI_C_ESCAPE: Final = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)
_ANSI_C_SIMPLE: Final = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_DOUBLE_QUOTE_ESCAPES: Final = frozenset('$`"\\\n')


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: `text` as written, `value` after quote removal (None when only the running
    shell knows it), and whether an unquoted glob or brace pattern makes it name several paths.

    Only `$HOME`, `$PWD` and a leading `~` keep a word static: `value` then holds a `${HOME}` or
    `${PWD}` placeholder that the policy resolves to the paths of the check."""

    text: str
    value: str | None
    glob: bool = False

    @property
    def static(self) -> bool:
        return self.value is not None


def word_of(node: Node) -> Word:
    """The word a tree-sitter-bash argument node stands for."""
    text = _text(node)
    parts = _value_parts(node)
    if parts is None:
        return Word(text, None)
    value = "".join(piece for piece, _ in parts)
    glob = any(unquoted and any(c in _GLOB_CHARS for c in piece) for piece, unquoted in parts)
    return Word(text, value, glob)


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "replace") if raw is not None else ""


def _value_parts(node: Node) -> list[tuple[str, bool]] | None:
    """The pieces of a word's value, each with whether it was unquoted; None when dynamic."""
    kind = node.type
    if kind == "word":
        text = _text(node)
        home, rest = _split_tilde(text)
        if home:
            return [(home, False), (_unescape(rest), True)]
        return [(_unescape(text), True)]
    if kind in ("number", "file_descriptor"):
        return [(_text(node), True)]
    if kind == "raw_string":
        return [(_text(node)[1:-1], False)]
    if kind == "ansi_c_string":
        return [(_decode_ansi_c(_text(node)[2:-1]), False)]
    if kind in ("string", "translated_string"):
        return _string_parts(node)
    if kind == "concatenation":
        parts: list[tuple[str, bool]] = []
        for child in node.children:
            child_parts = _value_parts(child)
            if child_parts is None:
                return None
            parts.extend(child_parts)
        return parts
    if kind in ("simple_expansion", "expansion"):
        name = _expansion_variable(node)
        return [(f"${{{name}}}", False)] if name in _KNOWN_VARIABLES else None
    # command_substitution, process_substitution, arithmetic_expansion, a lone `$`, and any node
    # type this module does not know: only the running shell can tell.
    return None


def _string_parts(node: Node) -> list[tuple[str, bool]] | None:
    parts: list[tuple[str, bool]] = []
    for child in node.children:
        if child.type == '"':
            continue
        if child.type == "string_content":
            parts.append((_unescape(_text(child), _DOUBLE_QUOTE_ESCAPES), False))
            continue
        child_parts = _value_parts(child)
        if child_parts is None:
            return None
        parts.extend((piece, False) for piece, _ in child_parts)
    return parts


def _expansion_variable(node: Node) -> str:
    """The variable name of `$NAME` or `${NAME}`; "" for anything fancier (`${x:-y}`, `${#x}`)."""
    named = [c for c in node.named_children]
    if len(named) == 1 and named[0].type in ("variable_name", "special_variable_name"):
        has_operator = any(not c.is_named and c.type not in ("$", "${", "}") for c in node.children)
        return "" if has_operator else _text(named[0])
    return ""


def _split_tilde(text: str) -> tuple[str, str]:
    """A leading unquoted `~` or `~user` as the home directory it expands to, and the rest;
    the policy resolves the `${HOME}` placeholder."""
    if text == "~" or text.startswith("~/"):
        return "${HOME}", text[1:]
    if text.startswith("~") and not text.startswith(("~+", "~-")):
        user, slash, rest = text[1:].partition("/")
        return f"/home/{user}", slash + rest
    return "", text


def _unescape(text: str, escapable: frozenset[str] | None = None) -> str:
    """`text` without the backslashes that escape a character (unquoted: any; in double
    quotes: one of `escapable`); a backslash-newline, a line continuation, goes entirely."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and (escapable is None or text[i + 1] in escapable):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _decode_ansi_c(body: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escape = match.group(1)
        head = escape[0]
        if head in "xuU":
            return chr(int(escape[1:], 16))
        if head in "01234567":
            return chr(int(escape, 8))
        if head == "c":
            return chr(ord(escape[1]) & 0x1F)
        return _ANSI_C_SIMPLE.get(head, "\\" + escape)

    return _ANSI_C_ESCAPE.sub(replace, body)
