"""Mailbox names and strings as IMAP arguments: modified UTF-7 (RFC 3501 §5.1.3) and quoting.

Every string a tool sends goes through :func:`quoted`, so text from the model (a search word, a
mailbox name) is always one IMAP string and never a piece of command syntax; a line break,
which would end the command and start another, is refused before anything is sent.
"""

from __future__ import annotations

import base64
import re

from ...errors import ToolError

__all__ = ["canonical_mailbox", "decode_mailbox", "encode_mailbox", "quoted", "quoted_mailbox"]

_PRINTABLE = re.compile(r"[\x20-\x7e]+")


def quoted(text: str, *, what: str) -> str:
    """`text` as one IMAP quoted string (backslash and double quote escaped).

    ToolError for CR, LF and NUL: no quoted string may hold them (`what` names the argument).
    """
    if any(c in text for c in "\r\n\0"):
        raise ToolError(
            f"The {what} {text!r} contains a line break or NUL, which IMAP cannot carry in a "
            f"string. Give the {what} on one line, without control characters."
        )
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def encode_mailbox(name: str) -> str:
    """A mailbox name in IMAP's modified UTF-7: ASCII stays, '&' is '&-', the rest '&…-'."""
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            utf16 = "".join(pending).encode("utf-16-be")
            encoded = base64.b64encode(utf16).decode().rstrip("=").replace("/", ",")
            out.append(f"&{encoded}-")
            pending.clear()

    for char in name:
        if "\x20" <= char <= "\x7e":
            flush()
            out.append("&-" if char == "&" else char)
        else:
            pending.append(char)
    flush()
    return "".join(out)


def decode_mailbox(encoded: str) -> str:
    """The name a server sends in modified UTF-7, as text; a malformed part is kept as sent."""

    def decode(match: re.Match[str]) -> str:
        inner = match.group(1)
        if not inner:
            return "&"
        padded = inner.replace(",", "/") + "=" * (-len(inner) % 4)
        try:
            return base64.b64decode(padded, validate=True).decode("utf-16-be")
        except (ValueError, UnicodeDecodeError):
            return match.group(0)

    return re.sub(r"&([A-Za-z0-9+,]*)-", decode, encoded)


def canonical_mailbox(name: str) -> str:
    """`name` as the server lists it: INBOX is case-insensitive (RFC 3501), other names not."""
    return "INBOX" if name.upper() == "INBOX" else name


def quoted_mailbox(name: str) -> str:
    """A mailbox name as the argument of SELECT, APPEND, MOVE, …: encoded, then quoted."""
    if not name.strip():
        raise ToolError(
            "The mailbox name is empty. Give a mailbox name, e.g. 'INBOX' or 'Archive'."
        )
    return quoted(encode_mailbox(name), what="mailbox name")
