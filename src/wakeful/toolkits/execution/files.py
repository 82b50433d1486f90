"""`write_file` and `edit_file`: change a file under the root, byte for byte as the model said.

Fidelity is the point. What the model sends is what lands in the file: curly quotes stay curly,
CRLF stays CRLF, a missing final newline stays missing; nothing is normalised. Anything notable
(mixed line endings, marks that `read_file` uses for bytes it cannot show) is reported in the
result, never fixed silently. A tool that turned curly quotes into straight ones once made every
later edit of the file fail to match, which is the failure these tools exist to prevent.

Both tools write atomically (a temporary file in the same directory, then `os.replace`, keeping
the file's mode) and run the file's checker afterwards (see :mod:`.diagnostics`).
"""

from __future__ import annotations

import base64
import difflib
import re
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ..perception.shown_text import INVALID_MARK, NUL_MARK, cut_visibly, show
from ..perception.workspace import open_workspace
from .diagnostics import FileCheck, check_file
from .edit_plan import PlannedEdit, describe_endings, ending_style, line_ending_counts, plan_edit
from .file_targets import (
    MAX_FILE_BYTES,
    existing_bytes,
    refuse_protected,
    writable_target,
    write_atomically,
)
from .settings import DiagnosticsSettings

__all__ = [
    "FILE_EDIT_TOOLS",
    "MAX_FILE_BYTES",
    "edit_file",
    "line_ending_counts",
    "writable_target",
    "write_atomically",
    "write_file",
]


DIFF_LIMIT = 8_000
_LISTED_MATCHES = 20
_CONTEXT_LINES = 3
_INVALID_BYTE = re.compile("[\udc80-\udcff]")


# --- write_file --------------------------------------------------------------------------------


@tool(
    root_paths=("path",),
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=True),
    examples=(
        {"path": "src/app.py", "content": "print('hello')\n"},
        {"path": "docs/new/notes.md", "content": "# Notes\r\n", "create_dirs": True},
        {"path": "config.json", "content": "{}\n", "overwrite": False},
        {"path": "data/blob.bin", "content_base64": "AAEC/w=="},
    ),
)
async def write_file(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The file to write, relative to the root (or absolute inside it), "
            "e.g. 'src/app.py'.",
        ),
    ],
    content: Annotated[
        str | None,
        Field(
            max_length=MAX_FILE_BYTES,
            description="The whole new content as text, written exactly as given (UTF-8, no "
            "line-ending or quote conversion), e.g. 'x = 1\\n'. Give this or content_base64.",
        ),
    ] = None,
    content_base64: Annotated[
        str | None,
        Field(
            max_length=MAX_FILE_BYTES * 4 // 3 + 4,
            description="The whole new content as base64, for bytes text cannot carry (NUL, "
            "bytes that are not UTF-8), e.g. 'Y2Fm6Q=='. Give this or content.",
        ),
    ] = None,
    create_dirs: Annotated[
        bool,
        Field(
            description="Create missing parent directories; without it a missing directory is "
            "an error, e.g. true.",
        ),
    ] = False,
    overwrite: Annotated[
        bool,
        Field(
            description="Replace the file if it exists (the default); false refuses to touch "
            "an existing file, e.g. false.",
        ),
    ] = True,
) -> ToolResult:
    """Write a whole file under the root: create it, or replace all of its content.

    Use it to create a file, or to rewrite one completely; to change part of a file use
    edit_file, which needs only the part. The file gets exactly the bytes you send: quotes,
    CRLF or lone CR line endings, tabs, trailing spaces and a missing final newline are kept;
    nothing is converted. Text that read_file showed with ␀ or � marks must not be written back
    as text: those marks stand for bytes it could not show; write such content with
    content_base64.

    It cannot write outside the root, through a symlink that leads outside it, over a
    directory or a device, or more than 10 MB. It does not create parent directories unless
    create_dirs is true. It replaces an existing file whole, keeping its permissions, unless
    overwrite is false. The write is atomic: readers see the old or the new file, never half.

    Result: "Wrote 120 bytes to src/app.py (created it)." or "(replaced its 98 bytes)", notes
    on anything notable (mixed line endings, ␀ or � characters written as characters), and
    the checker's verdict, e.g. "ruff: 1 problem: line 3 col 5 F821 Undefined name `x`".
    structuredContent holds path, bytes_written, created, replaced, notes and check
    (checker, diagnostics [{line, column, code, message}], note).

    Cost: a few milliseconds for the write plus the checker (ruff or node, typically 50-500
    ms); the result is a few hundred characters.
    """
    data = _content_bytes(content, content_base64)

    def write() -> tuple[Path, str, bytes | None, list[str], bool]:
        with (
            open_workspace(ctx) as root,
            writable_target(root, path, create_dirs) as place,
        ):
            shown_path = place.shown
            missing = bool(place.missing)
            before = existing_bytes(place, shown_path)
            if before is not None and not overwrite:
                raise ToolError(
                    f"{shown_path} already exists ({len(before):,} bytes) and overwrite is "
                    "false. Pass overwrite=true to replace it, use edit_file to change part of "
                    "it, or choose another path."
                )
            notes = _write_notes(data, before)
            if before == data:
                notes.insert(0, "The file already held exactly these bytes; it was not rewritten.")
            else:
                write_atomically(place, data, replace=overwrite)
            return root.path / place.relative, shown_path, before, notes, missing

    target, shown_path, before, notes, missing = await anyio.to_thread.run_sync(write)
    check = await _check(ctx, target, data)
    if before is None:
        what = "created it" + (", with its missing directories" if missing else "")
    else:
        what = f"replaced its {len(before):,} bytes"
    text = f"Wrote {len(data):,} bytes to {shown_path} ({what})."
    text += _notes_text(notes) + "\nCheck: " + check.summary()
    structured = {
        "path": shown_path,
        "bytes_written": len(data),
        "created": before is None,
        "replaced": before is not None,
        "notes": notes,
        "check": check.as_dict(),
    }
    return ToolResult(text, structured=structured)


