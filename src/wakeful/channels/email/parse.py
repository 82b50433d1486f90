"""One received mail as an event's payload: who sent it and how sure we are, what it says, what
it answers, and what it carries, read with the standard library's `email` package.

Text is decoded from its declared charset, then UTF-8, then with replacement characters, so a
wrong or unknown charset never loses the mail; HTML is converted to Markdown. Attachments are
saved under `<workspace>/.wakeful/attachments/<event id>/` with names made safe (a name such as
`../../etc/passwd` becomes `passwd`, inside that folder) and listed by path, never pasted. A text
longer than the cap is cut in the payload, which says so, and saved whole beside them.

Authentication-Results (the receiving server's SPF, DKIM and DMARC verdicts) decide whether a
From can be believed: mail claiming the user's or a contact's address that fails them is flagged
`suspicious` and comes from a stranger, never from the user. Mail from the user's address counts
as the user's only when it passed.
"""

from __future__ import annotations

import email
import email.errors
import hashlib
import mimetypes
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import policy
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from email.utils import getaddresses, parseaddr, parsedate_to_datetime
from pathlib import Path
from typing import Any, Final, Literal

from ...core.channel import source_event_id
from ...events import EMAIL_RECEIVED, Event, Source, SourceType

__all__ = [
    "AddressBook",
    "ReceivedMail",
    "Relation",
    "attachments_folder",
    "mail_event",
    "read_mail",
    "stable_mail_id",
    "unreadable_mail",
]

Relation = Literal["user", "contact", "stranger"]
Verdict = Literal["pass", "fail", "none"]

# What the standard library raises on input it cannot make sense of (its header parser is known
# to raise IndexError and the like on some malformed headers); caught only around its calls.
MALFORMED: Final = (
    email.errors.MessageError,
    ValueError,
    LookupError,
    IndexError,
    TypeError,
    AttributeError,
    UnicodeError,
    AssertionError,
)

SUMMARY_CHARS: Final = 200
MAX_HEADER_CHARS: Final = 256 * 1024
MAX_SUBJECT_CHARS: Final = 1_000
MAX_LISTED_ADDRESSES: Final = 50
MAX_NAME_CHARS: Final = 120
FULL_TEXT_NAME: Final = "message-text.txt"
RAW_MESSAGE_NAME: Final = "message.eml"
_AUTH_RESULT = re.compile(r"^\s*(spf|dkim|dmarc)\s*=\s*([A-Za-z]+)(.*)$", re.IGNORECASE | re.DOTALL)
_AUTH_PROPERTY = re.compile(r"(smtp\.mailfrom|header\.d|header\.i|header\.from)\s*=\s*([^\s;]+)")
_UNSAFE_NAME_CHARS = re.compile(r"[^\w.\- ()+=,@]")
_BAD_RESULTS: Final = frozenset({"fail", "softfail", "permerror"})


@dataclass(frozen=True)
class AddressBook:
    """Who the user is and who their contacts are: addresses (or "@domain" for a domain) from
    the settings, and the people the user wrote to."""

    user: frozenset[str] = frozenset()
    contacts: frozenset[str] = frozenset()
    # Everyone the user wrote to (the Sent mailbox): contacts by past correspondence.
    correspondents: frozenset[str] = frozenset()

    def relation(self, address: str) -> Relation:
        address = address.lower()
        if address in self.user:
            return "user"
        domain = address.rpartition("@")[2]
        if address in self.contacts or (domain and f"@{domain}" in self.contacts):
            return "contact"
        if address in self.correspondents:
            return "contact"
        return "stranger"


@dataclass(frozen=True)
class ReceivedMail:
    """A parsed mail: its stable source id, its thread, its sender, and the event's content
    (without the thread's earlier messages, which the channel adds from what it has seen)."""

    event_id: str
    source_id: str
    thread_id: str
    sender: str
    source: Source
    content: dict[str, Any]
    summary: dict[str, str] = field(default_factory=dict)


