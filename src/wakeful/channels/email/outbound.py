"""Messages to the user by email: the channel's side of :class:`wakeful.core.channel.UserReach`.

:meth:`EmailOutbound.send_to_user` mails one stored message over SMTP, as the answer in the
user's mail conversation of its session when there is one (see :mod:`.conversations`), else to
`notify_address`: the text byte for byte (UTF-8 in base64, so no line ending is rewritten), a
card as text with an HTML alternative whose buttons are reply links (an email cannot press a
button, and carries no script), the attachments as files. The copy's Message-ID is its id on
this channel; it is recorded before the mail leaves (see :mod:`.copies`) so the copy, should it
arrive in the mailbox the channel watches, is recognised and never wakes the agent. Headers say
what the mail is: `Auto-Submitted: auto-generated` (RFC 3834: no vacation replies to it) and
`X-Wakeful-Message: <msg id>`. A card's reply links carry the copy's Message-ID (RFC 6068
`In-Reply-To`), so the user's answer naming a button comes back to the channel as that button's
press (see :mod:`.imap`).

:meth:`EmailOutbound.show_read` sets `\\Seen` on the copy in the watched mailbox, on a short
connection of its own (the channel's own connection is waiting in IDLE).
"""

from __future__ import annotations

import email.utils
import html as html_text
import logging
import smtplib
import ssl
from collections.abc import Mapping
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import anyio.to_thread
from pydantic import ValidationError

from ...core.channel import ChannelContext
from ...core.records import OutboundMessage
from ...errors import WakefulError
from ...toolkits.comms.cards import Card, card_html, card_text
from .connection import ImapConnection, ImapUnavailable, tls_context
from .conversations import Conversation, Conversations
from .copies import SentCopies
from .settings import EmailChannelSettings

__all__ = ["EmailOutbound", "EmailSendFailed", "copy_mail", "subject_of"]

log = logging.getLogger(__name__)

MAX_SUBJECT_CHARS: Final = 78
WAKEFUL_HEADER: Final = "X-Wakeful-Message"
SEEN: Final = "\\Seen"


class EmailSendFailed(WakefulError):
    """Raised by :meth:`EmailOutbound.send_to_user`: the SMTP server did not take the message
    (or could not be reached); the message names the server and what to fix."""


class EmailOutbound:
    """Sending to the user and marking copies read, for one email channel."""

    def __init__(
        self,
        settings: EmailChannelSettings,
        context: ChannelContext,
        copies: SentCopies,
        conversations: Conversations,
    ) -> None:
        self._settings = settings
        self._context = context
        self._copies = copies
        self._conversations = conversations

    async def send_to_user(self, message: OutboundMessage) -> str:
        """Mail `message` to the user; its Message-ID. ConfigError when the settings name no
        sender or recipient, :class:`EmailSendFailed` when the server did not take it."""
        settings = self._settings
        sender = settings.sender()
        conversation = await self._conversations.latest(message.session)
        if conversation is not None and conversation.address in settings.user_addresses:
            recipient = conversation.address
        else:
            conversation, recipient = None, settings.recipient()
        context = tls_context(settings, settings.smtp_security)
        copy_id = email.utils.make_msgid(domain=sender.rpartition("@")[2])
        mail = await anyio.to_thread.run_sync(
            lambda: copy_mail(
                message,
                sender=sender,
                recipient=recipient,
                copy_id=copy_id,
                conversation=conversation,
            )
        )
        card = _card(message)
        if message.card is not None and card is None:
            # Not a card this version can render (another sender's): its text still goes.
            log.warning("%s: %s has a card that is not valid", self._context.name, message.id)
        actions = tuple((a.id, a.label) for a in card.actions) if card is not None else ()
        # Recorded before it leaves, and kept when the send fails: a server that dropped the
        # connection after taking the mail may deliver it all the same.
        await self._copies.add(copy_id, message.id, session=message.session, actions=actions)
        try:
            await anyio.to_thread.run_sync(
                lambda: _send(settings, mail, sender, recipient, context)
            )
        except (smtplib.SMTPException, OSError) as exc:
            raise _send_failed(settings, recipient, sender, exc) from exc
        return copy_id

    async def show_read(self, message: OutboundMessage, copy_id: str) -> bool:
        """Set `\\Seen` on the copy in the watched mailbox; False when it is not there (the
        user's address is another mailbox, or the copy was deleted) or the server cannot be
        reached just now (logged)."""
        settings = self._settings
        try:
            async with ImapConnection.open(
                settings, settings.password(), tls_context(settings)
            ) as connection:
                await connection.select(settings.mailbox)
                uids = await connection.uids_with_message_id(copy_id)
                await connection.mark_seen(uids)
        except ImapUnavailable as exc:
            log.warning(
                "%s: could not mark the copy of %s read (%s)", self._context.name, message.id, exc
            )
            return False
        if uids:
            await self._copies.mark_read({copy_id})
        return bool(uids)


