"""Long execution output: the first and last lines are shown, the whole is saved to a file.

Output over 200 lines or 10,000 characters keeps its first and last 50 lines, with
`[… N lines omitted; full output saved to PATH; read it with read_file]` between them, where PATH
is relative to the workspace root so read_file can open it. Lines that are still too long are cut
in the middle with a count of the characters left out, so a single huge line is cut visibly too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...safety.beneath import Root
from .file_targets import write_atomically

MAX_LINES = 200
MAX_CHARS = 10_000
KEEP_LINES = 50
MAX_LINE_CHARS = 2_000


def keep_head_and_tail(
    text: str,
    *,
    root: Path,
    save_as: str,
    max_lines: int = MAX_LINES,
    max_chars: int = MAX_CHARS,
    keep: int = KEEP_LINES,
) -> tuple[str, str | None]:
    """`text` as shown to the model, and where the whole was saved (None if it was not cut).

    `save_as` is the file's path relative to `root` (e.g. '.wakeful/output/call_1.txt'); it
    and its folders are made through the root's descriptor, so a folder that sandboxed code
    swapped for a link cannot send the write outside the root. Returns the saved file's path
    relative to the root. Writes synchronously: call it from a worker thread
    (`anyio.to_thread.run_sync`) for big outputs.
    """
    lines = text.split("\n")
    if len(lines) <= max_lines and len(text) <= max_chars:
        return text, None
    with Root(root) as opened, opened.place(save_as) as place:
        write_atomically(place, text.encode("utf-8", errors="surrogateescape"))
        shown_as = place.shown
    if len(lines) > max_lines:
        head, tail = lines[:keep], lines[-keep:]
        omitted = len(lines) - 2 * keep
    else:
        head, tail, omitted = lines, [], 0
    return excerpt(head, tail, omitted, saved_as=shown_as, max_chars=max_chars), shown_as


def excerpt(
    head: Sequence[str],
    tail: Sequence[str],
    omitted_lines: int,
    *,
    saved_as: str,
    max_chars: int = MAX_CHARS,
) -> str:
    """The shown part of a long output: `head`, a note, `tail`, within about `max_chars`.

    With lines omitted the note stands between head and tail; otherwise (few lines, but too many
    characters) the middle of the text is cut and the note says where the whole is.
    """
    where = f"full output saved to {saved_as}; read it with read_file"
    head_text = "\n".join(_shorten(line) for line in head)
    tail_text = "\n".join(_shorten(line) for line in tail)
    if omitted_lines:
        half = max_chars // 2
        middle = f"[… {omitted_lines} lines omitted; {where}]"
        return "\n".join(
            part
            for part in (_cut_end(head_text, half), middle, _cut_start(tail_text, half))
            if part
        )
    text = head_text + ("\n" + tail_text if tail_text else "")
    if len(text) <= max_chars:
        return f"{text}\n[Output shortened; {where}]"
    half = max_chars // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}[… {cut} characters omitted; {where}]{text[-half:]}"


def _shorten(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    half = MAX_LINE_CHARS // 2
    return f"{line[:half]}[… {len(line) - 2 * half} characters omitted …]{line[-half:]}"


def _cut_end(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[… {len(text) - limit} characters omitted …]"


def _cut_start(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[… {len(text) - limit} characters omitted …]{text[-limit:]}"