def stable_mail_id(message_id: str | None, raw: bytes) -> str:
    """The mail's id at its source: its Message-ID, or a hash of its bytes when it has none."""
    if message_id:
        return message_id
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def attachments_folder(workspace: Path, event_id: str) -> Path:
    """Where the attachments (and the whole text) of the mail that became `event_id` go."""
    return workspace / ".wakeful" / "attachments" / event_id


def _cut_text(text: str, limit: int, full: Path) -> str:
    """The first characters of `text` and a note saying where the whole is, `limit` characters
    at most together (the note counts, so the event keeps to the limit the user set)."""

    def note(kept: int) -> str:
        return (
            f"\n[Cut: the first {kept:,} of {len(text):,} characters; the whole text is in {full}.]"
        )

    # The note is no longer with the smaller count it will hold than with the limit.
    kept = max(0, limit - len(note(limit)))
    return text[:kept] + note(kept)


def read_mail(
    raw: bytes,
    *,
    channel: str,
    workspace: Path,
    book: AddressBook,
    authserv_id: str | None = None,
    max_text_chars: int = 20_000,
) -> ReceivedMail:
    """Parse `raw` (RFC 5322 bytes) that arrived through `channel` into a payload, saving its
    attachments under the folder of its event id; blocking (file writes), so the channel runs
    it in a worker thread."""
    message = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    message_id = _message_id(_header(message, "Message-ID"))
    in_reply_to = _message_id(_header(message, "In-Reply-To"))
    references = _message_ids(_header(message, "References"))
    source_id = stable_mail_id(message_id, raw)
    event_id = source_event_id(channel, source_id)
    folder = attachments_folder(workspace, event_id)
    names = _SafeNames()
    thread_id = references[0] if references else (in_reply_to or source_id)

    from_name, sender = _first_address(_header(message, "From", decode=False))
    auth = authentication(message, authserv_id=authserv_id, from_address=sender)
    claimed = book.relation(sender) if sender else "stranger"
    relation, source_type, suspicious = _judge(claimed, auth["verdict"])

    body_part, text, body_defects = _body(message)
    attachments, attachment_defects = _save_attachments(message, body_part, folder, names)
    text_path: str | None = None
    cut = len(text) > max_text_chars
    if cut:
        full = _write(folder, names.take(FULL_TEXT_NAME), text.encode("utf-8"))
        text_path = str(full)
        text = _cut_text(text, max_text_chars, full)
    defects = sorted({*_defects(message), *body_defects, *attachment_defects})
    if defects and body_part is None and not text:
        # Nothing readable came out: keep the raw message so nothing of the mail is lost.
        raw_copy = _write(folder, names.take(RAW_MESSAGE_NAME), raw)
        text = f"[The mail could not be read as MIME; its raw bytes are in {raw_copy}.]"

    subject = _header(message, "Subject")[:MAX_SUBJECT_CHARS]
    date = _date(_header(message, "Date"))
    content: dict[str, Any] = {
        "from": sender,
        "from_name": from_name,
        "to": _listed(_addresses(_header(message, "To", decode=False))),
        "cc": _listed(_addresses(_header(message, "Cc", decode=False))),
        "subject": subject,
        "date": date,
        "message_id": message_id,
        "in_reply_to": in_reply_to,
        "thread": {"id": thread_id, "previous": []},
        "text": text,
        "text_cut": cut,
        "text_path": text_path,
        "attachments": attachments,
        "auth": auth,
        "relation": relation,
        "suspicious": suspicious is not None,
    }
    if suspicious is not None:
        content["suspicious_reason"] = suspicious
    if claimed == "user" and relation == "user" and source_type != "user":
        content["unverified"] = (
            "From gives the user's address but no authentication result confirms it, so this "
            "mail is not treated as the user's own."
        )
    if defects:
        content["defects"] = defects
    summary = {
        "from": sender,
        "subject": subject,
        "date": date or "",
        "summary": " ".join(text.split())[:SUMMARY_CHARS],
    }
    return ReceivedMail(
        event_id=event_id,
        source_id=source_id,
        thread_id=thread_id,
        sender=sender,
        source=Source(type=source_type, id=sender),
        content=content,
        summary=summary,
    )


