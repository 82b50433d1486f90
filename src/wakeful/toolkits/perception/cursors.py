"""Page cursors: an opaque string that says where the next page starts, for one query only.

A cursor holds the position and a short digest of the query it was made for, base64url-encoded.
A cursor from another query, an edited one, or plain garbage fails with an error that says to
start again without it, instead of silently returning the wrong page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ...errors import ToolError


def query_digest(tool: str, **query: Any) -> str:
    """A short digest of a tool name and the arguments that define a listing."""
    text = json.dumps([tool, query], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def make_cursor(digest: str, position: int) -> str:
    raw = json.dumps({"q": digest, "at": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str, digest: str, tool: str) -> int:
    """The position a cursor holds; ToolError if it is not one `tool` gave for this query."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        position = value["at"]
        made_for = value["q"]
    except (ValueError, KeyError, TypeError, UnicodeEncodeError, binascii.Error) as exc:
        raise ToolError(
            f"The cursor {_shown(cursor)} is not a cursor {tool} gave. Pass the next_cursor "
            "value from the previous result unchanged, or leave cursor out to start from the "
            "first page."
        ) from exc
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        raise ToolError(
            f"The cursor {_shown(cursor)} holds no valid position. Leave cursor out to start "
            "from the first page."
        )
    if made_for != digest:
        raise ToolError(
            f"The cursor {_shown(cursor)} was made for a different {tool} call. A cursor only "
            "continues the listing it came from: repeat the same arguments with it, or leave "
            "cursor out to start this listing from the first page."
        )
    return position


def _shown(cursor: str) -> str:
    return repr(cursor if len(cursor) <= 60 else cursor[:60] + "…")


T = TypeVar("T")


def fill_page(
    items: Sequence[T], start: int, limit: int, render: Callable[[T], str], budget: int
) -> tuple[list[T], list[str]]:
    """The items of one page and their lines: from `start`, at most `limit`, while the lines
    (one per item, plus a newline each) fit in `budget` characters; always at least one."""
    page: list[T] = []
    lines: list[str] = []
    chars = 0
    for item in items[start : start + limit]:
        line = render(item)
        if lines and chars + len(line) + 1 > budget:
            break
        page.append(item)
        lines.append(line)
        chars += len(line) + 1
    return page, lines
