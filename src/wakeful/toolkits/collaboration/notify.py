"""`send_im_notification`, `send_email_notification`, `send_slack_message`: notices to approvers
and collaborators, never to the end user.

The chapter draws the line by who is notified, not by the channel: a notice to the user is a
user-communication tool (`send_user_notification`, through the delivery policy); a notice to an
approver or a collaborator is a collaboration tool, and these are. Each address must be on the
allow-list of `[tools.collaboration]` (:class:`~.settings.CollaborationSettings`), so text from
the outside cannot make the agent write to anyone else.

IM goes through the runtime's IM channel (the XMPP channel's `send`, found as
:class:`ImSender` in the services' state); on a worker of a cluster where that channel stands by
(another worker runs it), the notice is handed over to that worker, which sends it, and the tool
says so (:class:`~wakeful.core.channel.HandedOver`). Email goes over SMTP with the
`[tools.email]` server (or the table's own `email`); Slack through an incoming webhook whose URL
is read from an environment variable, as JSON with its markup characters escaped (so a text
cannot ping a whole channel with `<!channel>`).
"""

from __future__ import annotations

import os
import re
import smtplib
import ssl
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import formatdate, make_msgid, parseaddr
from typing import Annotated, Protocol, runtime_checkable

import anyio.to_thread
import httpx2
from pydantic import Field

from ...core.channel import HandedOver
from ...errors import ToolError, UserError
from ...services import settings_of
from ...tools.http import HttpErrors, http_client
from ...tools.spec import Tool, ToolAnnotations, ToolContext, tool
from ..execution.settings import EmailSettings
from .settings import CollaborationSettings

__all__ = [
    "NOTIFY_TOOLS",
    "ImSender",
    "send_email_notification",
    "send_im_notification",
    "send_slack_message",
]

MAX_TEXT_CHARS = 4000
# Control characters other than tab and newline: no IM or mail text needs them, and XML (XMPP)
# cannot carry most of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NOTIFIES = ToolAnnotations(read_only=False, destructive=False, idempotent=False, open_world=True)


@runtime_checkable
class ImSender(Protocol):
    """Sends a text to an IM address: the runtime's IM channel (the XMPP channel's `send`),
    which the runtime puts in `services.state[ImSender]`. It raises HandedOver, saying to whom,
    when it handed the notice to another worker to send."""

    async def send(self, to: str, text: str) -> None: ...


Text = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="The notice, e.g. 'Approval [a3f9] waits for you: send the invoice of "
        "4,200 EUR to ACME?'",
    ),
]


@tool(
    annotations=_NOTIFIES,
    examples=({"to": "ops-lead@example.org", "text": "The nightly import failed twice."},),
)
async def send_im_notification(
    ctx: ToolContext,
    to: Annotated[
        str,
        Field(
            min_length=3,
            max_length=300,
            description="The approver's or collaborator's IM address (a JID on the allow-list), "
            "e.g. 'ops-lead@example.org'.",
        ),
    ],
    text: Text,
) -> str:
    """Send an instant message to an approver or a collaborator.

    Use it to tell a person who decides or helps (not the user) that something needs them.
    Returns "Sent to <address> over IM.", or, where another worker of the cluster runs the IM
    channel, "Handed over to the worker running <channel> (<worker>), which sends it to
    <address> over IM." It cannot reach addresses that are not on the allow-list
    ([tools.collaboration] im_addresses), nor the user (use send_user_notification).
    Cost: about a second; the result is about 40 characters (100 when handed over).
    """
    settings = settings_of(ctx.services, CollaborationSettings)
    address = _allowed(to, settings.im_addresses, "IM", "im_addresses")
    _check_text(text)
    sender = ctx.services.state.get(ImSender)
    if not isinstance(sender, ImSender):
        raise ToolError(
            "No IM channel runs here, so send_im_notification cannot send. Configure an XMPP "
            'channel ([[channels]] kind = "xmpp" in wakeful.toml), or reach the person by '
            "send_email_notification."
        )
    try:
        await sender.send(address, text)
    except HandedOver as exc:
        return str(exc)
    except UserError as exc:
        raise ToolError(f"The message to {address} was not sent: {exc}") from exc
    return f"Sent to {address} over IM."


@tool(
    annotations=_NOTIFIES,
    examples=(
        {
            "to": "approvals@example.com",
            "subject": "Approval waiting: invoice to ACME",
            "text": "Request [a3f9] waits for your answer in the console.",
        },
    ),
)
async def send_email_notification(
    ctx: ToolContext,
    to: Annotated[
        str,
        Field(
            min_length=3,
            max_length=300,
            description="The approver's or collaborator's email address (on the allow-list), "
            "e.g. 'approvals@example.com'.",
        ),
    ],
    subject: Annotated[
        str,
        Field(
            min_length=1,
            max_length=200,
            description="One line, e.g. 'Approval waiting: invoice to ACME'.",
        ),
    ],
    text: Text,
) -> str:
    """Email a notice to an approver or a collaborator.

    Use it for a person who decides or helps (not the user) and is best reached by mail.
    Returns "Sent to <address> by email (Message-ID <id>)." It cannot reach addresses that are
    not on the allow-list ([tools.collaboration] email_addresses), nor the user (use
    send_user_notification), and sends no attachments.
    Cost: a few seconds; the result is about 80 characters.
    """
    settings = settings_of(ctx.services, CollaborationSettings)
    address = _allowed(to, settings.email_addresses, "email", "email_addresses")
    _check_text(text)
    if "\n" in subject or "\r" in subject or _CONTROL.search(subject):
        raise ToolError(
            "The subject must be one line without control characters; put the details in text."
        )
    server = settings.email or settings_of(ctx.services, EmailSettings)
    if server.from_address is None:
        raise ToolError(
            "No sender address is configured, so no email can be sent. Set from_address in "
            "[tools.email] (or [tools.collaboration.email]) of wakeful.toml."
        )
    password = server.smtp_password("send_email_notification")
    message = EmailMessage(policy=SMTP_POLICY)
    message["From"] = server.from_address
    message["To"] = address
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=True)
    message["Message-ID"] = make_msgid(domain=parseaddr(server.from_address)[1].rsplit("@")[-1])
    message["Auto-Submitted"] = "auto-generated"
    # As UTF-8 bytes in base64, so the text arrives exactly as given (no CRLF rewriting).
    message.set_content(text.encode(), "text", "plain", params={"charset": "utf-8"})
    try:
        await anyio.to_thread.run_sync(_smtp_send, message, server, password)
    except (smtplib.SMTPException, OSError) as exc:
        raise ToolError(_smtp_failed(server, address, exc)) from exc
    return f"Sent to {address} by email (Message-ID {message['Message-ID']})."


