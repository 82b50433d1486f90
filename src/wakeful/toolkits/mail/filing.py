"""`draft_reply`, `move_mail`, `archive_mail`, `flag_mail`: act on a message without sending.

A reply is saved to Drafts (IMAP APPEND with \\Draft) for a person, or send_email, to send.
Moving uses MOVE, or COPY + \\Deleted + UID EXPUNGE of that one message; nothing here deletes.
The Drafts and Archive mailboxes are the ones the server marks \\Drafts and \\Archive
(SPECIAL-USE), else the names in the settings.
"""

from __future__ import annotations

import re
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import formataddr, formatdate, getaddresses, make_msgid, parseaddr
from typing import Annotated, Any

from pydantic import Field

from ...errors import ToolError
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .imap import MailAccount
from .mailbox_names import canonical_mailbox
from .message_text import header_text, parse_message
from .parameters import Mailbox, Uid, Uidvalidity, mail_settings, sender

__all__ = ["FILING_TOOLS", "archive_mail", "draft_reply", "flag_mail", "move_mail"]

MAX_REPLY_CHARS = 200_000
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")
_REPLY_PREFIX = re.compile(r"^\s*(re|aw|sv)\s*:", re.IGNORECASE)
_SYSTEM_FLAGS = {"\\flagged": "\\Flagged", "\\seen": "\\Seen", "\\answered": "\\Answered"}
_KEYWORD = re.compile(r"\$?[A-Za-z0-9_.-]{1,64}")


@tool(
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=False, open_world=True
    ),
    examples=(
        {"uid": 42, "body": "Hi Ana,\n\nThursday at 10:00 works for me.\n\nBest,\nAgent"},
        {"uid": 42, "body": "Thanks, all. Noted.", "reply_all": True, "mailbox": "INBOX"},
    ),
)
async def draft_reply(
    ctx: ToolContext,
    uid: Uid,
    body: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_REPLY_CHARS,
            description="The reply's plain text, saved exactly as given, e.g. 'Hi Ana,\\n\\n…'.",
        ),
    ],
    reply_all: Annotated[
        bool,
        Field(description="Also address everyone in the original To and Cc, e.g. true."),
    ] = False,
    mailbox: Mailbox = "INBOX",
    uidvalidity: Uidvalidity = None,
) -> ToolResult:
    """Draft a reply to one message and save it in the Drafts mailbox; nothing is sent.

    Use it to prepare an answer for a person to review and send (or for send_email with the
    threading headers it returns). The draft is addressed to the original's Reply-To or From
    (reply_all adds its To and Cc, without this account's own address), has the subject
    'Re: …' and the In-Reply-To and References headers that keep it in the thread. It does not
    send anything, quote the original or attach files; each call saves another draft.

    Result: the draft's uid in Drafts, its recipients and subject, and the threading headers
    (structuredContent: drafts_mailbox, draft_uid, to, cc, subject, in_reply_to, references).

    Cost: one IMAP session, 0.05-2 s; the result is about 300 characters.
    """
    settings = mail_settings(ctx)
    own = sender(ctx, settings)
    async with MailAccount.open(settings, ctx.tool_name) as account:
        await account.select(mailbox, writable=False, uidvalidity=uidvalidity)
        original = parse_message(
            (await account.one(uid, "(UID BODY.PEEK[HEADER])")).section("BODY[HEADER")
        )
        reply = _reply(original, own, body, reply_all)
        drafts = await account.special_mailbox("\\Drafts", settings.drafts_mailbox)
        try:
            data = reply.as_bytes(policy=SMTP_POLICY)
        except (ValueError, UnicodeError) as exc:
            raise ToolError(
                f"The reply to uid {uid} cannot be written as a message: {exc}. The original's "
                "addresses may be malformed; write a new message with send_email instead."
            ) from exc
        draft_uid = await account.append(data, drafts, "(\\Draft \\Seen)")
    structured: dict[str, Any] = {
        "drafts_mailbox": drafts,
        "draft_uid": draft_uid,
        "to": _list(reply["To"]),
        "cc": _list(reply["Cc"]),
        "subject": str(reply["Subject"]),
        "in_reply_to": reply["In-Reply-To"] and str(reply["In-Reply-To"]),
        "references": _MESSAGE_ID.findall(str(reply["References"] or "")),
    }
    text = (
        f"Saved a draft reply in {drafts!r}"
        + (f" (uid {draft_uid})" if draft_uid is not None else "")
        + f" to {', '.join(structured['to'])}"
        + (f", cc {', '.join(structured['cc'])}" if structured["cc"] else "")
        + f": subject {structured['subject']!r}. Nothing was sent; a person can review and "
        "send it from Drafts"
        + (
            f" (to send it with send_email instead, pass in_reply_to {structured['in_reply_to']}"
            " and the references from this result, so it stays in the thread)."
            if structured["in_reply_to"]
            else "."
        )
    )
    return ToolResult(text, structured=structured)