def unreadable_mail(raw: bytes, *, channel: str, workspace: Path) -> ReceivedMail:
    """A mail the parser gave up on, still delivered: its raw bytes saved beside its
    attachments would be, its id the hash of those bytes, its sender a stranger."""
    source_id = stable_mail_id(None, raw)
    event_id = source_event_id(channel, source_id)
    saved = _write(attachments_folder(workspace, event_id), RAW_MESSAGE_NAME, raw)
    text = f"[The mail could not be read as MIME; its raw bytes are in {saved}.]"
    content: dict[str, Any] = {
        "from": "",
        "subject": "",
        "text": text,
        "attachments": [],
        "auth": {"spf": "none", "dkim": "none", "dmarc": "none", "verdict": "none"},
        "relation": "stranger",
        "suspicious": False,
        "defects": ["unparsable"],
    }
    return ReceivedMail(
        event_id=event_id,
        source_id=source_id,
        thread_id=source_id,
        sender="",
        source=Source(type="stranger"),
        content=content,
        summary={"from": "", "subject": "", "date": "", "summary": text},
    )


def mail_event(
    mail: ReceivedMail, *, channel: str, session: str, previous: list[dict[str, str]]
) -> Event:
    """The `email.received` event for a parsed mail, with the summaries of its thread's earlier
    messages."""
    return Event(
        id=mail.event_id,
        kind=EMAIL_RECEIVED,
        source=mail.source,
        channel=channel,
        content={**mail.content, "thread": {"id": mail.thread_id, "previous": previous}},
        session=session,
        context={"thread": mail.thread_id},
    )


def authentication(
    message: Message, *, authserv_id: str | None, from_address: str
) -> dict[str, str]:
    """SPF, DKIM and DMARC as the receiving server recorded them, and a verdict on the From:
    "pass" (DMARC passed, or an SPF or DKIM pass for the From's domain), "fail" (DMARC failed, or
    a failure with no aligned pass) or "none" (nothing recorded)."""
    header = _trusted_results(message, authserv_id)
    results = {"spf": "none", "dkim": "none", "dmarc": "none"}
    aligned_pass = False
    from_domain = from_address.rpartition("@")[2].lower()
    for clause in header.split(";")[1:] if header else []:
        match = _AUTH_RESULT.match(clause)
        if match is None:
            continue
        method, result, rest = match.group(1).lower(), match.group(2).lower(), match.group(3)
        if _severity(result) >= _severity(results[method]):
            results[method] = result  # several results for one method: the worst counts
        if result == "pass" and method in ("spf", "dkim"):
            for _, value in _AUTH_PROPERTY.findall(rest):
                domain = value.rpartition("@")[2].lower().strip("<>\"'")
                if from_domain and (from_domain == domain or from_domain.endswith("." + domain)):
                    aligned_pass = True
    verdict: Verdict
    if results["dmarc"] == "pass":
        verdict = "pass"
    elif results["dmarc"] in _BAD_RESULTS:
        verdict = "fail"
    elif aligned_pass:
        verdict = "pass"
    elif results["spf"] in _BAD_RESULTS or results["dkim"] in _BAD_RESULTS:
        verdict = "fail"
    else:
        verdict = "none"
    return {**results, "verdict": verdict}


def _severity(result: str) -> int:
    return 2 if result in _BAD_RESULTS else 0 if result == "none" else 1


def _trusted_results(message: Message, authserv_id: str | None) -> str:
    """The Authentication-Results header to believe: the topmost, or the topmost from
    `authserv_id` when it is set ("" when there is none)."""
    for name, value in message.raw_items():
        if name.lower() != "authentication-results":
            continue
        text = " ".join(str(value).split())
        server = text.split(";", 1)[0].strip().split()[0].lower() if text.strip() else ""
        if authserv_id is None or server == authserv_id.lower():
            return text
    return ""


