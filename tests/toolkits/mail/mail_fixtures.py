"""Messages for the mail tools' tests, built with the standard library as a sender's program
would, and a way to see a mailbox as the server holds it (doveadm, not our client)."""

from __future__ import annotations

import subprocess
import time
from email.message import EmailMessage
from email.policy import SMTP
from typing import Any

from servers.dovecot import DovecotServer
from wakeful.toolkits.mail.settings import MailSettings

PASSWORD_ENV = "WAKEFUL_TEST_IMAP_PASSWORD"


def mail_settings(server: DovecotServer, **changes: Any) -> MailSettings:
    values: dict[str, Any] = {
        "host": server.host,
        "port": server.port,
        "security": "none",
        "username": server.user,
        "password_env": PASSWORD_ENV,
        "from_address": "Secretary <secretary@example.com>",
        "timeout_seconds": 10,
    }
    return MailSettings(**(values | changes))


TEMPORARY_FAILURE = 75
"""doveadm's exit status when the server's auth process is not ready yet (just after start)."""


def message(
    subject: str = "Quarterly numbers",
    body: str = "Hello,\nthe numbers are attached.\n",
    *,
    sender: str = "Ana Lima <ana@example.com>",
    to: str = "Secretary <secretary@example.com>",
    message_id: str | None = "<q3@example.com>",
    html: str | None = None,
    attachments: tuple[tuple[str, str, bytes], ...] = (),
    **headers: str,
) -> bytes:
    """An RFC 5322 message; `attachments` are (file name, MIME type, bytes)."""
    built = EmailMessage(policy=SMTP)
    built["From"] = sender
    built["To"] = to
    built["Subject"] = subject
    built["Date"] = "Tue, 01 Dec 2026 09:30:00 +0000"
    if message_id:
        built["Message-ID"] = message_id
    for name, value in headers.items():
        built[name.replace("_", "-")] = value
    built.set_content(body)
    if html is not None:
        built.add_alternative(html, subtype="html")
    for name, mime_type, data in attachments:
        maintype, subtype = mime_type.split("/")
        built.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return built.as_bytes()


def stop(server: DovecotServer) -> None:
    """Stop the server and close the stderr pipe `DovecotServer.stop` leaves open."""
    process = server.process
    server.stop()
    if process is not None and process.stderr is not None:
        process.stderr.close()


def doveadm(server: DovecotServer, *args: str) -> str:
    """`server.doveadm`, tried again for up to 5 s while it fails temporarily (status 75)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            return server.doveadm(*args)
        except subprocess.CalledProcessError as exc:
            if exc.returncode != TEMPORARY_FAILURE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def deliver(server: DovecotServer, raw: bytes, mailbox: str = "INBOX") -> None:
    """`server.deliver`, tried again while doveadm fails temporarily (status 75)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            server.deliver(raw, mailbox)
            return
        except subprocess.CalledProcessError as exc:
            if exc.returncode != TEMPORARY_FAILURE or time.monotonic() > deadline:
                raise AssertionError(
                    f"doveadm save failed: {exc.stderr!r}\n{server.log()}"
                ) from exc
            time.sleep(0.1)


def mailbox_state(server: DovecotServer, mailbox: str = "INBOX") -> list[dict[str, Any]]:
    """Each message of `mailbox` as the server holds it: uid, flags, subject."""
    out = doveadm(
        server, "-f", "tab", "fetch", "-u", server.user, "uid flags hdr.subject", "mailbox", mailbox
    )
    rows = [line.split("\t") for line in out.splitlines()[1:] if line]
    return [{"uid": int(r[0]), "flags": r[1].split(), "subject": r[2]} for r in rows]