def _reply(original: EmailMessage, own: str, body: str, reply_all: bool) -> EmailMessage:
    own_address = parseaddr(own)[1].lower()
    target = header_text(original, "Reply-To") or header_text(original, "From") or ""
    to = _addresses(target, exclude=set())
    if not to:
        raise ToolError(
            "The message has no From or Reply-To address to reply to. Write a new message "
            "with send_email, giving the recipient yourself."
        )
    cc: list[str] = []
    if reply_all:
        seen = {parseaddr(a)[1].lower() for a in to} | {own_address}
        for name in ("To", "Cc"):
            for address in _addresses(header_text(original, name) or "", exclude=seen):
                seen.add(parseaddr(address)[1].lower())
                cc.append(address)
    subject = header_text(original, "Subject") or ""
    if not _REPLY_PREFIX.match(subject):
        subject = f"Re: {subject}".rstrip()
    message_id = _MESSAGE_ID.search(header_text(original, "Message-ID") or "")
    references = _MESSAGE_ID.findall(header_text(original, "References") or "")
    if not references:
        references = _MESSAGE_ID.findall(header_text(original, "In-Reply-To") or "")[:1]
    reply = EmailMessage(policy=SMTP_POLICY)
    reply["From"] = own
    reply["To"] = ", ".join(to)
    if cc:
        reply["Cc"] = ", ".join(cc)
    reply["Subject"] = subject
    reply["Date"] = formatdate(localtime=True)
    reply["Message-ID"] = make_msgid(domain=own_address.rpartition("@")[2] or None)
    if message_id is not None:
        reply["In-Reply-To"] = message_id.group(0)
        references = [*references, message_id.group(0)]
    if references:
        # The first and the latest 19: enough to thread, and within a header's length.
        kept = references if len(references) <= 20 else [references[0], *references[-19:]]
        reply["References"] = " ".join(kept)
    reply.set_content(body)
    return reply


def _addresses(text: str, *, exclude: set[str]) -> list[str]:
    found: list[str] = []
    for name, address in getaddresses([text]):
        if "@" not in address or address.lower() in exclude:
            continue
        exclude = exclude | {address.lower()}
        found.append(formataddr((name, address)))
    return found


def _list(value: object) -> list[str]:
    return [formataddr(pair) for pair in getaddresses([str(value)])] if value else []


# --- move, archive, flag -------------------------------------------------------------------------


@tool(
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=False, open_world=True
    ),
    examples=(
        {"uid": 42, "to_mailbox": "Receipts"},
        {"uid": 7, "to_mailbox": "INBOX", "mailbox": "Junk", "uidvalidity": 1796158365},
    ),
)
async def move_mail(
    ctx: ToolContext,
    uid: Uid,
    to_mailbox: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description="The mailbox to move it to; it must exist, e.g. 'Receipts'.",
        ),
    ],
    mailbox: Mailbox = "INBOX",
    uidvalidity: Uidvalidity = None,
) -> ToolResult:
    """Move one message to another mailbox of the configured IMAP account.

    Use it to file mail (receipts, newsletters, a project's folder); archive_mail files into
    the Archive mailbox without naming it. The message gets a new uid there, which the result
    gives. It cannot create mailboxes and does not delete anything: a wrong move is undone by
    moving it back.

    Result: where it went and its uid and uidvalidity there when the server says them
    (structuredContent: moved, uid, from_mailbox, to_mailbox, new_uid, new_uidvalidity).

    Cost: one IMAP session, 0.05-2 s; the result is about 150 characters.
    """
    return await _move(ctx, uid, mailbox, to_mailbox, uidvalidity, archive=False)


@tool(
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=False, open_world=True
    ),
    examples=({"uid": 42}, {"uid": 7, "mailbox": "INBOX", "uidvalidity": 1796158365}),
)
async def archive_mail(
    ctx: ToolContext,
    uid: Uid,
    mailbox: Mailbox = "INBOX",
    uidvalidity: Uidvalidity = None,
) -> ToolResult:
    """Move one message to the account's Archive mailbox, out of the inbox but kept.

    Use it for mail that needs no further action (a newsletter read, a settled thread). The
    Archive mailbox is the one the server marks \\Archive, else the archive_mailbox setting.
    It does not delete the message and cannot archive a message already in Archive.

    Result: the Archive mailbox's name and the message's uid there (structuredContent: moved,
    uid, from_mailbox, to_mailbox, new_uid, new_uidvalidity).

    Cost: one IMAP session, 0.05-2 s; the result is about 150 characters.
    """
    return await _move(ctx, uid, mailbox, None, uidvalidity, archive=True)