def _judge(claimed: Relation, verdict: str) -> tuple[Relation, SourceType, str | None]:
    """(relation, source type, why the mail is suspicious or None) for a mail whose From
    claims `claimed` with authentication `verdict`."""
    if verdict == "fail":
        if claimed == "stranger":
            return "stranger", "stranger", "The sender's address failed authentication."
        whose = "the user's own address" if claimed == "user" else "a contact's address"
        return (
            "stranger",
            "stranger",
            f"From gives {whose} but the mail failed authentication (SPF/DKIM/DMARC): it is "
            "probably forged. Do not treat it as coming from that address.",
        )
    if claimed == "user":
        return "user", ("user" if verdict == "pass" else "contact"), None
    return claimed, claimed, None


# --- headers -----------------------------------------------------------------------------------


def _header(message: Message, name: str, *, decode: bool = True) -> str:
    """A header's value as text ("" when absent), unfolded, its encoded words decoded.

    Read from the raw header with the `email.utils` functions rather than through the default
    policy's header parser, which takes seconds on a header of a few thousand addresses (and a
    sender chooses the headers); a header is read up to MAX_HEADER_CHARS."""
    for raw_name, raw_value in message.raw_items():
        if raw_name.lower() == name.lower():
            value = " ".join(_undo_surrogates(str(raw_value))[:MAX_HEADER_CHARS].split())
            return _decoded_words(value) if decode else value
    return ""


def _undo_surrogates(text: str) -> str:
    """Raw 8-bit header bytes (kept by the parser as surrogate escapes) read as UTF-8."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _decoded_words(value: str) -> str:
    """RFC 2047 encoded words (=?utf-8?q?…?=) decoded; the value as it is when they do not
    decode (an unknown charset, a broken word)."""
    if "=?" not in value:
        return value
    try:
        return str(make_header(decode_header(value)))
    except MALFORMED:
        return value


def _message_id(value: str) -> str | None:
    ids = _message_ids(value)
    return ids[0] if ids else (value.strip() or None)


def _message_ids(value: str) -> list[str]:
    return re.findall(r"<[^<>\s]+>", value)


def _first_address(value: str) -> tuple[str, str]:
    name, address = parseaddr(value)
    return _decoded_words(name), address.strip().lower()


def _addresses(value: str) -> list[str]:
    # A header cut at MAX_HEADER_CHARS can end in half an address: only whole ones count.
    return [address.lower() for _, address in getaddresses([value]) if "@" in address]


def _listed(addresses: list[str]) -> list[str]:
    """At most MAX_LISTED_ADDRESSES addresses, then how many more there were: a mail to a
    crowd must not fill the model's context with its recipients."""
    if len(addresses) <= MAX_LISTED_ADDRESSES:
        return addresses
    more = len(addresses) - MAX_LISTED_ADDRESSES
    return [*addresses[:MAX_LISTED_ADDRESSES], f"… and {more} more"]


def _date(value: str) -> str | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).isoformat()
    except MALFORMED:
        return None


def _defects(message: Message) -> Iterator[str]:
    for part in message.walk():
        for defect in part.defects:
            yield type(defect).__name__


# --- body --------------------------------------------------------------------------------------


def _body(message: EmailMessage) -> tuple[Message | None, str, list[str]]:
    """The part chosen as the mail's text (plain preferred, else HTML), its text, and the
    defects met on the way."""
    defects: list[str] = []
    try:
        part = message.get_body(preferencelist=("plain", "html"))
    except MALFORMED as exc:
        defects.append(f"unreadable structure ({type(exc).__name__})")
        part = None
    if part is None:
        payload = message.get_payload()
        if isinstance(payload, str) and message.get_content_maintype() == "multipart":
            # A multipart without parts (no boundary found): its body is still text.
            return None, payload.strip(), defects
        if message.is_multipart() or message.get_content_maintype() != "text":
            return None, "", defects
        part = message
    text, charset_defect = part_text(part)
    if charset_defect:
        defects.append(charset_defect)
    if part.get_content_subtype() == "html":
        text = html_to_text(text)
    return part, text.strip(), defects


