"""search_mail's arguments as IMAP SEARCH criteria, each value one quoted string.

The model's words never become IMAP syntax: each word of `query` is one `TEXT "…"` criterion
(all must match), the sender one `FROM "…"`, a date the server's `SINCE dd-Mon-yyyy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from ...errors import ToolError
from .mailbox_names import quoted

__all__ = ["MAX_QUERY_WORDS", "SearchCriteria", "search_criteria"]

MAX_QUERY_WORDS = 12
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True, slots=True)
class SearchCriteria:
    """The SEARCH arguments, and the charset to declare (None when all of them are ASCII)."""

    arguments: tuple[str, ...]
    charset: str | None


def search_criteria(
    query: str | None = None,
    *,
    sender: str | None = None,
    since: date | None = None,
    unread_only: bool = False,
    before_uid: int | None = None,
) -> SearchCriteria:
    """The criteria for messages matching every given condition (ALL when none is given)."""
    parts: list[str] = []
    words = (query or "").split()
    if len(words) > MAX_QUERY_WORDS:
        raise ToolError(
            f"The query has {len(words)} words; search_mail matches at most {MAX_QUERY_WORDS} "
            "(every word must appear). Keep the few most distinctive words."
        )
    for word in words:
        parts += ["TEXT", quoted(word, what="search word")]
    if sender is not None and sender.strip():
        parts += ["FROM", quoted(sender.strip(), what="sender")]
    if since is not None:
        parts += ["SINCE", f"{since.day}-{_MONTHS[since.month - 1]}-{since.year:04d}"]
    if unread_only:
        parts.append("UNSEEN")
    if before_uid is not None:
        if before_uid < 2:
            raise ValueError("UIDs start at 1: nothing comes before UID 1; ask for no search")
        parts += ["UID", f"1:{before_uid - 1}"]
    if not parts:
        parts.append("ALL")
    text = " ".join(parts)
    return SearchCriteria(tuple(parts), None if text.isascii() else "UTF-8")
