"""`find_file`: paths under the root whose names match a name or glob, a page at a time."""

from __future__ import annotations

import os
import stat
from fnmatch import fnmatchcase
from typing import Annotated

import anyio
from pydantic import Field

from ...errors import ToolError
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import fill_page, make_cursor, query_digest, read_cursor
from .shown_text import OUTPUT_LIMIT
from .walk import WalkStats, skipped_note, walk
from .workspace import open_workspace

DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000
_PAGE_CHARS = OUTPUT_LIMIT - 1_000  # room for the header and notes


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"pattern": "conftest.py"},
        {"pattern": "*.py", "path": "src"},
        {"pattern": "tests/*/test_*.py"},
    ),
)
async def find_file(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description="A file name, or a glob with * ? [ ]; with a '/' it is matched against "
            "the path below `path`, e.g. '*.toml'.",
        ),
    ],
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The directory to search, relative to the root, e.g. 'src'.",
        ),
    ] = ".",
    include_skipped: Annotated[
        bool,
        Field(
            description="Also search .git, node_modules, .venv, __pycache__ and other tool "
            "directories, which are skipped by default, e.g. true.",
        ),
    ] = False,
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"Most paths per page (1-{MAX_LIMIT}), e.g. 50."),
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, to get the next page of the "
            "same search, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjEwMH0'.",
        ),
    ] = None,
) -> ToolResult:
    """Find files and directories under the root by name or glob, sorted by path.

    Use it to locate a file before reading it: by exact name ('pyproject.toml') or by glob
    ('*.py', 'test_*'). A pattern without '/' is matched against each name; with '/', against
    the whole path below `path` (there '*' also crosses '/'). Matching is case-sensitive.

    It matches names only and does not look inside files: search contents with grep_file. It
    does not follow symlinked directories and cannot search outside the root. It skips .git,
    node_modules, .venv, __pycache__ and similar tool directories unless include_skipped=true,
    and says when it did.

    Result: a header such as "3 matches for '*.toml' under '.' (1–3 shown)", then one path
    per line relative to the root, directories ending in '/'; then, when there are more,
    "More: pass cursor='…'". A page stops at `limit` paths or at 10,000 characters.
    structuredContent: {"matches": [...], "total": N, "next_cursor": "…" or null}.

    Cost: about 1 s per 100,000 files under `path` (every page walks the tree again); a few
    thousand characters at most, 10,000 for a full page.
    """
    digest = query_digest("find_file", pattern=pattern, path=path, include_skipped=include_skipped)
    start = 0 if cursor is None else read_cursor(cursor, digest, "find_file")
    stats = WalkStats()

    def search() -> tuple[str, list[str]]:
        with open_workspace(ctx) as root, root.open(path) as top:
            if not stat.S_ISDIR(os.fstat(top.fd).st_mode):
                raise ToolError(
                    f"{path!r} is a file, not a directory; find_file searches directories. "
                    "Pass its parent directory, or read the file with read_file."
                )
            matches = []
            for entry in walk(top, stats, include_skipped=include_skipped):
                subject = entry.below.as_posix() if "/" in pattern else entry.name
                if fnmatchcase(subject, pattern):
                    shown = entry.relative.as_posix()
                    matches.append(shown + ("/" if entry.is_dir else ""))
            return top.shown, matches

    shown_top, matches = await anyio.to_thread.run_sync(search)
    notes = skipped_note(stats)
    if not matches:
        text = (
            f"No file or directory under {shown_top!r} has a name matching {pattern!r}. "
            "find_file matches names only: search contents with grep_file."
        )
        return ToolResult(
            text + (f"\n{notes}" if notes else ""),
            structured={"matches": [], "total": 0, "next_cursor": None},
        )
    if start >= len(matches):
        raise ToolError(
            f"The cursor points past the last of the {len(matches)} matches (the tree changed, "
            "or the listing is finished). Leave cursor out to start from the first page."
        )
    page, _ = fill_page(matches, start, limit, str, _PAGE_CHARS)
    end = start + len(page)
    next_cursor = make_cursor(digest, end) if end < len(matches) else None
    plural = "match" if len(matches) == 1 else "matches"
    header = (
        f"{len(matches)} {plural} for {pattern!r} under {shown_top!r} ({start + 1}–{end} shown)"
    )
    lines = [header, *page]
    footer = []
    if next_cursor is not None:
        footer.append(f"More: pass cursor={next_cursor!r} for the next page.")
    if notes:
        footer.append(notes)
    text = "\n".join(lines) + ("\n\n" + "\n".join(footer) if footer else "")
    return ToolResult(
        text, structured={"matches": page, "total": len(matches), "next_cursor": next_cursor}
    )
