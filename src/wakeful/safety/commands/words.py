"""The static value of one shell word: what bash would pass after brace expansion, tilde
expansion and quote removal, or "unknown".

A word whose value depends on the running shell (a variable, a command or process substitution,
arithmetic, `~user`) has no static value; the policy must then ask instead of guessing. Quoting
is removed exactly as bash does (`r''m`, `\\rm` and `"rm"` are all `rm`), so quoting cannot hide a
command name. Brace expansion turns one written word into several (`{rm,-rf,/}` is three words),
as in bash. An unquoted glob character is marked with its position, because the word then names
every path it matches; quoted ones (and the home directory placeholder) are not patterns.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from tree_sitter import Node

__all__ = ["HOME_MARK", "PWD_MARK", "Word", "word_of", "words_of"]

HOME_MARK: Final = "\x00HOME\x00"
"""Stands for the home directory in a value; NUL never occurs in a checked line."""
PWD_MARK: Final = "\x00PWD\x00"
"""Stands for the current directory in a value."""

_GLOB_CHARS: Final = frozenset("*?[")
_KNOWN_VARIABLES: Final = {"HOME": HOME_MARK, "PWD": PWD_MARK}
_MAX_EXPANSIONS: Final = 64
_ASSIGNMENT_LIKE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_SEQUENCE: Final = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")
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

# A value under construction: its characters and, for each, whether it was unquoted.
_Chars = tuple[str, tuple[bool, ...]]


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: `text` as written, `value` after expansion and quote removal (None when
    only the running shell knows it), and whether an unquoted glob makes it name several paths
    (`glob_at`: where in `value` the pattern starts; -1 when unknown or none).

    Only `$HOME`, `$PWD`, `~` and `~+` keep a word static: `value` then holds :data:`HOME_MARK`
    or :data:`PWD_MARK`, which the policy resolves to the paths of the check."""

    text: str
    value: str | None
    glob: bool = False
    glob_at: int = -1

    @property
    def static(self) -> bool:
        return self.value is not None


def words_of(node: Node) -> list[Word]:
    """The words a tree-sitter-bash argument node stands for, brace expansion applied."""
    text = _text(node)
    parts = _value_parts(node)
    if parts is None:
        return [Word(text, None)]
    expanded = _expand_braces(_chars_of(parts))
    if expanded is None:
        return [Word(text, None)]
    return [_finish(text, chars) for chars in expanded]


def word_of(node: Node) -> Word:
    """The one word a node stands for (a redirection target, an assignment's value); a brace
    pattern that expands to several words is unknown, as bash refuses it ("ambiguous")."""
    found = words_of(node)
    return found[0] if len(found) == 1 else Word(_text(node), None)


def _finish(text: str, chars: _Chars) -> Word:
    tilded = _expand_tilde(chars)
    if tilded is None:
        return Word(text, None)
    value, unquoted = tilded
    glob_at = next(
        (
            i
            for i, (c, free) in enumerate(zip(value, unquoted, strict=True))
            if free and c in _GLOB_CHARS
        ),
        -1,
    )
    return Word(text, value, glob_at >= 0, glob_at)


_SOURCE: ContextVar[bytes | None] = ContextVar("wakeful_bash_source", default=None)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def parser_input(line: str) -> bytes:
    """What tree-sitter-bash is given for `line`: every non-ASCII character replaced by as many
    ASCII letters as its UTF-8 encoding has bytes, so every node keeps its byte offsets.

    tree-sitter-bash's scanner passes the lookahead code point to `isalpha()`/`isdigit()`,
    which are defined only up to 255: a code point past that reads beyond the C library's table
    and can crash the process (seen with `{` followed by U+10FFFF). For bash a non-ASCII
    character is an ordinary word character, as a letter is, so the parse is the same; the
    text of every node is read from the line itself (see :func:`node_text`).
    """
    if line.isascii():
        return line.encode("utf-8")
    return _NON_ASCII.sub(lambda m: "a" * len(m.group().encode("utf-8")), line).encode("ascii")


@contextmanager
def reading(source: bytes) -> Iterator[None]:
    """Node texts come from `source` (the line's own bytes) while the tree is walked."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)


def node_text(node: Node) -> str:
    """The node's text in the line as written (see :func:`parser_input`)."""
    source = _SOURCE.get()
    raw = source[node.start_byte : node.end_byte] if source is not None else node.text
    return raw.decode("utf-8", "replace") if raw is not None else ""


def _text(node: Node) -> str:
    return node_text(node)


def _chars_of(parts: list[tuple[str, bool]]) -> _Chars:
    value = "".join(piece for piece, _ in parts)
    flags = tuple(free for piece, free in parts for _ in piece)
    return value, flags


def _value_parts(node: Node) -> list[tuple[str, bool]] | None:
    """The pieces of a word's value, each with whether it was unquoted; None when dynamic."""
    kind = node.type
    if kind == "word":
        return _word_parts(_text(node))
    if kind in ("number", "file_descriptor", "brace_expression"):
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
        mark = _KNOWN_VARIABLES.get(_expansion_variable(node))
        return [(mark, False)] if mark is not None else None
    # command_substitution, process_substitution, arithmetic_expansion, a lone `$`, and any node
    # type this module does not know: only the running shell can tell.
    return None


