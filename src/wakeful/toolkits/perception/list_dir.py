"""`list_dir`: what one directory under the root holds, with types and sizes, a page at a time."""

from __future__ import annotations

import os
import stat
from typing import Annotated, Any

import anyio
from pydantic import Field

from ...errors import ToolError
from ...safety.beneath import Opened, Root
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import fill_page, make_cursor, query_digest, read_cursor
from .shown_text import OUTPUT_LIMIT
from .workspace import open_workspace

DEFAULT_LIMIT = 200
MAX_LIMIT = 1_000
_PAGE_CHARS = OUTPUT_LIMIT - 1_000


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=({"path": "."}, {"path": "src/wakeful", "limit": 50}),
)
async def list_dir(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The directory, relative to the root; '.' is the root itself, e.g. 'src'.",
        ),
    ] = ".",
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"Most entries per page (1-{MAX_LIMIT}), e.g. 50."),
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, to get the next page of the "
            "same directory, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjIwMH0'.",
        ),
    ] = None,
) -> ToolResult:
    """List the entries of one directory under the root: type, size and name, sorted by name.

    Use it to see what a directory holds before reading files, or to check sizes before
    reading a big file. Hidden entries (names starting with '.') are listed and flagged.

    It does not recurse (use find_file for a whole tree) and cannot list outside the root. For
    a symlink it shows where it leads only when that is under the root.

    Result: a header such as "src: 12 entries (3 directories, 9 files), 1–12 shown", then one
    line per entry: its type (dir, file, link, other), its size in bytes (files only), and its
    name, with '/' after directories and "(hidden)" after hidden names; then, when there are
    more, "More: pass cursor='…'". A page stops at `limit` entries or 10,000 characters.
    structuredContent: {"entries": [{"name", "type", "size", "hidden", "target"}], "total",
    "next_cursor"}.

    Cost: a few milliseconds for a thousand entries; about 40 characters per entry.
    """
    digest = query_digest("list_dir", path=path)
    start = 0 if cursor is None else read_cursor(cursor, digest, "list_dir")

    def listing() -> tuple[str, list[dict[str, Any]]]:
        with open_workspace(ctx) as root, root.open(path) as directory:
            return directory.shown, _entries(directory, root)

    shown_dir, entries = await anyio.to_thread.run_sync(listing)
    if start and start >= len(entries):
        raise ToolError(
            f"The cursor points past the last of the {len(entries)} entries of {shown_dir!r} "
            "(the directory changed, or the listing is finished). Leave cursor out to start "
            "from the first page."
        )
    page, lines = fill_page(entries, start, limit, _line, _PAGE_CHARS)
    end = start + len(page)
    next_cursor = make_cursor(digest, end) if end < len(entries) else None
    dirs = sum(1 for e in entries if e["type"] == "dir")
    files = sum(1 for e in entries if e["type"] == "file")
    others = len(entries) - dirs - files
    counts = (
        f"{dirs} director{'y' if dirs == 1 else 'ies'}, {files} file{'' if files == 1 else 's'}"
    )
    if others:
        counts += f", {others} other"
    if not entries:
        header = f"{shown_dir}: empty directory (0 entries)"
    else:
        header = f"{shown_dir}: {len(entries)} entries ({counts}), {start + 1}–{end} shown"
    text = "\n".join([header, *lines])
    if next_cursor is not None:
        text += f"\n\nMore: pass cursor={next_cursor!r} for the next entries."
    return ToolResult(
        text, structured={"entries": page, "total": len(entries), "next_cursor": next_cursor}
    )


def _entries(directory: Opened, root: Root) -> list[dict[str, Any]]:
    shown_dir = directory.shown
    if not stat.S_ISDIR(os.fstat(directory.fd).st_mode):
        raise ToolError(
            f"{shown_dir!r} is a file, not a directory; list_dir lists directories. Read it "
            "with read_file, or list its parent directory."
        )
    try:
        # By descriptor: the names are those of the directory opened beneath the root, and
        # each entry is stat'ed relative to it (fstatat), never by a path looked up again.
        with os.scandir(directory.fd) as listing:
            found = sorted(listing, key=lambda e: e.name)
    except NotADirectoryError as exc:
        raise ToolError(
            f"{shown_dir!r} is a file, not a directory; list_dir lists directories. Read it "
            "with read_file, or list its parent directory."
        ) from exc
    except PermissionError as exc:
        raise ToolError(
            f"{shown_dir!r} cannot be listed: permission denied. List another directory."
        ) from exc
    entries = []
    for item in found:
        try:
            info = item.stat(follow_symlinks=False)
        except OSError:
            continue  # vanished between listing and stat
        entry: dict[str, Any] = {
            "name": item.name,
            "type": _kind(info.st_mode),
            "size": info.st_size if stat.S_ISREG(info.st_mode) else None,
            "hidden": item.name.startswith("."),
            "target": None,
        }
        if stat.S_ISLNK(info.st_mode):
            target = root.resolved(f"{shown_dir}/{item.name}")
            entry["target"] = None if target is None else target.as_posix()
        entries.append(entry)
    return entries


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _line(entry: dict[str, Any]) -> str:
    size = "" if entry["size"] is None else str(entry["size"])
    name = entry["name"] + ("/" if entry["type"] == "dir" else "")
    if entry["type"] == "link":
        name += f" -> {entry['target']}" if entry["target"] else " -> (outside the root, or broken)"
    if entry["hidden"]:
        name += "  (hidden)"
    return f"{entry['type']:<5} {size:>12}  {name}"