def _content_bytes(content: str | None, content_base64: str | None) -> bytes:
    if (content is None) == (content_base64 is None):
        given = "both" if content is not None else "neither"
        raise ToolError(
            f"write_file got {given} of content and content_base64; it needs exactly one. Pass "
            "the text as content, or the bytes as content_base64 when they are not UTF-8 text."
        )
    if content is not None:
        data = content.encode("utf-8")
    else:
        assert content_base64 is not None
        try:
            data = base64.b64decode(content_base64, validate=True)
        except ValueError as exc:  # binascii.Error, or a character outside ASCII
            raise ToolError(
                f"content_base64 is not valid base64 ({exc}). Encode the bytes with standard "
                "base64 (A-Z a-z 0-9 + /, padded with =), without line breaks."
            ) from exc
    if len(data) > MAX_FILE_BYTES:
        raise ToolError(
            f"The content is {len(data):,} bytes; write_file writes at most {MAX_FILE_BYTES:,}. "
            "Write a smaller file, or split the content over several files."
        )
    return data


@tool(
    root_paths=("path",),
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=False),
    examples=(
        {"path": "src/app.py", "old": "return 'TODO'", "new": "return result"},
        {"path": "README.md", "old": "“Draft”\r\n", "new": "“Final”\r\n"},
        {
            "path": "src/config.py",
            "old": "DEBUG = True",
            "new": "DEBUG = False",
            "replace_all": True,
        },
    ),
)
async def edit_file(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The file to change, relative to the root (or absolute inside it), "
            "e.g. 'src/app.py'.",
        ),
    ],
    old: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_FILE_BYTES,
            description="The exact text to replace, character for character as read_file shows "
            "it (without the line-number prefix), e.g. 'def main():\\n    return 1'.",
        ),
    ],
    new: Annotated[
        str,
        Field(
            max_length=MAX_FILE_BYTES,
            description="The text to put in its place, written exactly as given; '' deletes "
            "old, e.g. 'def main():\\n    return 2'.",
        ),
    ],
    replace_all: Annotated[
        bool,
        Field(
            description="Replace every occurrence of old instead of requiring exactly one, "
            "e.g. true.",
        ),
    ] = False,
) -> ToolResult:
    """Replace one exact piece of text in a file under the root with another, and show the diff.

    Use it to change part of an existing file: copy old from read_file (enough lines to be
    unique) and give new. Matching is exact, byte for byte: curly and straight quotes differ,
    a CRLF line ending is "\\r\\n", tabs are not spaces. Nothing in old, new or the rest of the
    file is converted; bytes that are not UTF-8 and NUL bytes elsewhere in the file stay as
    they are.

    It does not guess: when old is not in the file, or is there more than once (without
    replace_all), nothing is written and the error gives the number of matches and their line
    numbers, or a hint at the near miss (quotes, line endings, whitespace). It cannot match
    the ␀ and � marks read_file shows in place of NUL and non-UTF-8 bytes (edit around them,
    or rewrite the file with write_file's content_base64), cannot create files (use
    write_file), and cannot edit files over 10 MB, directories, devices or files outside the
    root.

    Result: "Edited src/app.py: 1 replacement (line 12); 1,204 → 1,210 bytes.", a unified
    diff with 3 lines of context (cut visibly past 8,000 characters), notes (e.g. mixed line
    endings the edit caused) and the checker's verdict ("ruff: no problems"). structuredContent
    holds path, replacements, lines, bytes_before, bytes_after, diff, notes and check.

    Cost: a few milliseconds plus the checker (ruff or node, typically 50-500 ms); the result
    is the diff, usually a few hundred characters, at most about 9,000.
    """
    # Lone surrogates ("\udcff" in JSON) never get here: argument validation refuses them, so
    # the surrogateescape encoding below cannot turn model text into arbitrary bytes.
    if old == new:
        raise ToolError(
            "old and new are the same text, so the edit would change nothing. Give in new the "
            "text old should become."
        )

    def edit() -> tuple[Path, str, PlannedEdit]:
        with open_workspace(ctx) as root, root.place(path) as place:
            refuse_protected(place)
            shown_path = place.shown
            before = existing_bytes(place, shown_path)
            if before is None:
                raise ToolError(
                    f"There is no file {path!r} under the root {str(root.path)!r}; edit_file "
                    "changes existing files. Create it with write_file, or check the spelling "
                    "with find_file."
                )
            result = plan_edit(before, old, new, replace_all=replace_all, shown_path=shown_path)
            if len(result.after) > MAX_FILE_BYTES:
                raise ToolError(
                    f"The edit would make {shown_path} {len(result.after):,} bytes, over the "
                    f"{MAX_FILE_BYTES:,}-byte limit. Make a smaller change."
                )
            write_atomically(place, result.after)
            return root.path / place.relative, shown_path, result

    target, shown_path, result = await anyio.to_thread.run_sync(edit)
    check = await _check(ctx, target, result.after)
    diff = await anyio.to_thread.run_sync(
        _unified_diff, result.before_text, result.after_text, shown_path
    )
    count = len(result.lines)
    lines = ", ".join(str(n) for n in result.lines[:_LISTED_MATCHES])
    if count > _LISTED_MATCHES:
        lines += f" and {count - _LISTED_MATCHES} more"
    text = (
        f"Edited {shown_path}: {count} replacement{'' if count == 1 else 's'} "
        f"(line{'' if count == 1 else 's'} {lines}); "
        f"{len(result.before):,} → {len(result.after):,} bytes.\n\n{diff}"
    )
    text += _notes_text(result.notes) + "\nCheck: " + check.summary()
    structured = {
        "path": shown_path,
        "replacements": count,
        "lines": result.lines,
        "bytes_before": len(result.before),
        "bytes_after": len(result.after),
        "diff": diff,
        "notes": result.notes,
        "check": check.as_dict(),
    }
    return ToolResult(text, structured=structured)