def _word_parts(text: str) -> list[tuple[str, bool]]:
    """An unquoted word: backslash-escaped characters are quoted, the rest free."""
    parts: list[tuple[str, bool]] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                parts.append((text[i + 1], False))
            i += 2
            continue
        parts.append((char, True))
        i += 1
    return parts


def _string_parts(node: Node) -> list[tuple[str, bool]] | None:
    parts: list[tuple[str, bool]] = []
    for child in node.children:
        if child.type in ('"', '$"'):
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
    named = list(node.named_children)
    if len(named) == 1 and named[0].type in ("variable_name", "special_variable_name"):
        has_operator = any(not c.is_named and c.type not in ("$", "${", "}") for c in node.children)
        return "" if has_operator else _text(named[0])
    return ""


def _expand_braces(chars: _Chars) -> list[_Chars] | None:
    """Bash's brace expansion over the unquoted braces; None past the expansion limit."""
    done: list[_Chars] = []
    pending = [chars]
    while pending:
        current = pending.pop(0)
        alternatives = _first_brace(current)
        if alternatives is None:
            done.append(current)
        else:
            pending[0:0] = alternatives
        if len(done) + len(pending) > _MAX_EXPANSIONS:
            return None
    return done


def _first_brace(chars: _Chars) -> list[_Chars] | None:
    value, free = chars
    for start, char in enumerate(value):
        if (
            char != "{"
            or not free[start]
            or (start > 0 and value[start - 1] == "$" and free[start - 1])
        ):
            continue
        depth = 0
        commas: list[int] = []
        for end in range(start, len(value)):
            if not free[end]:
                continue
            if value[end] == "{":
                depth += 1
            elif value[end] == "}":
                depth -= 1
                if depth == 0:
                    break
            elif value[end] == "," and depth == 1:
                commas.append(end)
        else:
            return None
        head = (value[:start], free[:start])
        tail = (value[end + 1 :], free[end + 1 :])
        if commas:
            bounds = [start, *commas, end]
            pieces = [(value[a + 1 : b], free[a + 1 : b]) for a, b in itertools.pairwise(bounds)]
        else:
            inner = value[start + 1 : end]
            if not all(free[start + 1 : end]):
                continue
            sequence = _sequence(inner)
            if sequence is None:
                continue
            pieces = [(item, (True,) * len(item)) for item in sequence]
        return [(head[0] + p[0] + tail[0], head[1] + p[1] + tail[1]) for p in pieces]
    return None


def _sequence(inner: str) -> list[str] | None:
    match = _SEQUENCE.match(inner)
    if match is None:
        return None
    first, last, step_text = match.group(1), match.group(2), match.group(3)
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        if abs(b - a) // step > _MAX_EXPANSIONS:
            return [str(a)] * (_MAX_EXPANSIONS + 1)
        direction = 1 if b >= a else -1
        return [str(x) for x in range(a, b + direction, step * direction)]
    if len(first) == 1 and len(last) == 1 and first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
        direction = 1 if b >= a else -1
        return [chr(x) for x in range(a, b + direction, step * direction)]
    return None


def _expand_tilde(chars: _Chars) -> _Chars | None:
    """Tilde expansion at the start of the word and, in `NAME=value` words, after the `=` and
    each unquoted `:`; None when a tilde names something only the running shell knows."""
    value, free = chars
    starts = [0]
    assignment = _ASSIGNMENT_LIKE.match(value)
    if assignment is not None and all(free[: assignment.end()]):
        starts = [assignment.end()]
        starts += [
            i + 1 for i in range(assignment.end(), len(value)) if value[i] == ":" and free[i]
        ]
    out_value: list[str] = []
    out_free: list[bool] = []
    position = 0
    for start in starts:
        if start >= len(value) or value[start] != "~" or not free[start]:
            continue
        stop = start + 1
        while stop < len(value) and value[stop] != "/" and not (assignment and value[stop] == ":"):
            stop += 1
        if not all(free[start:stop]):
            continue
        prefix = value[start + 1 : stop]
        if prefix == "":
            mark = HOME_MARK
        elif prefix == "+":
            mark = PWD_MARK
        else:
            return None  # `~user`, `~-`, `~N`: another user's home, OLDPWD, the directory stack
        out_value.append(value[position:start])
        out_free.extend(free[position:start])
        out_value.append(mark)
        out_free.extend([False] * len(mark))
        position = stop
    out_value.append(value[position:])
    out_free.extend(free[position:])
    return "".join(out_value), tuple(out_free)


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
        if head in "xuU" or head in "01234567":
            code = int(escape[1:], 16) if head in "xuU" else int(escape, 8)
            if code == 0:
                return "\x00"  # bash ends the string at a NUL; cut below
            return chr(code) if code < 0x110000 and not 0xD800 <= code < 0xE000 else "\ufffd"
        if head == "c":
            return chr(ord(escape[1]) & 0x1F)
        return _ANSI_C_SIMPLE.get(head, "\\" + escape)

    return _ANSI_C_ESCAPE.sub(replace, body).split("\x00", 1)[0]