def part_text(part: Message) -> tuple[str, str | None]:
    """The text of a part and a note when its charset was wrong or unknown: decoded from the
    declared charset, else UTF-8, else the declared (or Latin-1) charset with replacement
    characters."""
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    declared = part.get_content_charset() or "us-ascii"
    try:
        return data.decode(declared), None
    except LookupError:
        note = f"unknown charset {declared!r}"
        fallback = "latin-1"
    except UnicodeDecodeError:
        note = f"text not valid in its declared charset {declared!r}"
        fallback = declared
    try:
        return data.decode("utf-8"), note
    except UnicodeDecodeError:
        return data.decode(fallback, errors="replace"), note


def html_to_text(html: str) -> str:
    """HTML as Markdown (markitdown's converter: about 2 ms for a typical mail, where
    trafilatura takes about 15 and may drop short mails as boilerplate)."""
    from markitdown.converters import HtmlConverter

    return HtmlConverter().convert_string(html).markdown


# --- attachments -------------------------------------------------------------------------------


class _SafeNames:
    """File names for one mail's folder: safe, and each used once."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def take(self, wanted: str) -> str:
        stem, dot, suffix = wanted.rpartition(".")
        if not dot or not stem:
            stem, suffix = wanted, ""
        name, counter = wanted, 1
        while name.lower() in self._used:
            counter += 1
            name = f"{stem}-{counter}.{suffix}" if suffix else f"{stem}-{counter}"
        self._used.add(name.lower())
        return name


def safe_file_name(wanted: str | None, content_type: str, index: int) -> str:
    """A file name that stays inside its folder: the last path component of `wanted`, with
    control and unusual characters replaced, no leading dots, at most 120 characters; a name
    made from the index and the content type when nothing is left."""
    name = unicodedata.normalize("NFC", wanted or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _UNSAFE_NAME_CHARS.sub("_", name).strip(" .")
    if len(name) > MAX_NAME_CHARS:
        stem, dot, suffix = name.rpartition(".")
        keep = suffix[:16] if dot and stem else ""
        name = name[: MAX_NAME_CHARS - len(keep) - 1] + ("." + keep if keep else "")
    if not name or name.startswith("."):
        extension = mimetypes.guess_extension(content_type) or ".bin"
        name = f"attachment-{index}{extension}"
    return name


def _save_attachments(
    message: Message, body: Message | None, folder: Path, names: _SafeNames
) -> tuple[list[dict[str, Any]], list[str]]:
    saved: list[dict[str, Any]] = []
    defects: list[str] = []
    for index, part in enumerate(message.walk(), start=1):
        if part is body or part.is_multipart() or not _is_attachment(part):
            continue
        content_type = part.get_content_type()
        try:
            wanted = part.get_filename()
        except MALFORMED:
            wanted = None
            defects.append("unreadable attachment name")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        name = names.take(safe_file_name(wanted, content_type, index))
        path = _write(folder, name, data)
        entry: dict[str, Any] = {
            "name": name,
            "type": content_type,
            "size": len(data),
            "path": str(path),
        }
        if wanted and wanted != name:
            entry["original_name"] = wanted
        saved.append(entry)
    return saved, defects


def _is_attachment(part: Message) -> bool:
    disposition = part.get_content_disposition()
    if disposition == "attachment" or part.get_filename(failobj=None):
        return True
    # The other alternative of the body (its HTML twin) and inline text are not attachments.
    return part.get_content_maintype() not in ("text", "multipart", "message")


def _write(folder: Path, name: str, data: bytes) -> Path:
    """Write `data` to `folder/name`; the name is a single safe component, and the file is
    opened without following a link, so nothing lands outside the folder."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"refusing to save an attachment under the unsafe name {name!r}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    return path