def _write_notes(data: bytes, before: bytes | None) -> list[str]:
    notes = []
    counts = line_ending_counts(data)
    if ending_style(counts) is None and sum(counts) > 0:
        notes.append(
            f"The content has mixed line endings ({describe_endings(counts)}); they were "
            "written as given."
        )
    if before is not None:
        old_style, new_style = ending_style(line_ending_counts(before)), ending_style(counts)
        if old_style and new_style and old_style != new_style:
            notes.append(
                f"The file had {old_style} line endings and the new content has {new_style}; "
                "it now has the new content's."
            )
    text = data.decode("utf-8", errors="surrogateescape")
    shown = show(text)
    for mark, name in ((NUL_MARK, "NUL bytes"), (INVALID_MARK, "bytes that are not UTF-8")):
        if mark in text:
            notes.append(
                f"The content holds {text.count(mark)} {mark} character"
                f"{'' if text.count(mark) == 1 else 's'} (U+{ord(mark):04X}), written as that "
                f"character. read_file shows {name} as {mark}; if you meant those bytes, write "
                "the file with content_base64."
            )
    if shown.nul_bytes or shown.invalid_bytes:
        notes.append(
            f"The content holds {shown.nul_bytes} NUL and {shown.invalid_bytes} non-UTF-8 "
            "bytes; read_file will show them as ␀ and �."
        )
    return notes


