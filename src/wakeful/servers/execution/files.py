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
import binascii
import difflib
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Annotated

import anyio
from pydantic import Field

from ...errors import ToolError
from ...safety.paths import confine, display_path
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ..perception.shown_text import INVALID_MARK, NUL_MARK, cut_visibly, show
from ..perception.workspace import confined, workspace_root
from .diagnostics import DiagnosticsSettings, FileCheck, check_file

__all__ = [
    "FILE_EDIT_TOOLS",
    "MAX_FILE_BYTES",
    "edit_file",
    "line_ending_counts",
    "writable_target",
    "write_atomically",
    "write_file",
]

MAX_FILE_BYTES = 10 * 1024 * 1024
"""The largest file write_file writes or edit_file edits."""

DIFF_LIMIT = 8_000
_LISTED_MATCHES = 20
_CONTEXT_LINES = 3
_INVALID_BYTE = re.compile("[\udc80-\udcff]")


# --- write_file --------------------------------------------------------------------------------


@tool(
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
    root, target, missing = await writable_target(ctx, path, create_dirs)
    shown_path = display_path(target, root) if not missing else _joined_display(path, root)

    def write() -> tuple[bytes | None, list[str]]:
        before = _existing_bytes(target, shown_path)
        if before is not None and not overwrite:
            raise ToolError(
                f"{shown_path} already exists ({len(before):,} bytes) and overwrite is false. "
                "Pass overwrite=true to replace it, use edit_file to change part of it, or "
                "choose another path."
            )
        notes = _write_notes(data, before)
        if before == data:
            notes.insert(0, "The file already held exactly these bytes; it was not rewritten.")
            return before, notes
        if missing:
            target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data, replace=overwrite)
        return before, notes

    before, notes = await anyio.to_thread.run_sync(write)
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
        except binascii.Error as exc:
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


async def writable_target(
    ctx: ToolContext, user_path: str, create_dirs: bool, *, create_option: str = "create_dirs"
) -> tuple[Path, Path, bool]:
    """The resolved root, the file to write, and whether its directory has to be created.

    The file need not exist; its directory must, unless `create_dirs` (the tool's option named
    `create_option`, for the error message) allows creating it. Paths that leave the root,
    also through symlinks, are refused as :func:`wakeful.safety.paths.confine` refuses them.
    """
    root = workspace_root(ctx)

    def locate() -> tuple[Path, Path, bool]:
        real_root = root.resolve(strict=True)
        joined = Path(user_path) if Path(user_path).is_absolute() else real_root / user_path
        lexical = Path(os.path.normpath(joined))
        if lexical != real_root and not lexical.is_relative_to(real_root):
            raise ToolError(
                f"The path {user_path!r} leads outside the root {str(real_root)!r}, and only "
                "files under the root can be written. Give a path relative to the root, e.g. "
                "'src/app.py', without '..' steps that climb above it."
            )
        if os.path.lexists(lexical):
            target = confine(root, user_path)  # follows symlinks, refuses ones that leave
            return real_root, target, False
        # A new file: its directory (or the nearest existing one above) must be under the root.
        name = PurePath(user_path).name
        if name in ("", ".", ".."):
            raise ToolError(
                f"The path {user_path!r} names no file. Give a file path, e.g. 'src/app.py'."
            )
        parent_text = str(PurePath(user_path).parent)
        existing = lexical.parent
        while not os.path.lexists(existing):
            existing = existing.parent
        # Checked through `confine` with the user's own spelling of the directory part, so
        # encoded traversal and symlinks out of the root are refused the same way as for reads.
        confine(root, parent_text if existing == lexical.parent else str(existing))
        resolved_existing = existing.resolve(strict=True)
        if not resolved_existing.is_dir():
            raise ToolError(
                f"{display_path(resolved_existing, real_root)!r} is a file, so {user_path!r} "
                "cannot be created under it. Choose a path whose parent is a directory."
            )
        missing = existing != lexical.parent
        if missing and not create_dirs:
            missing_dir = _joined_display(str(PurePath(user_path).parent), real_root)
            raise ToolError(
                f"The directory {missing_dir!r} does not exist, so {user_path!r} cannot be "
                f"written. Pass {create_option}=true to create it, or check the path with list_dir."
            )
        target = resolved_existing / lexical.relative_to(existing)
        return real_root, target, missing

    try:
        return await anyio.to_thread.run_sync(locate)
    except FileNotFoundError as exc:
        raise ToolError(
            f"The root directory {str(root)!r} no longer exists, so {ctx.tool_name} cannot "
            "work. Restart the server with an existing --root."
        ) from exc


def _joined_display(user_path: str, root: Path) -> str:
    joined = Path(user_path) if Path(user_path).is_absolute() else root / user_path
    return display_path(Path(os.path.normpath(joined)), root)