def subject_of(message: OutboundMessage) -> str:
    """The mail's subject: a notification's or a card's title, else the text's first line, cut
    to one short line."""
    title = message.title
    if title is None and message.card is not None:
        title = str(message.card.get("title") or "") or None
    line = " ".join((title or message.first_line or f"Message {message.id}").split())
    if len(line) > MAX_SUBJECT_CHARS:
        line = line[: MAX_SUBJECT_CHARS - 1].rstrip() + "…"
    return line


def copy_mail(
    message: OutboundMessage,
    *,
    sender: str,
    recipient: str,
    copy_id: str,
    conversation: Conversation | None = None,
) -> EmailMessage:
    """The mail carrying `message`, threaded under the user's mail of `conversation` if given;
    blocking (it reads the attachments)."""
    mail = EmailMessage(policy=SMTP_POLICY)
    subject = subject_of(message)
    if conversation is not None and message.title is None and message.card is None:
        subject = conversation.reply_subject
    mail["From"] = sender
    mail["To"] = recipient
    mail["Subject"] = subject
    mail["Date"] = email.utils.formatdate(localtime=True)
    mail["Message-ID"] = copy_id
    if conversation is not None:
        mail["In-Reply-To"] = conversation.message_id
        mail["References"] = conversation.references
    mail["Auto-Submitted"] = "auto-generated"
    mail[WAKEFUL_HEADER] = message.id
    if message.urgency in ("high", "urgent"):
        mail["Importance"] = "high"
    card = _card(message)
    if card is None:
        # Bytes in base64 arrive exactly as given: a text part would have its line endings
        # rewritten to CRLF and a final newline added.
        mail.set_content(message.text.encode(), "text", "plain", params={"charset": "utf-8"})
    else:
        text = card_text(card)
        if card.actions:
            labels = ", ".join(action.label for action in card.actions)
            text += f"\n\nTo choose, reply to this mail with one of: {labels}."
        mail.set_content(text.encode(), "text", "plain", params={"charset": "utf-8"})
        page = _card_page(card, message.id, reply=(sender, subject, copy_id))
        mail.add_alternative(page.encode(), "text", "html", params={"charset": "utf-8"})
    for attachment in message.attachments:
        try:
            data = Path(attachment.path).read_bytes()
        except OSError as exc:
            raise EmailSendFailed(
                f"The attachment {attachment.name!r} of message {message.id} could not be read "
                f"from {attachment.path} ({exc.strerror or exc}): it was moved or deleted after "
                "the message was written. Send the message again with the file where it is now."
            ) from exc
        maintype, _, subtype = attachment.type.partition("/")
        if not maintype or not subtype:
            maintype, subtype = "application", "octet-stream"
        mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=attachment.name)
    return mail


def _card(message: OutboundMessage) -> Card | None:
    if message.card is None:
        return None
    try:
        return Card.model_validate(message.card)
    except ValidationError:
        return None


def _card_page(card: Card, card_id: str, *, reply: tuple[str, str, str]) -> str:
    """The card as an HTML mail: every value escaped, no script, no remote load; buttons are
    links that start a reply naming the choice (to the sender, with the subject and the copy's
    Message-ID of `reply`), and a generated page is only mentioned."""
    shown = card.model_copy(update={"actions": [], "html": None})
    e = html_text.escape
    parts = ['<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>']
    parts.append(card_html(shown, card_id=card_id))
    if card.html is not None:
        parts.append("<p><em>This card has a page: open it in the web console.</em></p>")
    if card.actions:
        links = "".join(
            f'<li><a href="{e(_mailto(*reply, action.label))}">{e(action.label)}</a></li>'
            for action in card.actions
        )
        parts.append(
            f'<p>To choose, reply to this mail with one of:</p><ul class="actions">{links}</ul>'
        )
    parts.append("</body></html>")
    return "".join(parts)


def _mailto(address: str, subject: str, in_reply_to: str, body: str) -> str:
    """A link that starts the reply (RFC 6068: In-Reply-To threads it to the copy, so the
    channel knows which card it answers)."""
    fields = {"subject": f"Re: {subject}", "In-Reply-To": in_reply_to, "body": body}
    query = "&".join(f"{name}={quote(value, safe='')}" for name, value in fields.items())
    return f"mailto:{quote(address, safe='@')}?{query}"