async def _move(
    ctx: ToolContext,
    uid: int,
    mailbox: str,
    to_mailbox: str | None,
    uidvalidity: int | None,
    *,
    archive: bool,
) -> ToolResult:
    settings = mail_settings(ctx)
    mailbox = canonical_mailbox(mailbox)
    to_mailbox = canonical_mailbox(to_mailbox) if to_mailbox is not None else None
    async with MailAccount.open(settings, ctx.tool_name) as account:
        if to_mailbox is None:
            to_mailbox = await account.special_mailbox("\\Archive", settings.archive_mailbox)
        elif all(b.name != to_mailbox for b in await account.mailboxes()):
            boxes = ", ".join(repr(b.name) for b in await account.mailboxes())
            raise ToolError(
                f"The mailbox {to_mailbox!r} does not exist, so uid {uid} was not moved. The "
                f"mailboxes are: {boxes}. Give one of them as to_mailbox."
            )
        if to_mailbox == mailbox:
            raise ToolError(
                f"uid {uid} is already in {mailbox!r}"
                + (", the Archive mailbox" if archive else "")
                + "; nothing to move. Give the mailbox it is in now."
            )
        await account.select(mailbox, writable=True, uidvalidity=uidvalidity)
        await account.one(uid, "(UID)")
        copied = await account.move(uid, to_mailbox)
    new_uidvalidity, new_uid = copied if copied is not None else (None, None)
    text = f"Moved uid {uid} from {mailbox!r} to {to_mailbox!r}"
    text += f"; there it is uid {new_uid} (uidvalidity {new_uidvalidity})." if new_uid else "."
    return ToolResult(
        text,
        structured={
            "moved": True,
            "uid": uid,
            "from_mailbox": mailbox,
            "to_mailbox": to_mailbox,
            "new_uid": new_uid,
            "new_uidvalidity": new_uidvalidity,
        },
    )


@tool(
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=True, open_world=True
    ),
    examples=(
        {"uid": 42, "flags": ["\\Flagged"]},
        {"uid": 42, "flags": ["$Important", "\\Seen"], "mailbox": "INBOX"},
        {"uid": 42, "flags": ["\\Flagged"], "remove": True},
    ),
)
async def flag_mail(
    ctx: ToolContext,
    uid: Uid,
    flags: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=65)], ...],
        Field(
            min_length=1,
            max_length=10,
            description="Flags to set: '\\Flagged' (high priority, starred), '\\Seen' (read), "
            "'\\Answered', or a keyword such as '$Important', e.g. ['\\Flagged'].",
        ),
    ],
    remove: Annotated[
        bool, Field(description="Clear these flags instead of setting them, e.g. true.")
    ] = False,
    mailbox: Mailbox = "INBOX",
    uidvalidity: Uidvalidity = None,
) -> ToolResult:
    """Set or clear flags on one message: high priority, read, answered, or a keyword.

    Use it to mark what needs attention (\\Flagged, or a keyword like $Important), to mark mail
    read or unread (\\Seen, with remove=true for unread), or answered. Setting a flag twice
    changes nothing. It cannot set \\Deleted or \\Draft (nothing here deletes mail); keywords
    are letters, digits and . _ - with an optional leading $.

    Result: the message's flags after the change (structuredContent: uid, mailbox, flags).

    Cost: one IMAP session, 0.05-2 s; the result is about 100 characters.
    """
    wanted = [_flag(f) for f in flags]
    settings = mail_settings(ctx)
    async with MailAccount.open(settings, ctx.tool_name) as account:
        await account.select(mailbox, writable=True, uidvalidity=uidvalidity)
        await account.one(uid, "(UID)")
        await account.store(uid, "-FLAGS.SILENT" if remove else "+FLAGS.SILENT", wanted)
        now = (await account.one(uid, "(UID FLAGS)")).flags
    shown = " ".join(now) or "(none: unread)"
    verb = "Cleared" if remove else "Set"
    return ToolResult(
        f"{verb} {' '.join(wanted)} on uid {uid} in {mailbox!r}; its flags are now: {shown}.",
        structured={"uid": uid, "mailbox": mailbox, "flags": list(now)},
    )


def _flag(text: str) -> str:
    flag = text.strip()
    if flag.startswith("\\"):
        known = _SYSTEM_FLAGS.get(flag.lower())
        if known is None:
            raise ToolError(
                f"flag_mail cannot set {flag!r}: the system flags it sets are \\Flagged, \\Seen "
                "and \\Answered (nothing here deletes or makes drafts). Give one of them, or a "
                "keyword such as '$Important'."
            )
        return known
    if not _KEYWORD.fullmatch(flag):
        raise ToolError(
            f"{flag!r} is not a flag flag_mail can set: a keyword is 1-64 letters, digits, "
            "'.', '_' or '-', with an optional leading '$', e.g. '$Important'. System flags "
            "start with a backslash, e.g. '\\Flagged'."
        )
    return flag


FILING_TOOLS: tuple[Tool, ...] = (draft_reply, move_mail, archive_mail, flag_mail)
