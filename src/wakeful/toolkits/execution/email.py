"""`send_email`: one message over SMTP, shown in full first and sent only with a confirmation.

Email cannot be unsent and is never idempotent, so the tool works in two calls. The first (no
`confirmation_token`) checks every address and attachment, builds the message and returns it as a
preview with a token; nothing is sent. The second call, with the token and the same arguments,
sends it once. A failure after that is reported, never retried: a half-finished SMTP exchange may
have delivered to some recipients, so the model must look and run the precheck again.

Every recipient is in the preview, Bcc included (a recipient hidden from the model's view of the
message is exactly what an injected instruction would try to add).
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import smtplib
import ssl
from dataclasses import dataclass, replace
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import formataddr, formatdate, make_msgid, parseaddr
from pathlib import PurePosixPath
from typing import Annotated, Any

import anyio
from pydantic import Field

from ...errors import ToolError
from ...safety.confirmations import Confirmations, precheck_result
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ..perception.workspace import open_workspace
from .settings import EmailSettings

MAX_RECIPIENTS = 100
MAX_BODY_CHARS = 1_000_000
# The addr-spec we accept: no spaces, quotes, angle brackets or list separators, one @, a dot in
# the domain. Stricter than RFC 5322 on purpose: what passes is what a person would type.
_ADDRESS = re.compile(r"^[^@\s<>,;:\"()\[\]\\]+@[^@\s<>,;:\"()\[\]\\]+\.[^@\s<>,;:\"()\[\]\\]+$")
# A Message-ID as threading headers carry it: <left@right>, printable ASCII, no spaces.
_MESSAGE_ID = re.compile(r"^<[!-;=?-~]+@[!-;=?-~]+>$")
MAX_REFERENCES = 50


@dataclass(frozen=True, slots=True)
class _Attachment:
    shown_path: str
    data: bytes
    """The bytes read (once, beneath the root) and hashed; what is sent is what was hashed."""
    size: int
    sha256: str
    mime_type: str


@dataclass(frozen=True, slots=True)
class _Draft:
    """A checked message: what the preview shows and what the send uses."""

    sender: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    body: str
    html: str | None
    attachments: list[_Attachment]
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()

    @property
    def recipients(self) -> list[str]:
        return [parseaddr(a)[1] for a in [*self.to, *self.cc, *self.bcc]]


_Addresses = Annotated[
    tuple[Annotated[str, Field(min_length=3, max_length=320)], ...],
    Field(max_length=MAX_RECIPIENTS),
]


@tool(
    root_paths=("attachments",),
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=False, open_world=True
    ),
    examples=(
        {
            "to": ["ana@example.com"],
            "subject": "Build 142 failed",
            "body": "The nightly build failed at the lint step. Log: logs/build-142.txt",
        },
        {
            "to": ["Ana Lima <ana@example.com>"],
            "cc": ["team@example.com"],
            "subject": "Q3 report",
            "body": "Attached is the Q3 report.",
            "attachments": ["reports/q3.pdf"],
            "confirmation_token": "cnf_3f9a1c2e",
        },
    ),
)
async def send_email(
    ctx: ToolContext,
    to: Annotated[
        _Addresses,
        Field(
            min_length=1,
            description="Recipients, each 'name@example.com' or 'Name <name@example.com>', "
            "e.g. ['ana@example.com'].",
        ),
    ],
    subject: Annotated[
        str,
        Field(
            min_length=1,
            max_length=998,
            description="The subject line, one line, e.g. 'Build 142 failed'.",
        ),
    ],
    body: Annotated[
        str,
        Field(
            max_length=MAX_BODY_CHARS,
            description="The plain-text body, sent exactly as given (UTF-8), e.g. 'Hi Ana,\\n…'.",
        ),
    ],
    cc: Annotated[
        _Addresses,
        Field(description="Copy recipients, shown to everyone, e.g. ['team@example.com']."),
    ] = (),
    bcc: Annotated[
        _Addresses,
        Field(
            description="Blind-copy recipients: they get the message but are not in its "
            "headers, e.g. ['archive@example.com']."
        ),
    ] = (),
    html: Annotated[
        str | None,
        Field(
            max_length=MAX_BODY_CHARS,
            description="An HTML version of the body, sent alongside the text, e.g. "
            "'<p>Hi Ana,</p>'.",
        ),
    ] = None,
    attachments: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=4096)], ...],
        Field(
            max_length=20,
            description="Files under the workspace root to attach, e.g. ['reports/q3.pdf'].",
        ),
    ] = (),
    confirmation_token: Annotated[
        str | None,
        Field(
            max_length=200,
            description="The token a precheck call returned; leave it out to get the preview "
            "and a token first, e.g. 'cnf_3f9a1c2e'.",
        ),
    ] = None,
    in_reply_to: Annotated[
        str | None,
        Field(
            max_length=998,
            description="For a reply: the Message-ID of the message answered, so mail programs "
            "thread it, e.g. '<q3@example.com>'.",
        ),
    ] = None,
    references: Annotated[
        tuple[Annotated[str, Field(min_length=3, max_length=998)], ...],
        Field(
            max_length=MAX_REFERENCES,
            description="For a reply: the thread's Message-IDs, oldest first, ending with the "
            "one answered (draft_reply returns them), e.g. ['<q1@example.com>', "
            "'<q3@example.com>'].",
        ),
    ] = (),
) -> ToolResult:
    """Send one email over the configured SMTP server, in two calls: preview, then confirm.

    Use it to send a message to people when the task calls for it (a report, a reply, an alert).
    Call it first without confirmation_token: nothing is sent, and the result is the exact
    message (every header, every recipient including Bcc, the body, the attachments) and a
    confirmation token that expires. Read the preview; if it is what you mean to send, call again
    with the same arguments and confirmation_token. Changed arguments, a used token or an expired
    one are refused: run the precheck again.

    It cannot unsend, does not retry a failed send (some recipients may already have it), and
    does not read mail (search_mail and read_mail do). Addresses are checked for form only;
    whether a mailbox exists is known after sending. Attachments must be files under the
    workspace root. To answer in a thread, give in_reply_to and references (the original's
    Message-ID and thread, as draft_reply returns them); the subject is yours to write.

    Result: for a precheck, the preview and the token (structuredContent: token, expires_at,
    preview). After a send, "Sent …" with the Message-ID and the recipients the server accepted
    and refused; a failure is an error result that says what may have been delivered.

    Cost: a precheck is instant (a few milliseconds, reading attachments); a send takes about as
    long as the SMTP server (0.1-5 s, up to the configured timeout). The preview is about as many
    characters as the message text, attachments listed by name and size only.
    """
    settings = settings_of(ctx.services, EmailSettings)
    draft = await _draft(ctx, settings, to, cc, bcc, subject, body, html, attachments)
    draft = replace(draft, **_threading(in_reply_to, references))
    arguments: dict[str, Any] = {
        "to": list(to),
        "cc": list(cc),
        "bcc": list(bcc),
        "subject": subject,
        "body": body,
        "html": html,
        "attachments": list(attachments),
        # The files' content is part of what was confirmed: an attachment changed after the
        # preview makes the token not match.
        "attachment_sha256": [a.sha256 for a in draft.attachments],
    }
    if in_reply_to is not None or references:
        # Only when given, so a call without them confirms exactly as before they existed.
        arguments["in_reply_to"] = in_reply_to
        arguments["references"] = list(references)
    confirmations = Confirmations.of(ctx.services, ttl_seconds=settings.confirmation_ttl_seconds)
    if confirmation_token is None:
        preview = _preview(draft)
        confirmation = await confirmations.issue(ctx.tool_name, arguments, preview)
        return precheck_result(ctx.tool_name, confirmation, preview)

    await confirmations.redeem(confirmation_token, ctx.tool_name, arguments)
    password = settings.smtp_password("send_email")
    # The attachments go as the bytes _draft read and hashed (and compared with the confirmed
    # hashes above), so a file changed since cannot slip into the message.
    message = await anyio.to_thread.run_sync(_message, draft, settings)
    try:
        refused = await anyio.to_thread.run_sync(_deliver, message, draft, settings, password)
    except smtplib.SMTPRecipientsRefused as exc:
        error = _all_refused(exc)
    except (smtplib.SMTPException, OSError) as exc:
        error = _send_failed(settings, exc)
    else:
        return _sent(message, draft, refused)
    await confirmations.mark_failed(confirmation_token, error)
    return ToolResult.error(error)


async def _draft(
    ctx: ToolContext,
    settings: EmailSettings,
    to: tuple[str, ...],
    cc: tuple[str, ...],
    bcc: tuple[str, ...],
    subject: str,
    body: str,
    html: str | None,
    attachments: tuple[str, ...],
) -> _Draft:
    if settings.from_address is None:
        raise ToolError(
            "send_email has no sender address: from_address is not set in the email settings. "
            "Set it (e.g. from_address = 'Agent <agent@example.com>') and restart the server."
        )
    sender = _checked_address(settings.from_address, "from_address in the email settings")
    checked = {
        field: [_checked_address(a, field) for a in addresses]
        for field, addresses in (("to", to), ("cc", cc), ("bcc", bcc))
    }
    everyone = [parseaddr(a)[1].lower() for a in [*to, *cc, *bcc]]
    if len(everyone) > MAX_RECIPIENTS:
        raise ToolError(
            f"The message has {len(everyone)} recipients in to, cc and bcc together; send_email "
            f"sends to at most {MAX_RECIPIENTS}. Split the list over several messages."
        )
    repeated = sorted({a for a in everyone if everyone.count(a) > 1})
    if repeated:
        raise ToolError(
            f"{', '.join(repeated)} appear{'s' if len(repeated) == 1 else ''} more than once in "
            "to, cc and bcc; each recipient may be named once. Remove the repeats."
        )
    if "\r" in subject or "\n" in subject:
        raise ToolError(
            f"The subject {subject!r} contains a line break; a subject is one line. Remove "
            "the line break (put longer text in the body)."
        )
    settings.smtp_password("send_email")  # a missing password is found before the preview
    files = [await _attachment(ctx, settings, path) for path in attachments]
    total = sum(a.size for a in files)
    if total > settings.max_total_attachment_bytes:
        raise ToolError(
            f"The attachments add up to {total:,} bytes, over the limit of "
            f"{settings.max_total_attachment_bytes:,} bytes for one message. Attach fewer "
            "files, or share a link to them instead."
        )
    return _Draft(
        sender=sender,
        to=checked["to"],
        cc=checked["cc"],
        bcc=checked["bcc"],
        subject=subject,
        body=body,
        html=html,
        attachments=files,
    )


def _threading(in_reply_to: str | None, references: tuple[str, ...]) -> dict[str, Any]:
    """The threading headers, each checked to be one Message-ID (no header can be smuggled)."""
    for field, value in [("in_reply_to", in_reply_to), *(("references", r) for r in references)]:
        if value is not None and not _MESSAGE_ID.match(value):
            raise ToolError(
                f"{value!r} in {field} is not a Message-ID. Give it as the message's header "
                "shows it, in angle brackets and without spaces, e.g. '<q3@example.com>'."
            )
    return {"in_reply_to": in_reply_to, "references": references}


def _checked_address(text: str, field: str) -> str:
    """`text` as given, if it is one address 'a@b.c' or 'Name <a@b.c>'; ToolError if not."""
    if any(c in text for c in "\r\n\0"):
        raise ToolError(
            f"The address {text!r} in {field} contains a line break or NUL, which no address "
            "has. Give one address per list entry, e.g. 'ana@example.com'."
        )
    name, address = parseaddr(text)
    if not address or not _ADDRESS.match(address):
        raise ToolError(
            f"{text!r} in {field} is not an email address. Give one address per list entry, as "
            "'ana@example.com' or 'Ana Lima <ana@example.com>'."
        )
    if not address.isascii():
        # Plain SMTP carries ASCII addresses only (no SMTPUTF8 here).
        raise ToolError(
            f"The address {address!r} in {field} has characters outside ASCII, which this "
            "server cannot send to. Give the ASCII form of the address (a domain's form starts "
            "with 'xn--', e.g. 'ana@xn--caf-dma.example')."
        )
    if formataddr((name, address)) != text and address != text:
        # parseaddr accepts more than one address or stray text; what we send must be what was
        # given, so refuse anything that does not round-trip.
        raise ToolError(
            f"{text!r} in {field} is not one plain address. Write it as 'ana@example.com' or "
            "'Ana Lima <ana@example.com>', one address per list entry."
        )
    return text


async def _attachment(ctx: ToolContext, settings: EmailSettings, path: str) -> _Attachment:
    def inspect() -> _Attachment:
        with open_workspace(ctx) as root, root.open(path) as found:
            shown = found.shown
            found.regular_file(
                limit=settings.max_attachment_bytes,
                not_regular="The attachment {shown!r} is not a regular file. Attach files, not "
                "directories; zip a directory first if you need to send it.",
                too_big="The attachment {shown!r} has {size:,} bytes, over the limit of "
                "{limit:,} bytes per file. Attach a smaller file, or share a link to it instead.",
            )
            data = found.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        mime_type = mimetypes.guess_type(found.relative.name)[0] or "application/octet-stream"
        return _Attachment(shown, data, len(data), digest, mime_type)

    return await anyio.to_thread.run_sync(inspect)


def _preview(draft: _Draft) -> str:
    lines = [f"From: {draft.sender}", f"To: {', '.join(draft.to)}"]
    if draft.cc:
        lines.append(f"Cc: {', '.join(draft.cc)}")
    if draft.bcc:
        lines.append(
            f"Bcc: {', '.join(draft.bcc)}  (not in the sent headers; these also receive it)"
        )
    lines.append(f"Subject: {draft.subject}")
    if draft.in_reply_to is not None:
        lines.append(f"In-Reply-To: {draft.in_reply_to}")
    if draft.references:
        lines.append(f"References: {' '.join(draft.references)}")
    lines.append("Date, Message-ID: added when it is sent")
    parts = ["text/plain; charset=utf-8"]
    if draft.html is not None:
        parts.append("text/html; charset=utf-8")
    lines.append(f"Body parts: {', '.join(parts)}")
    for a in draft.attachments:
        lines.append(f"Attachment: {a.shown_path} ({a.size:,} bytes, {a.mime_type})")
    lines.append(f"Envelope recipients ({len(draft.recipients)}): {', '.join(draft.recipients)}")
    text = "\n".join(lines) + "\n\n" + draft.body
    if draft.html is not None:
        text += "\n\n--- HTML part ---\n" + draft.html
    return text


def _message(draft: _Draft, settings: EmailSettings) -> EmailMessage:
    message = EmailMessage(policy=SMTP_POLICY)
    message["From"] = draft.sender
    message["To"] = ", ".join(draft.to)
    if draft.cc:
        message["Cc"] = ", ".join(draft.cc)
    message["Subject"] = draft.subject
    message["Date"] = formatdate(localtime=True)
    domain = parseaddr(draft.sender)[1].rsplit("@", 1)[1]
    message["Message-ID"] = make_msgid(domain=domain)
    if draft.in_reply_to is not None:
        message["In-Reply-To"] = draft.in_reply_to
    if draft.references:
        message["References"] = " ".join(draft.references)
    # The text goes as UTF-8 bytes in base64, so it arrives exactly as given: text parts would
    # have their line endings rewritten to CRLF and a final newline added.
    message.set_content(draft.body.encode(), "text", "plain", params={"charset": "utf-8"})
    if draft.html is not None:
        message.add_alternative(draft.html.encode(), "text", "html", params={"charset": "utf-8"})
    for a in draft.attachments:
        maintype, subtype = a.mime_type.split("/", 1)
        name = PurePosixPath(a.shown_path).name
        message.add_attachment(a.data, maintype=maintype, subtype=subtype, filename=name)
    return message


def _deliver(
    message: EmailMessage, draft: _Draft, settings: EmailSettings, password: str | None
) -> dict[str, tuple[int, bytes]]:
    """Hand the message to the server once; the recipients it refused (others were accepted)."""
    smtp: smtplib.SMTP
    if settings.security == "ssl":
        context = ssl.create_default_context()
        smtp = smtplib.SMTP_SSL(
            settings.host, settings.port, timeout=settings.timeout_seconds, context=context
        )
    else:
        smtp = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout_seconds)
    with smtp:
        if settings.security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        if settings.username is not None:
            smtp.login(settings.username, password or "")
        refused = smtp.send_message(
            message, from_addr=parseaddr(draft.sender)[1], to_addrs=draft.recipients
        )
    return {str(k): v for k, v in refused.items()}


def _sent(
    message: EmailMessage, draft: _Draft, refused: dict[str, tuple[int, bytes]]
) -> ToolResult:
    accepted = [r for r in draft.recipients if r not in refused]
    text = (
        f"Sent {draft.subject!r} (Message-ID {message['Message-ID']}) to {len(accepted)} "
        f"recipient{'' if len(accepted) == 1 else 's'}: {', '.join(accepted)}."
    )
    if refused:
        text += (
            " The server refused "
            + ", ".join(
                f"{r} ({code} {reply.decode(errors='replace')})"
                for r, (code, reply) in refused.items()
            )
            + "; they did not get it. Do not resend to the others; send a new message to "
            "these only if it is still needed."
        )
    structured = {
        "sent": True,
        "message_id": str(message["Message-ID"]),
        "accepted": accepted,
        "refused": {
            r: [code, reply.decode(errors="replace")] for r, (code, reply) in refused.items()
        },
    }
    return ToolResult(text, structured=structured)


def _text(reply: bytes | str) -> str:
    return reply.decode(errors="replace") if isinstance(reply, bytes) else reply


def _all_refused(exc: smtplib.SMTPRecipientsRefused) -> str:
    refused = ", ".join(
        f"{r!s} ({code} {reply.decode(errors='replace') if isinstance(reply, bytes) else reply})"
        for r, (code, reply) in exc.recipients.items()
    )
    return (
        f"The SMTP server refused every recipient: {refused}. The message was not delivered to "
        "anyone. Check the addresses, then run the precheck again (call send_email without "
        "confirmation_token) for a new token."
    )


def _send_failed(settings: EmailSettings, exc: smtplib.SMTPException | OSError) -> str:
    where = f"{settings.host}:{settings.port}"
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        cause = "the server refused the login; check username and password_env in the settings"
    elif isinstance(exc, ConnectionRefusedError):
        cause = "the connection was refused; is the SMTP server running on that port?"
    elif isinstance(exc, TimeoutError):
        cause = f"the server did not answer within {settings.timeout_seconds:g} s"
    elif isinstance(exc, smtplib.SMTPResponseException):
        cause = f"the server answered {exc.smtp_code} {_text(exc.smtp_error)}"
    else:
        cause = f"{type(exc).__name__}: {exc}"
    return (
        f"Sending through {where} failed: {cause}. The message may or may not have been "
        "delivered, to some or all recipients, so it was not retried. Check whether it arrived "
        "before sending again; to send it, run the precheck again (call send_email without "
        "confirmation_token) and confirm with the new token."
    )


EMAIL_TOOLS: tuple[Tool, ...] = (send_email,)