@tool(
    annotations=_NOTIFIES,
    examples=({"channel": "deploys", "text": "Release 2.4 waits for an approver's go."},),
)
async def send_slack_message(
    ctx: ToolContext,
    channel: Annotated[
        str,
        Field(
            min_length=1,
            max_length=80,
            description="The Slack channel as configured in [tools.collaboration.slack], "
            "e.g. 'deploys'.",
        ),
    ],
    text: Text,
) -> str:
    """Post a message to a team's Slack channel (approvers, collaborators).

    Use it to tell a team that something needs them. The text is posted as plain text: Slack
    markup such as <!channel> is shown, not acted on. Returns "Posted to Slack channel
    <name>." It cannot post to channels that are not configured in [tools.collaboration.slack],
    nor reach the user (use send_user_notification).
    Cost: about a second; the result is about 40 characters.
    """
    settings = settings_of(ctx.services, CollaborationSettings)
    hook = settings.slack.get(channel)
    if hook is None:
        known = ", ".join(sorted(settings.slack)) or "none"
        raise ToolError(
            f"No Slack channel {channel!r} is configured; the configured ones are: {known}. "
            "Add it as [tools.collaboration.slack." + channel + "] with webhook_url_env in "
            "wakeful.toml, or use one of those."
        )
    _check_text(text)
    url = os.environ.get(hook.webhook_url_env, "").strip()
    if not url:
        raise ToolError(
            f"The webhook URL of Slack channel {channel!r} is read from the environment "
            f"variable {hook.webhook_url_env}, which is not set. Set it where the runtime runs "
            "(the incoming-webhook URL Slack gave you), then call again."
        )
    errors = HttpErrors(
        target=f"the Slack webhook of channel {channel!r}",
        timeout_seconds=hook.timeout_seconds,
        check=f"Check the URL in {hook.webhook_url_env} and that the webhook still exists.",
        changes=True,
        retry="Try again in a minute; if it keeps failing, tell the user that Slack is down.",
    )
    async with http_client(ctx.services, timeout_seconds=hook.timeout_seconds) as client:
        try:
            response = await client.post(url, json={"text": _slack_escaped(text)})
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise errors.for_exception(exc) from exc
    if response.status_code >= 300:
        raise errors.for_status(response)
    return f"Posted to Slack channel {channel}."


def _allowed(address: str, allowed: tuple[str, ...], medium: str, setting: str) -> str:
    """`address` when it is on the allow-list (case aside); else the refusal with the fix."""
    given = address.strip()
    bare = parseaddr(given)[1] if "<" in given else given
    if bare.lower() in allowed:
        return bare
    listed = ", ".join(allowed) or "none"
    raise ToolError(
        f"{address!r} is not an approver or collaborator address for {medium}; the allowed "
        f"ones are: {listed}. This tool reaches approvers and collaborators only: to reach the "
        "user, use send_user_notification; to allow this person, add the address to "
        f"{setting} in [tools.collaboration] of wakeful.toml."
    )


def _check_text(text: str) -> None:
    if _CONTROL.search(text):
        raise ToolError(
            "The text holds control characters (other than tab and newline); remove them and "
            "call again."
        )


def _slack_escaped(text: str) -> str:
    """Text as Slack shows it literally: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _smtp_send(message: EmailMessage, server: EmailSettings, password: str | None) -> None:
    smtp: smtplib.SMTP
    if server.security == "ssl":
        smtp = smtplib.SMTP_SSL(
            server.host,
            server.port,
            timeout=server.timeout_seconds,
            context=ssl.create_default_context(),
        )
    else:
        smtp = smtplib.SMTP(server.host, server.port, timeout=server.timeout_seconds)
    with smtp:
        if server.security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        if server.username is not None:
            smtp.login(server.username, password or "")
        smtp.send_message(message)


def _smtp_failed(server: EmailSettings, address: str, exc: smtplib.SMTPException | OSError) -> str:
    where = f"{server.host}:{server.port}"
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        cause = f"the server refused the recipient {address}"
    elif isinstance(exc, smtplib.SMTPAuthenticationError):
        cause = "the server refused the login; check username and password_env"
    elif isinstance(exc, ConnectionRefusedError):
        cause = "the connection was refused (no SMTP server listens there)"
    elif isinstance(exc, TimeoutError):
        cause = f"the server did not answer within {server.timeout_seconds:g} s"
    else:
        cause = f"{type(exc).__name__}: {exc}"
    return (
        f"The email to {address} through {where} failed: {cause}. It may not have been "
        "delivered; check the mail settings, or reach the person another way."
    )


NOTIFY_TOOLS: tuple[Tool, ...] = (
    send_im_notification,
    send_email_notification,
    send_slack_message,
)