class _StartTlsMissing(smtplib.SMTPException):
    """The server offers no STARTTLS, so the login and the mail would go in clear text."""


def _send(
    settings: EmailChannelSettings,
    mail: EmailMessage,
    sender: str,
    recipient: str,
    context: ssl.SSLContext | None,
) -> None:
    """Hand the mail to the SMTP server once (blocking), logging in when it offers AUTH."""
    host, port = settings.smtp_server, settings.smtp_server_port
    smtp: smtplib.SMTP
    if settings.smtp_security == "implicit":
        smtp = smtplib.SMTP_SSL(host, port, timeout=settings.timeout_seconds, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=settings.timeout_seconds)
    with smtp:
        smtp.ehlo()
        if settings.smtp_security == "starttls":
            if not smtp.has_extn("starttls"):
                raise _StartTlsMissing("no STARTTLS")
            smtp.starttls(context=context)
            smtp.ehlo()
        if smtp.has_extn("auth"):
            smtp.login(settings.smtp_login, settings.smtp_password())
        smtp.send_message(mail, from_addr=sender, to_addrs=[recipient])


def _send_failed(
    settings: EmailChannelSettings,
    recipient: str,
    sender: str,
    exc: smtplib.SMTPException | OSError,
) -> EmailSendFailed:
    """The error for a send that failed: the server, what it said, and what to fix."""
    where = f"{settings.smtp_server}:{settings.smtp_server_port}"
    mode = settings.smtp_security
    ports = "465 for implicit TLS, 587 for STARTTLS"
    if isinstance(exc, _StartTlsMissing):
        cause = (
            "it does not offer STARTTLS, so the login would go in clear text; "
            'use smtp_tls = "implicit" (port 465), or the server\'s submission port'
        )
    elif isinstance(exc, smtplib.SMTPAuthenticationError):
        variable = settings.smtp_password_env or settings.password_env
        cause = (
            f"it refused the login of {settings.smtp_login!r} ({_said(exc)}); check "
            f"smtp_username and the password in ${variable}"
        )
    elif isinstance(exc, smtplib.SMTPRecipientsRefused):
        cause = (
            f"it refused the recipient {recipient} ({_refusals(exc.recipients)}); check "
            "notify_address"
        )
    elif isinstance(exc, smtplib.SMTPSenderRefused):
        cause = (
            f"it refused the sender {sender} ({_said(exc)}); check from_address (many "
            "servers take only the account's own address)"
        )
    elif isinstance(exc, smtplib.SMTPConnectError):
        cause = (
            f"what answered there is no SMTP server ({_said(exc)}); check smtp_host and "
            f"smtp_port ({ports})"
        )
    elif isinstance(exc, smtplib.SMTPResponseException):
        cause = f"it answered {_said(exc)}"
    elif isinstance(exc, ConnectionRefusedError):
        cause = (
            f"the connection was refused; check smtp_host and smtp_port ({ports}; is an SMTP "
            "server listening there?)"
        )
    elif isinstance(exc, ssl.SSLCertVerificationError):
        cause = (
            f"its certificate was not trusted ({exc.verify_message}); if the server's "
            "certificate is its own (self-signed), set tls_ca_file to the CA that signed it"
        )
    elif isinstance(exc, ssl.SSLError):
        cause = (
            f'the TLS handshake failed ({exc.reason or exc}); smtp_tls = "{mode}" may not be '
            f"what that port speaks ({ports})"
        )
    elif isinstance(exc, TimeoutError):
        cause = (
            f"it did not answer within {settings.timeout_seconds:g} s; check smtp_port and "
            f'smtp_tls ("{mode}"; {ports})'
        )
    elif isinstance(exc, smtplib.SMTPServerDisconnected):
        cause = (
            f'it closed the connection ({exc}); smtp_tls = "{mode}" may not be what that port '
            f"speaks ({ports})"
        )
    else:
        cause = f"{type(exc).__name__}: {exc}"
    return EmailSendFailed(f"The SMTP server {where} did not take the message: {cause}.")


def _said(exc: Any) -> str:
    reply = exc.smtp_error
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return f"{exc.smtp_code} {' '.join(text.split())}"


def _refusals(recipients: Mapping[str, tuple[int, bytes]]) -> str:
    said = []
    for code, reply in recipients.values():
        text = reply.decode(errors="replace") if isinstance(reply, bytes) else reply
        said.append(f"{code} {' '.join(text.split())}")
    return "; ".join(said)