def _existing_bytes(target: Path, shown_path: str) -> bytes | None:
    """The file's current bytes, None if there is none; ToolError for what is not a file."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(
            f"{shown_path!r} is a directory; write_file writes files. Give a file path inside "
            "it, e.g. its path plus '/name.txt'."
        )
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(
            f"{shown_path!r} is not a regular file (a device, socket or pipe); write_file writes "
            "regular files only. Choose another path."
        )
    if info.st_size > MAX_FILE_BYTES:
        raise ToolError(
            f"{shown_path} is {info.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit of "
            "these tools. Change it with a shell command or a program instead."
        )
    try:
        return target.read_bytes()
    except PermissionError as exc:
        raise ToolError(
            f"{shown_path!r} cannot be read: permission denied, so it cannot be replaced "
            "safely. Write another file."
        ) from exc


def write_atomically(target: Path, data: bytes, *, replace: bool = True) -> None:
    """Put `data` in `target` at once: a temporary file beside it, then a rename over it.

    An existing file keeps its permission bits; a new one gets the umask's. With
    `replace=False` an existing file is never touched (FileExistsError), even one that appears
    between a check and this call. Raises ToolError when the directory cannot be written.
    """
    directory = target.parent
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    try:
        temporary, handle = _create_temporary(directory)
    except PermissionError as exc:
        raise ToolError(
            f"The directory {str(directory)!r} cannot be written: permission denied. Write "
            "somewhere else under the root."
        ) from exc
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
            if mode is not None:
                os.fchmod(file.fileno(), mode)
        if replace:
            os.replace(temporary, target)
        else:
            try:
                os.link(temporary, target)  # fails, atomically, if the target exists
            except FileExistsError as exc:
                raise ToolError(
                    f"{target.name!r} appeared while it was being written and overwrite is "
                    "false, so it was left alone. Pass overwrite=true to replace it."
                ) from exc
            finally:
                os.unlink(temporary)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


def _create_temporary(directory: Path) -> tuple[Path, int]:
    # O_EXCL with mode 0o666 lets the umask decide a new file's permissions, as any editor would.
    while True:
        temporary = directory / f".wakeful-{secrets.token_hex(6)}.tmp"
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return temporary, handle


# --- edit_file ---------------------------------------------------------------------------------


@tool(
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
    root, target = await confined(ctx, path)
    shown_path = display_path(target, root)

    def edit() -> _Edit:
        before = _existing_bytes(target, shown_path)
        assert before is not None  # confined() found it
        result = plan_edit(before, old, new, replace_all=replace_all, shown_path=shown_path)
        if len(result.after) > MAX_FILE_BYTES:
            raise ToolError(
                f"The edit would make {shown_path} {len(result.after):,} bytes, over the "
                f"{MAX_FILE_BYTES:,}-byte limit. Make a smaller change."
            )
        write_atomically(target, result.after)
        return result

    result = await anyio.to_thread.run_sync(edit)
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


@dataclass
class _Edit:
    before: bytes
    after: bytes
    before_text: str
    after_text: str
    lines: list[int]
    notes: list[str] = field(default_factory=list)


def plan_edit(
    before: bytes, old: str, new: str, *, replace_all: bool, shown_path: str = "the file"
) -> _Edit:
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
    return _Edit(before, after, text, after_text, lines, _edit_notes(text, new))


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


def _describe_endings(counts: tuple[int, int, int]) -> str:
    names = ("CRLF", "LF", "lone CR")
    return ", ".join(f"{n} {name}" for n, name in zip(counts, names, strict=True) if n)


def _style(counts: tuple[int, int, int]) -> str | None:
    """'CRLF', 'LF' or 'CR' when a text uses one kind of line break only; None otherwise."""
    used = [name for n, name in zip(counts, ("CRLF", "LF", "CR"), strict=True) if n]
    return used[0] if len(used) == 1 else None


def _write_notes(data: bytes, before: bytes | None) -> list[str]:
    notes = []
    counts = line_ending_counts(data)
    if _style(counts) is None and sum(counts) > 0:
        notes.append(
            f"The content has mixed line endings ({_describe_endings(counts)}); they were "
            "written as given."
        )
    if before is not None:
        old_style, new_style = _style(line_ending_counts(before)), _style(counts)
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


def _edit_notes(text: str, new: str) -> list[str]:
    file_style = _style(line_ending_counts(text))
    new_counts = line_ending_counts(new)
    new_style = _style(new_counts)
    if file_style is None or sum(new_counts) == 0:
        return []
    if new_style != file_style:
        names = {"CRLF": "CRLF", "LF": "LF", "CR": "lone CR"}
        used = _describe_endings(new_counts)
        return [
            f"The file uses {names[file_style]} line endings and your new text has {used}: the "
            "file now has mixed line endings (written as given, not converted)."
        ]
    return []


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
