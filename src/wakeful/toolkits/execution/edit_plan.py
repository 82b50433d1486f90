"""How an exact `old` → `new` edit applies to a file's text, and why it does not when it does
not: how many matches, and the near misses (line endings, curly quotes, pasted line numbers,
marks `read_file` shows for bytes it cannot).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import ToolError
from ..perception.shown_text import INVALID_MARK, NUL_MARK

_LISTED_MATCHES = 20
_INVALID_BYTE = re.compile("[\udc80-\udcff]")


@dataclass
class PlannedEdit:
    before: bytes
    after: bytes
    before_text: str
    after_text: str
    lines: list[int]
    notes: list[str] = field(default_factory=list)


def plan_edit(
    before: bytes, old: str, new: str, *, replace_all: bool, shown_path: str = "the file"
) -> PlannedEdit:
    """The file's bytes with `old` replaced by `new`, or ToolError saying why it cannot be.

    The bytes are decoded with `surrogateescape`, so a byte that is not UTF-8 becomes a lone
    surrogate that matches nothing a model can send and is encoded back to the same byte.
    """
    text = before.decode("utf-8", errors="surrogateescape")
    starts = _occurrences(text, old)
    if not starts:
        raise ToolError(_not_found_message(text, old, shown_path))
    lines = [text.count("\n", 0, start) + 1 for start in starts]
    if len(starts) > 1 and not replace_all:
        listed = ", ".join(str(n) for n in lines[:_LISTED_MATCHES])
        if len(lines) > _LISTED_MATCHES:
            listed += f" and {len(lines) - _LISTED_MATCHES} more"
        raise ToolError(
            f"old occurs {len(starts)} times in {shown_path} (starting on lines {listed}), and "
            "edit_file replaces exactly one unless told otherwise. Widen old with the lines "
            "around the one you mean until it is unique, or pass replace_all=true to replace "
            "every occurrence."
        )
    _refuse_added_marks(text, old, new, shown_path)
    after_text = text.replace(old, new)
    after = after_text.encode("utf-8", errors="surrogateescape")
    return PlannedEdit(before, after, text, after_text, lines, edit_notes(text, new))


def _occurrences(text: str, old: str) -> list[int]:
    """Where `old` starts in `text`, without overlaps (as `str.replace` replaces them)."""
    starts = []
    at = text.find(old)
    while at != -1:
        starts.append(at)
        at = text.find(old, at + len(old))
    return starts


def _not_found_message(text: str, old: str, shown_path: str) -> str:
    base = f"old was not found in {shown_path}, so nothing was changed."
    if NUL_MARK in old or INVALID_MARK in old:
        pattern = _marks_pattern(old)
        marked = len(pattern.findall(text))
        if marked:
            return (
                f"{base} It would match {marked} place{'' if marked == 1 else 's'} if its ␀ and "
                "� marks stood for the NUL bytes and bytes that are not UTF-8 which read_file "
                "shows that way; edit_file matches the file's real bytes and never writes those "
                "marks in their place. Choose old (and new) from text beside those bytes so it "
                "contains no ␀ or �, or rewrite the whole file with write_file and "
                "content_base64."
            )
    for hint, variant in _near_misses(old):
        if variant != old and variant in text:
            return f"{base} {hint}"
    if ("'" in old or '"' in old) and _curled_pattern(old).search(text):
        return (
            f"{base} The file has curly quotes (“ ” ‘ ’) where old has straight ones (\" '); "
            "copy the exact characters from read_file."
        )
    return (
        f"{base} It must match the file exactly, character for character. Read the part you "
        "want to change with read_file and copy old from it (without the line numbers)."
    )


def _marks_pattern(old: str) -> re.Pattern[str]:
    parts = []
    for char in old:
        if char == NUL_MARK:
            parts.append(f"(?:\x00|{NUL_MARK})")
        elif char == INVALID_MARK:
            parts.append(f"(?:[\udc80-\udcff]|{INVALID_MARK})")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts))


_STRAIGHTEN = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})
_LINE_PREFIX = re.compile(r"^ *\d+\t", re.MULTILINE)


def _near_misses(old: str) -> list[tuple[str, str]]:
    """Variants of `old` that would match, each with the hint that names the difference."""
    return [
        (
            "The file has CRLF line endings where old has LF: write each line break in old "
            "as \\r\\n (read_file shows the \\r at the end of each line).",
            re.sub(r"(?<!\r)\n", "\r\n", old),
        ),
        (
            "The file has LF line endings where old has CRLF: write each line break in old as \\n.",
            old.replace("\r\n", "\n"),
        ),
        (
            "old has curly quotes (“ ” ‘ ’) where the file has straight ones (\" '); copy the "
            "exact characters from read_file.",
            old.translate(_STRAIGHTEN),
        ),
        (
            "old includes read_file's line-number prefixes (spaces, a number and a tab); "
            "leave them out.",
            _LINE_PREFIX.sub("", old),
        ),
        (
            "old matches only without its trailing whitespace on some line; copy the lines "
            "exactly, or leave the trailing spaces out.",
            re.sub(r"[ \t]+(?=\r?\n|$)", "", old),
        ),
    ]


def _curled_pattern(old: str) -> re.Pattern[str]:
    """`old` with each straight quote standing for itself or either curly form of it."""
    curls = {'"': '["“”]', "'": "['‘’]"}
    return re.compile("".join(curls.get(char) or re.escape(char) for char in old))


def _refuse_added_marks(text: str, old: str, new: str, shown_path: str) -> None:
    """Refuse new text that brings ␀ or � marks into a file that holds the bytes they stand for."""
    for mark, held, name in (
        (NUL_MARK, "\x00" in text, "NUL bytes"),
        (INVALID_MARK, _INVALID_BYTE.search(text) is not None, "bytes that are not UTF-8"),
    ):
        if held and new.count(mark) > old.count(mark):
            raise ToolError(
                f"new contains {mark} marks that old does not, and {shown_path} holds {name}, "
                f"which read_file shows as {mark}. edit_file would write the character {mark} "
                "(U+{:04X}), not the byte it stands for, so nothing was changed. Leave the "
                "marked text out of old and new, or rewrite the file with write_file and "
                "content_base64.".format(ord(mark))
            )


# --- notes -------------------------------------------------------------------------------------


def line_ending_counts(data: str | bytes) -> tuple[int, int, int]:
    """How many CRLF, lone LF and lone CR line breaks `data` has."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="surrogateescape")
    crlf = data.count("\r\n")
    return crlf, data.count("\n") - crlf, data.count("\r") - crlf


def describe_endings(counts: tuple[int, int, int]) -> str:
    names = ("CRLF", "LF", "lone CR")
    return ", ".join(f"{n} {name}" for n, name in zip(counts, names, strict=True) if n)


def ending_style(counts: tuple[int, int, int]) -> str | None:
    """'CRLF', 'LF' or 'CR' when a text uses one kind of line break only; None otherwise."""
    used = [name for n, name in zip(counts, ("CRLF", "LF", "CR"), strict=True) if n]
    return used[0] if len(used) == 1 else None


def edit_notes(text: str, new: str) -> list[str]:
    file_style = ending_style(line_ending_counts(text))
    new_counts = line_ending_counts(new)
    new_style = ending_style(new_counts)
    if file_style is None or sum(new_counts) == 0:
        return []
    if new_style != file_style:
        names = {"CRLF": "CRLF", "LF": "LF", "CR": "lone CR"}
        used = describe_endings(new_counts)
        return [
            f"The file uses {names[file_style]} line endings and your new text has {used}: the "
            "file now has mixed line endings (written as given, not converted)."
        ]
    return []
