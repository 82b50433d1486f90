"""`read_file`: numbered lines of a text file under the root, a window at a time.

A read never takes more than one 64 KiB window of the file after it has found where to start, so
the cost of a read is the cost of finding its first line. From the start of the file that means
counting newlines (remembered per file, see :mod:`.line_index`); from the end (`offset` < 0) or at
a byte (`byte_offset`) it is one seek, however big the file is.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from io import BufferedReader
from typing import Annotated, Any

import anyio
from pydantic import Field

from ...errors import ToolError
from ...safety.beneath import Opened
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .line_index import SMALL_FILE_BYTES, count_lines, index_for, lines_before_end, locate_line
from .shown_text import (
    complete_utf8_prefix,
    decode_exact,
    encoded_length,
    looks_binary,
    show,
    skip_continuation_bytes,
    substitution_note,
)
from .workspace import open_workspace

WINDOW_BYTES = 64 * 1024
# Characters of file text (with line-number prefixes) in one result; the header and notes fit in
# the rest of the 10,000-character limit. 4 bytes per character at most, so a window holds it.
BODY_LIMIT = 9_000
DEFAULT_LIMIT = 200
MAX_LIMIT = 2_000
_LISTED_LINES = 5


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"path": "README.md"},
        {"path": "src/app.py", "offset": 200, "limit": 100},
        {"path": "logs/server.log", "offset": -50},
        {"path": "data/one-line.json", "byte_offset": 9000},
    ),
)
async def read_file(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The file, relative to the root (or absolute inside it), "
            "e.g. 'src/app.py'.",
        ),
    ],
    offset: Annotated[
        int,
        Field(
            ge=-1_000_000_000,
            le=1_000_000_000,
            description="Lines to skip from the start; negative counts back from the end "
            "(-50 starts 50 lines before the end), e.g. 200.",
        ),
    ] = 0,
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_LIMIT,
            description=f"Most lines to show (1-{MAX_LIMIT}); fewer come back when they "
            "would pass 10,000 characters, e.g. 100.",
        ),
    ] = DEFAULT_LIMIT,
    byte_offset: Annotated[
        int | None,
        Field(
            ge=-(1 << 62),
            le=1 << 62,
            description="Read raw text from this byte instead of by lines (negative counts from "
            "the end); for lines too long to show whole and files without line breaks. Do not "
            "combine with offset, e.g. 9000.",
        ),
    ] = None,
) -> ToolResult:
    """Show a text file under the root as numbered lines, at most 10,000 characters a call.

    Use it to read source, configuration or logs once you know the path (find it with
    find_file, or jump to a grep_file hit with offset=line-1). Start at offset=0; the result says
    which lines it shows and the offset for the next ones. Use offset=-N for the last N lines
    of a log, and byte_offset to page through a line longer than one result.

    It does not read binary files (30% or more NUL bytes or bytes that are not UTF-8 in what it
    would show is an error) and cannot read outside the root, directories (use list_dir) or
    devices.

    Result: a header such as "app.py: lines 1–200 of 5000 shown", then one line per file line:
    the 1-based line number, a tab, and the line exactly as in the file (a CR before the newline
    and every other character kept), then notes: how to continue ("pass offset=200"), and what
    was changed. Two things are changed, and the result counts them: a NUL byte is shown as
    ␀ and each byte that is not valid UTF-8 as �. A line longer than the result is cut with the
    byte_offset that continues it. For a file over 4 MiB read from its end, lines are numbered
    from the end (-1 is the last line) unless the whole file has been counted before.
    With byte_offset, the text comes without line numbers, starting at a character boundary.
    structuredContent holds the numbers (first_line, total_lines, next_offset, …).

    Cost: a few milliseconds and at most 10,000 characters. Reads from the end (offset < 0)
    and byte_offset reads of any size of file stay under 50 ms; the first read far down a file
    over 4 MiB by line offset counts its lines up to there (1-2 s per GB), later ones reuse it.
    """
    if byte_offset is not None and offset != 0:
        raise ToolError(
            f"read_file got both offset={offset} and byte_offset={byte_offset}; it reads either "
            "by lines or from a byte. Pass only one of them."
        )

    def read() -> ToolResult:
        with open_workspace(ctx) as root, root.open(path) as found:
            return _read(found, offset, limit, byte_offset)

    return await anyio.to_thread.run_sync(read)


@dataclass
class _Rows:
    """The numbered lines gathered for one result, and what was substituted in them."""

    texts: list[str] = field(default_factory=list)
    chars: int = 0
    nul_bytes: int = 0
    invalid_bytes: int = 0
    nul_lines: list[int] = field(default_factory=list)
    invalid_lines: list[int] = field(default_factory=list)

    def add(self, label: int, exact: str) -> None:
        shown = show(exact)
        text = f"{label:>6}\t{shown.text}"
        self.texts.append(text)
        self.chars += len(text) + 1
        self.nul_bytes += shown.nul_bytes
        self.invalid_bytes += shown.invalid_bytes
        if shown.nul_bytes:
            self.nul_lines.append(label)
        if shown.invalid_bytes:
            self.invalid_lines.append(label)

    def room_for(self, label: int) -> int:
        return BODY_LIMIT - self.chars - len(f"{label:>6}\t") - 1


def _read(found: Opened, offset: int, limit: int, byte_offset: int | None) -> ToolResult:
    shown_path = found.shown
    try:
        with os.fdopen(found.fd, "rb", closefd=False) as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
                raise ToolError(
                    f"{shown_path!r} is {kind}; read_file reads regular files only. Use "
                    "list_dir to see what a directory holds."
                )
            size = info.st_size
            if size == 0:
                return ToolResult(
                    f"{shown_path} is empty (0 bytes); there are no lines to show.",
                    structured=_structured(shown_path, size, total_lines=0),
                )
            if byte_offset is not None:
                return _read_bytes(file, shown_path, size, byte_offset)
            return _read_lines(file, shown_path, size, offset, limit)
    except IsADirectoryError as exc:
        raise ToolError(
            f"{shown_path!r} is a directory; read_file reads files. Use list_dir to see what "
            "it holds."
        ) from exc
    except PermissionError as exc:
        raise ToolError(
            f"{shown_path!r} cannot be read: permission denied. Read another file."
        ) from exc


def _read_lines(
    file: BufferedReader, shown_path: str, size: int, offset: int, limit: int
) -> ToolResult:
    index = index_for(file)
    total = index.total_lines
    if total is None and size <= SMALL_FILE_BYTES:
        total = count_lines(file, index)
    from_end = False
    if offset < 0 and total is None:
        start, counted = lines_before_end(file, size, -offset)
        if counted is None:
            from_end = True
            first = offset  # lines are labelled -N … -1
        else:
            total = counted
            first = max(0, counted + offset)
    else:
        first = max(0, total + offset) if offset < 0 and total is not None else offset
        found = locate_line(file, index, first)
        total = index.total_lines
        if found is None:
            assert total is not None
            raise ToolError(
                f"{shown_path} has {total} line{'' if total == 1 else 's'}, so offset={offset} "
                f"is past its end. Pass an offset below {total}, or offset=-{limit} for the last "
                f"{limit} lines."
            )
        start = found

    file.seek(start)
    data = file.read(WINDOW_BYTES)
    at_eof = start + len(data) >= size
    rows = _Rows()
    position = 0
    cut_at: int | None = None
    cut_chars = 0
    label = first if from_end else first + 1
    while len(rows.texts) < limit and position < len(data):
        newline = data.find(b"\n", position)
        complete = newline != -1 or at_eof
        piece = data[position:] if newline == -1 else data[position:newline]
        exact = decode_exact(piece if complete else complete_utf8_prefix(piece))
        if complete and len(exact) <= rows.room_for(label):
            rows.add(label, exact)
            position = len(data) if newline == -1 else newline + 1
            label += 1
            continue
        if rows.texts:
            break  # the next call starts with this line, so it may use the whole result
        part = exact[: rows.room_for(label)]
        cut_chars = len(part)
        rows.add(label, part)
        position += encoded_length(part)
        cut_at = start + position
        break

    end = start + position
    if looks_binary(data[:position]):
        raise ToolError(
            f"{shown_path} looks binary: 30% or more of bytes {start:,}–{end:,} are NUL or not "
            "valid UTF-8, and read_file shows text only. It cannot show this part; use "
            "list_dir for its size, or read a text part with offset or byte_offset."
        )
    shown_lines = len(rows.texts)
    last_label = label - 1 if cut_at is None else label
    ends_with_newline = data.endswith(b"\n") if at_eof else None

    if from_end:
        span = f"lines {first}…{last_label} (numbered back from the end, -1 is the last line)"
        of = f" of a {size:,}-byte file too big to count quickly"
        next_offset = last_label + 1 if end < size and cut_at is None else None
    else:
        span = f"line {first + 1}" if shown_lines == 1 else f"lines {first + 1}–{last_label}"
        of = f" of {total}" if total is not None else f" of a {size:,}-byte file (not yet counted)"
        next_offset = first + shown_lines if end < size and cut_at is None else None
    header = f"{shown_path}: {span}{of} shown"
    if cut_at is not None:
        header += f"; line {last_label} is cut after {cut_chars:,} characters"

    notes: list[str] = []
    if cut_at is not None:
        notes.append(
            f"Line {last_label} continues past this result: pass byte_offset={cut_at} (and no "
            "offset) to read on from where it was cut."
        )
    elif next_offset is not None:
        notes.append(f"More: pass offset={next_offset} for the next lines.")
    where = _where(rows)
    note = substitution_note(rows.nul_bytes, rows.invalid_bytes, where)
    if note:
        notes.append(note)
    if ends_with_newline is False and end >= size:
        notes.append("(no newline at end of file)")

    text = header + "\n" + "\n".join(rows.texts)
    if notes:
        text += "\n\n" + "\n".join(notes)
    structured = _structured(
        shown_path,
        size,
        total_lines=total,
        first_line=None if from_end else first + 1,
        last_line=None if from_end else last_label,
        first_line_from_end=first if from_end else None,
        start_byte=start,
        end_byte=end,
        next_offset=next_offset,
        next_byte_offset=cut_at,
        nul_bytes=rows.nul_bytes,
        invalid_utf8_bytes=rows.invalid_bytes,
        ends_with_newline=ends_with_newline,
    )
    return ToolResult(text, structured=structured)


def _read_bytes(file: BufferedReader, shown_path: str, size: int, byte_offset: int) -> ToolResult:
    begin = max(0, size + byte_offset) if byte_offset < 0 else byte_offset
    if begin > size:
        raise ToolError(
            f"byte_offset={byte_offset} is past the end of {shown_path}, which has {size:,} "
            f"bytes. Pass a byte_offset below {size}, or a negative one to count from the end."
        )
    file.seek(begin)
    data = file.read(WINDOW_BYTES)
    skipped = skip_continuation_bytes(data)
    data = data[skipped:]
    begin += skipped
    at_eof = begin + len(data) >= size
    exact = decode_exact(data if at_eof else complete_utf8_prefix(data))[:BODY_LIMIT]
    end = begin + encoded_length(exact)
    if looks_binary(data[: end - begin]):
        raise ToolError(
            f"{shown_path} looks binary: 30% or more of bytes {begin:,}–{end:,} are NUL or not "
            "valid UTF-8, and read_file shows text only. It cannot show this part; read a text "
            "part with another offset or byte_offset."
        )
    shown = show(exact)
    header = f"{shown_path}: bytes {begin:,}–{end:,} of {size:,} shown, as raw text"
    header += " (no line numbers)"
    if skipped:
        header += f"; started {skipped} byte{'' if skipped == 1 else 's'} after byte_offset, at "
        header += "the next character boundary"
    notes: list[str] = []
    if end < size:
        notes.append(f"More: pass byte_offset={end} for the next bytes.")
    note = substitution_note(shown.nul_bytes, shown.invalid_bytes)
    if note:
        notes.append(note)
    text = header + "\n" + shown.text
    if notes:
        text += "\n\n" + "\n".join(notes)
    structured = _structured(
        shown_path,
        size,
        start_byte=begin,
        end_byte=end,
        next_byte_offset=end if end < size else None,
        nul_bytes=shown.nul_bytes,
        invalid_utf8_bytes=shown.invalid_bytes,
    )
    return ToolResult(text, structured=structured)


def _where(rows: _Rows) -> str:
    parts = []
    for name, lines in (("NUL", rows.nul_lines), ("not UTF-8", rows.invalid_lines)):
        if lines:
            listed = ", ".join(str(n) for n in lines[:_LISTED_LINES])
            more = f" and {len(lines) - _LISTED_LINES} more" if len(lines) > _LISTED_LINES else ""
            parts.append(f"{name} on line{'' if len(lines) == 1 else 's'} {listed}{more}")
    return "; ".join(parts)


def _structured(path: str, size: int, **fields: Any) -> dict[str, Any]:
    return {"path": path, "file_bytes": size, **fields}
