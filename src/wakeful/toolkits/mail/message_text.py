"""A MIME message as the model reads it: headers as text, one body as text, attachments apart.

Parsing is the standard library's (`email`, the default policy, which decodes RFC 2047 words);
HTML is converted to Markdown by markitdown. Mail in the wild is often wrong: a charset that
does not exist or does not match the bytes, headers that do not parse, a part cut short. None of
it raises here; the text is decoded as well as it can be and the damage is visible as U+FFFD.
"""

from __future__ import annotations

import email
import re
import unicodedata
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from email.policy import default as default_policy
from html.parser import HTMLParser
from mimetypes import guess_extension

__all__ = [
    "BODY_FILE_NAME",
    "Attachment",
    "MessageText",
    "header_text",
    "html_to_text",
    "message_text",
    "parse_message",
    "safe_file_name",
    "snippet",
]

MAX_FILE_NAME_CHARS = 120
BODY_FILE_NAME = "body.txt"
_UNSAFE_IN_NAME = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")


@dataclass(frozen=True, slots=True)
class Attachment:
    """A part that is not the body: its name as sent (None if it had none), a safe name to save
    it under, its type, and its bytes."""

    sent_name: str | None
    file_name: str
    mime_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class MessageText:
    """What read_mail shows: the body as text, where it came from, and the attachments."""

    body: str
    body_source: str
    """'text/plain', 'text/html (converted to text)' or 'none'."""
    attachments: tuple[Attachment, ...]


def parse_message(raw: bytes) -> EmailMessage:
    message = email.message_from_bytes(raw, policy=default_policy)
    assert isinstance(message, EmailMessage)  # the default policy makes EmailMessage
    return message


def header_text(message: Message, name: str) -> str | None:
    """Header `name` as text (RFC 2047 words decoded, folded lines joined), or None.

    A header the default policy cannot parse (a broken address list, say) falls back to its raw
    value, decoded word by word."""
    raw = next((value for key, value in message.raw_items() if key.lower() == name.lower()), None)
    if raw is None:
        return None
    try:
        value = str(message[name])
    except (ValueError, IndexError, TypeError, LookupError):
        try:
            value = str(make_header(decode_header(raw)))
        except (ValueError, LookupError, UnicodeDecodeError):
            value = raw
    return " ".join(value.split())


def message_text(message: EmailMessage) -> MessageText:
    """The body (plain text preferred, else HTML converted) and every other leaf part as an
    attachment."""
    body_part = _body_part(message)
    if body_part is None:
        body, source = "", "none"
    elif body_part.get_content_type() == "text/html":
        body, source = html_to_text(decoded_text(body_part)), "text/html (converted to text)"
    else:
        body, source = decoded_text(body_part), "text/plain"
    attachments: list[Attachment] = []
    taken = {BODY_FILE_NAME}  # read_mail saves a cut body under this name beside them
    for index, part in enumerate(message.walk(), start=1):
        if part.is_multipart() or part is body_part or _is_alternative_body(part):
            continue
        sent_name = part.get_filename()
        mime_type = part.get_content_type()
        name = safe_file_name(sent_name, index, mime_type, taken)
        taken.add(name)
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        attachments.append(Attachment(sent_name, name, mime_type, data))
    return MessageText(body.strip("\n"), source, tuple(attachments))


def _body_part(message: EmailMessage) -> Message | None:
    try:
        return message.get_body(preferencelist=("plain", "html"))
    except (KeyError, ValueError, IndexError):
        # A malformed multipart: take the first text part there is.
        for part in message.walk():
            if part.get_content_type() in ("text/plain", "text/html"):
                return part
        return None


def _is_alternative_body(part: Message) -> bool:
    """A text part without a file name that is not an attachment: the other form of the body."""
    return (
        part.get_content_type() in ("text/plain", "text/html")
        and part.get_filename() is None
        and part.get_content_disposition() != "attachment"
    )


def decoded_text(part: Message) -> str:
    """A text part's text: its declared charset, else UTF-8, else Windows-1252 with U+FFFD;
    line ends as '\\n'."""
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    declared = part.get_content_charset() or "utf-8"
    text: str | None = None
    for charset in (declared, "utf-8"):
        try:
            text = data.decode(charset)
            break
        except (LookupError, UnicodeDecodeError):
            continue
    if text is None:
        text = data.decode("cp1252", errors="replace")
    return text.replace("\r\n", "\n")


def html_to_text(html: str) -> str:
    """An HTML body as Markdown-ish text (links kept), without scripts and styles."""
    from markitdown.converters import HtmlConverter

    try:
        # strict: on HTML nested too deeply, raise instead of warning and degrading.
        text = HtmlConverter().convert_string(html, strict=True).markdown
    except RecursionError:
        text = _plain_html_text(html)  # nested too deeply for markitdown's parser
    assert isinstance(text, str)
    return text.strip()


class _TextOnly(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skipping:
            self._skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _plain_html_text(html: str) -> str:
    parser = _TextOnly()
    parser.feed(html)
    parser.close()
    return " ".join(" ".join(parser.parts).split())


def snippet(message: EmailMessage, limit: int = 120) -> str:
    """The start of the body on one line (for a search result); '' when there is no text."""
    part = _body_part(message)
    if part is None:
        return ""
    text = decoded_text(part)
    if part.get_content_type() == "text/html":
        text = _plain_html_text(text)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def safe_file_name(sent: str | None, index: int, mime_type: str, taken: set[str]) -> str:
    """A name to save an attachment under: the sent name's last path component with control
    and path characters replaced, no leading dots, at most 120 characters, not in `taken`;
    'part-<index><ext>' when nothing usable is left."""
    name = unicodedata.normalize("NFC", sent or "")
    name = re.split(r"[/\\]", name)[-1]
    name = _UNSAFE_IN_NAME.sub("_", name).strip().lstrip(".").strip()
    if not name or set(name) <= {"_", " "}:
        name = f"part-{index}{guess_extension(mime_type) or '.bin'}"
    if len(name) > MAX_FILE_NAME_CHARS:
        stem, dot, extension = name.rpartition(".")
        extension = extension[:16] if dot and stem else ""
        name = name[: MAX_FILE_NAME_CHARS - len(extension) - 1].rstrip() + (
            f".{extension}" if extension else ""
        )
    unique, counter = name, 2
    while unique in taken:
        stem, dot, extension = name.rpartition(".")
        unique = f"{stem}-{counter}.{extension}" if dot and stem else f"{name}-{counter}"
        counter += 1
    return unique
