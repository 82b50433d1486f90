"""`grep_file`: lines under the root that match a regular expression, a page at a time."""

from __future__ import annotations

import os
import re
import stat
from fnmatch import fnmatchcase
from typing import Annotated

import anyio
from pydantic import Field

from ...errors import ToolError
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import make_cursor, query_digest, read_cursor
from .shown_text import OUTPUT_LIMIT, decode_exact, looks_binary, show
from .walk import WalkStats, open_entry, skipped_note, walk
from .workspace import open_workspace

DEFAULT_MAX_RESULTS = 50
MAX_RESULTS = 500
SHOWN_LINE_CHARS = 300
PIECE_BYTES = 1 << 20
BINARY_SNIFF_BYTES = 8192
_PAGE_CHARS = OUTPUT_LIMIT - 1_500  # room for the header and notes
_LISTED_SKIPS = 10


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"pattern": "def main\\("},
        {"pattern": "TODO|FIXME", "path": "src", "glob": "*.py"},
        {"pattern": "timeout", "path": "config.toml", "ignore_case": True},
    ),
)
async def grep_file(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description="A Python regular expression searched for in each line, "
            "e.g. 'class \\w+Error'.",
        ),
    ],
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="A file, or a directory searched recursively, relative to the root, "
            "e.g. 'src'.",
        ),
    ] = ".",
    glob: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="Only search files whose names match this glob, e.g. '*.py'.",
        ),
    ] = None,
    ignore_case: Annotated[
        bool, Field(description="Match letters regardless of case, e.g. true.")
    ] = False,
    include_skipped: Annotated[
        bool,
        Field(
            description="Also search .git, node_modules, .venv, __pycache__ and other tool "
            "directories, which are skipped by default, e.g. true.",
        ),
    ] = False,
    max_results: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_RESULTS,
            description=f"Most matching lines per page (1-{MAX_RESULTS}), e.g. 20.",
        ),
    ] = DEFAULT_MAX_RESULTS,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, to get the next page of the "
            "same search, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjUwfQ'.",
        ),
    ] = None,
) -> ToolResult:
    """Search the contents of text files under the root for a regular expression.

    Use it to find where something is defined or used ('def handle_', 'TODO'), then read the
    lines around a hit with read_file (offset = line - 1). Files are searched in path order,
    line by line; the pattern is Python `re` syntax and is matched within one line.

    It does not search binary files (30% or more NUL bytes or bytes that are not UTF-8 in the
    first 8 KiB): they are skipped and listed in the result. It cannot match across lines or
    search outside the root, does not follow symlinked directories, and skips .git,
    node_modules, .venv, __pycache__ and similar tool directories unless include_skipped=true.
    Lines over 1 MiB are searched in 1 MiB pieces.

    Result: a header, then one line per match as "path:line: text" (line numbers 1-based, the
    text as in the file); then, when there are more, "More: pass cursor='…'", and the skipped
    files. Changes to the text, stated where they happen: a line over 300 characters is shown
    as 300 characters around the match with "[…]" marking what was left out; NUL bytes are
    shown as ␀ and bytes that are not UTF-8 as �. A page stops at max_results or 10,000
    characters. structuredContent: {"matches": [{"path", "line", "text"}], "next_cursor",
    "skipped_binary"}.

    Cost: about 1 s per 500 MB searched; a page with a cursor searches again from the start.
    """
    flags = re.IGNORECASE if ignore_case else 0
    try:
        regex = re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(
            f"The pattern {pattern!r} is not a valid regular expression: {exc}. Fix it, or "
            "escape special characters with a backslash (e.g. 'f\\(x\\)') to match them as text."
        ) from exc
    digest = query_digest(
        "grep_file",
        pattern=pattern,
        path=path,
        glob=glob,
        ignore_case=ignore_case,
        include_skipped=include_skipped,
    )
    skip = 0 if cursor is None else read_cursor(cursor, digest, "grep_file")
    search = _Search(regex, skip, max_results)
    stats = WalkStats()

    def run() -> str:
        with open_workspace(ctx) as root, root.open(path) as target:
            if not stat.S_ISDIR(os.fstat(target.fd).st_mode):
                search.file(target.fd, target.shown)
                return target.shown
            for entry in walk(target, stats, include_skipped=include_skipped):
                if entry.is_dir or search.full:
                    if search.full:
                        break
                    continue
                if glob is not None and not fnmatchcase(entry.name, glob):
                    continue
                shown = entry.relative.as_posix()
                try:
                    fd = open_entry(entry, root)
                except OSError:
                    search.unreadable.append(shown)
                    continue
                if fd is None:
                    search.outside.append(shown)
                    continue
                try:
                    search.file(fd, shown)
                finally:
                    os.close(fd)
            return target.shown

    shown_target = await anyio.to_thread.run_sync(run)
    return search.result(pattern, shown_target, digest, skipped_note(stats))


