"""How file bytes become text a model can read, and what that changes.

Bytes are decoded as UTF-8 and shown as they are, except two things JSON and models handle
badly, each counted so a tool can report it: a NUL byte is shown as "␀" (U+2400), and a byte
that is not part of valid UTF-8 is shown as "�" (U+FFFD), one mark per byte. Everything else
(CR and CRLF line endings, tabs, curly quotes, emoji, very long lines) passes through untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OUTPUT_LIMIT = 10_000
"""Characters a perception tool returns at most; longer output is cut visibly."""

NUL_MARK = "\u2400"
INVALID_MARK = "\ufffd"
_NOT_SHOWN_AS_IS = re.compile("[\x00\udc80-\udcff]")
_INVALID = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True, slots=True)
class ShownText:
    """Decoded text with the two substitutions made, and how many of each."""

    text: str
    nul_bytes: int
    invalid_bytes: int


def decode_exact(data: bytes) -> str:
    """UTF-8 text where each invalid byte is kept as a lone surrogate (reversible to `data`)."""
    return data.decode("utf-8", errors="surrogateescape")


def encoded_length(text: str) -> int:
    """How many file bytes a string from :func:`decode_exact` came from."""
    return len(text.encode("utf-8", errors="surrogateescape"))


def show(exact: str) -> ShownText:
    """Text from :func:`decode_exact` as it is shown: NUL as ␀, invalid bytes as �."""
    nul = exact.count("\x00")
    invalid = len(_INVALID.findall(exact))
    if not nul and not invalid:
        return ShownText(exact, 0, 0)
    text = _NOT_SHOWN_AS_IS.sub(lambda m: NUL_MARK if m.group() == "\x00" else INVALID_MARK, exact)
    return ShownText(text, nul, invalid)


def complete_utf8_prefix(data: bytes) -> bytes:
    """`data` without a multi-byte character cut off at its end (up to 3 bytes dropped)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0b1100_0000 == 0b1000_0000:
            continue  # a continuation byte: keep looking for the lead byte
        if byte < 0x80:
            return data
        needed = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if byte < 0xF0 else 4
        return data if back >= needed else data[:-back]
    return data


def skip_continuation_bytes(data: bytes) -> int:
    """How many UTF-8 continuation bytes start `data` (0-3): the distance to a character start."""
    count = 0
    while count < min(3, len(data)) and data[count] & 0b1100_0000 == 0b1000_0000:
        count += 1
    return count


def looks_binary(data: bytes) -> bool:
    """True when NUL bytes or bytes that are not UTF-8 make up 30% or more of `data`."""
    if not data:
        return False
    shown = show(decode_exact(data))
    return (shown.nul_bytes + shown.invalid_bytes) * 10 >= len(data) * 3


def substitution_note(nul_bytes: int, invalid_bytes: int, where: str = "") -> str:
    """One sentence saying which substitutions were made, or '' when none were."""
    parts = []
    if nul_bytes:
        parts.append(f"{nul_bytes} NUL byte{_s(nul_bytes)} shown as {NUL_MARK}")
    if invalid_bytes:
        parts.append(
            f"{invalid_bytes} byte{_s(invalid_bytes)} that are not valid UTF-8 shown as "
            f"{INVALID_MARK}, one per byte"
        )
    if not parts:
        return ""
    return "Note: " + " and ".join(parts) + (f" ({where})" if where else "") + "."


def cut_visibly(text: str, hint: str, limit: int = OUTPUT_LIMIT) -> str:
    """`text` if it fits in `limit` characters; else its start and a line saying what was cut.

    `hint` says how to get the rest, e.g. "pass cursor='…' for the next page".
    """
    if len(text) <= limit:
        return text
    note_room = 200 + len(hint)
    kept = text[: max(0, limit - note_room)]
    omitted = len(text) - len(kept)
    return f"{kept}\n[… {omitted:,} more characters cut at the {limit:,}-character limit; {hint}]"


def _s(count: int) -> str:
    return "" if count == 1 else "s"
