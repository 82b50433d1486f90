"""send_email's threading headers: a reply drafted from a real message in Dovecot is sent over
a real SMTP server (aiosmtpd) with In-Reply-To and References, after the same precheck."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage

import pytest
from mail_fixtures import deliver, message
from world_servers import smtp_server

from servers.dovecot import DovecotServer
from tool_services import call, refused
from wakeful.services import Services
from wakeful.toolkits.execution.email import send_email
from wakeful.toolkits.execution.settings import EmailSettings
from wakeful.toolkits.mail.filing import draft_reply
from wakeful.tools.lint import lint_tool

pytestmark = pytest.mark.anyio


def smtp_settings(port: int) -> EmailSettings:
    return EmailSettings(
        host="127.0.0.1",
        port=port,
        security="none",
        from_address="Secretary <secretary@example.com>",
        timeout_seconds=5,
    )


def test_send_email_still_meets_the_description_standard() -> None:
    assert lint_tool(send_email) == []


async def test_a_drafted_reply_is_sent_in_its_thread(
    mail: Services, dovecot: DovecotServer
) -> None:
    deliver(dovecot, message("Offsite", message_id="<m2@example.com>", References="<m1@x.org>"))
    draft = await call(mail, draft_reply, uid=1, body="Count me in.")
    reply = {
        "to": draft.structured["to"],
        "subject": draft.structured["subject"],
        "body": "Count me in.",
        "in_reply_to": draft.structured["in_reply_to"],
        "references": draft.structured["references"],
    }
    with smtp_server() as (port, received):
        mail.settings[EmailSettings] = smtp_settings(port)
        preview = await call(mail, send_email, **reply)
        assert "In-Reply-To: <m2@example.com>" in preview.content
        assert "References: <m1@x.org> <m2@example.com>" in preview.content
        token = preview.structured["confirmation_token"]
        changed = reply | {"references": ["<m2@example.com>"]}
        refusal = await refused(mail, send_email, **changed, confirmation_token=token)
        assert "The arguments differ from the precheck's in references" in refusal
        assert received == []
        sent = await call(mail, send_email, **reply, confirmation_token=token)
    assert not sent.is_error, sent.content
    assert len(received) == 1
    got = email.message_from_bytes(received[0].data, policy=email.policy.default)
    assert isinstance(got, EmailMessage)
    assert got["In-Reply-To"] == "<m2@example.com>"
    assert got["References"] == "<m1@x.org> <m2@example.com>"
    assert got["Subject"] == "Re: Offsite"


async def test_threading_headers_cannot_carry_other_headers(mail: Services) -> None:
    """Attack: a Message-ID with a line break would add a header of the model's choosing."""
    with smtp_server() as (port, received):
        mail.settings[EmailSettings] = smtp_settings(port)
        base = {"to": ["ana@example.com"], "subject": "Re: x", "body": "y"}
        for bad in ("<a@b>\r\nBcc: eve@evil.example", "not-an-id", "<a b@c>", "<a@b"):
            text = await refused(mail, send_email, **base, in_reply_to=bad)
            assert "is not a Message-ID" in text
            text = await refused(mail, send_email, **base, references=["<ok@x.org>", bad])
            assert "in references is not a Message-ID" in text
    assert received == []