class _Search:
    """One page of matches: skips the first `skip`, then collects up to `limit`."""

    def __init__(self, regex: re.Pattern[str], skip: int, limit: int) -> None:
        self.regex = regex
        self.skip = skip
        self.limit = limit
        self.seen = 0
        self.rows: list[dict[str, object]] = []
        self.lines: list[str] = []
        self.chars = 0
        self.full = False
        self.binary: list[str] = []
        self.outside: list[str] = []
        self.unreadable: list[str] = []
        self.nul_bytes = 0
        self.invalid_bytes = 0
        self.shortened = 0

    def file(self, fd: int, shown_path: str) -> None:
        """Search the open file `fd` (read from its start); other kinds of file are skipped."""
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return  # a directory behind a symlink, a FIFO, a device: nothing to search
            os.lseek(fd, 0, os.SEEK_SET)
            with os.fdopen(fd, "rb", closefd=False) as handle:
                if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
                    self.binary.append(shown_path)
                    return
                handle.seek(0)
                number = 1
                while not self.full:
                    piece = handle.readline(PIECE_BYTES)
                    if not piece:
                        return
                    text = decode_exact(piece.removesuffix(b"\n"))
                    found = self.regex.search(text)
                    if found is not None:
                        self._match(shown_path, number, text, found)
                    if piece.endswith(b"\n"):
                        number += 1
        except OSError:
            self.unreadable.append(shown_path)

    def _match(self, shown_path: str, number: int, text: str, found: re.Match[str]) -> None:
        self.seen += 1
        if self.seen <= self.skip:
            return
        if len(self.rows) >= self.limit:
            self.full = True
            return
        excerpt = _excerpt(text, found)
        if excerpt != text:
            self.shortened += 1
        shown = show(excerpt)
        line = f"{shown_path}:{number}: {shown.text}"
        if self.rows and self.chars + len(line) + 1 > _PAGE_CHARS:
            self.full = True
            return
        self.nul_bytes += shown.nul_bytes
        self.invalid_bytes += shown.invalid_bytes
        self.rows.append({"path": shown_path, "line": number, "text": shown.text})
        self.lines.append(line)
        self.chars += len(line) + 1

    def result(self, pattern: str, shown_target: str, digest: str, walk_note: str) -> ToolResult:
        first = self.skip + 1
        last = self.skip + len(self.rows)
        next_cursor = make_cursor(digest, last) if self.full else None
        if not self.rows and self.skip:
            raise ToolError(
                "The cursor points past the last match (the files changed, or the search is "
                "finished). Leave cursor out to start from the first match."
            )
        if not self.rows:
            header = f"No line under {shown_target!r} matches {pattern!r}."
        elif self.full:
            header = f"Matches {first}–{last} for {pattern!r} under {shown_target!r}; more follow"
        else:
            total = last
            header = f"{total} match{'' if total == 1 else 'es'} for {pattern!r} under "
            header += f"{shown_target!r} ({first}–{last} shown)"
        notes = []
        if next_cursor is not None:
            notes.append(f"More: pass cursor={next_cursor!r} for the next matches.")
        if self.shortened:
            notes.append(
                f"Note: {self.shortened} line(s) over {SHOWN_LINE_CHARS} characters are shown "
                "around the match, with […] for the parts left out; read_file shows them whole."
            )
        if self.nul_bytes or self.invalid_bytes:
            notes.append(
                f"Note: {self.nul_bytes} NUL byte(s) are shown as ␀ and {self.invalid_bytes} "
                "byte(s) that are not valid UTF-8 as �."
            )
        for label, paths in (
            ("Skipped binary file(s)", self.binary),
            ("Skipped symlink(s) leading outside the root", self.outside),
            ("Could not read", self.unreadable),
        ):
            if paths:
                listed = ", ".join(paths[:_LISTED_SKIPS])
                more = (
                    f" and {len(paths) - _LISTED_SKIPS} more" if len(paths) > _LISTED_SKIPS else ""
                )
                notes.append(f"{label}: {listed}{more}.")
        if walk_note:
            notes.append(walk_note)
        text = "\n".join([header, *self.lines])
        if notes:
            text += "\n\n" + "\n".join(notes)
        return ToolResult(
            text,
            structured={
                "matches": self.rows,
                "next_cursor": next_cursor,
                "skipped_binary": self.binary,
            },
        )


def _excerpt(text: str, found: re.Match[str]) -> str:
    if len(text) <= SHOWN_LINE_CHARS:
        return text
    begin = max(0, found.start() - SHOWN_LINE_CHARS // 3)
    end = min(len(text), begin + SHOWN_LINE_CHARS)
    begin = max(0, end - SHOWN_LINE_CHARS)
    head = "[…]" if begin > 0 else ""
    tail = "[…]" if end < len(text) else ""
    return head + text[begin:end] + tail