def _notes_text(notes: list[str]) -> str:
    return "".join(f"\nNote: {note}" for note in notes)


async def _check(ctx: ToolContext, target: Path, data: bytes) -> FileCheck:
    settings = settings_of(ctx.services, DiagnosticsSettings)
    return await check_file(target, data, settings)


# --- the diff ----------------------------------------------------------------------------------


def _unified_diff(before: str, after: str, shown_path: str) -> str:
    """A unified diff of the change, shown as read_file shows text, cut visibly when huge."""
    old_lines = _LINE.findall(before)
    new_lines = _LINE.findall(after)
    # Only the changed stretch (and its context) goes through difflib, so a one-line edit of a
    # 10 MB file costs what the edit costs.
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old_lines), len(new_lines)) - head
        and old_lines[-1 - tail] == new_lines[-1 - tail]
    ):
        tail += 1
    start = max(0, head - _CONTEXT_LINES)
    old_window = old_lines[start : len(old_lines) - max(0, tail - _CONTEXT_LINES)]
    new_window = new_lines[start : len(new_lines) - max(0, tail - _CONTEXT_LINES)]
    pieces = []
    for line in difflib.unified_diff(
        old_window, new_window, f"a/{shown_path}", f"b/{shown_path}", n=_CONTEXT_LINES
    ):
        if line.startswith("@@"):
            line = _shift_hunk(line, start)
        pieces.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    diff = show("".join(pieces)).text
    return cut_visibly(diff, "read the file with read_file to see the rest", DIFF_LIMIT)


# Lines end at LF only, as read_file numbers them (str.splitlines would also split at CR, form
# feeds and U+2028).
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _shift_hunk(header: str, offset: int) -> str:
    """A hunk header of a window that starts `offset` lines into the file, in file lines."""
    match = _HUNK.match(header)
    if match is None or offset == 0:
        return header
    # difflib numbers an empty range by the line before it, so the shift is the same for both.
    old_start, new_start = int(match[1]) + offset, int(match[3]) + offset
    return (
        f"@@ -{old_start}{match[2] or ''} +{new_start}{match[4] or ''} @@" + header[match.end() :]
    )


FILE_EDIT_TOOLS: tuple[Tool, ...] = (write_file, edit_file)
"""The tools that change files: write_file and edit_file."""
