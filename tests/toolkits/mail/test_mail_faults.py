"""Bad input and a misbehaving world: each mail tool says what is wrong and what to do, and
changes nothing. The server is a real Dovecot (or, for the network faults, a real socket)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from mail_fixtures import (
    PASSWORD_ENV,
    deliver,
    doveadm,
    mail_settings,
    mailbox_state,
    message,
    stop,
)

from servers.dovecot import DovecotServer
from tool_services import call, refused
from wakeful.services import Services
from wakeful.toolkits.mail.filing import archive_mail, draft_reply, flag_mail, move_mail
from wakeful.toolkits.mail.reading import read_mail, search_mail
from wakeful.toolkits.mail.settings import MailSettings
from wakeful.tools.spec import Tool

pytestmark = pytest.mark.anyio

UID_TOOLS: list[tuple[Tool, dict[str, Any]]] = [
    (read_mail, {}),
    (draft_reply, {"body": "Thanks."}),
    (move_mail, {"to_mailbox": "Archive"}),
    (archive_mail, {}),
    (flag_mail, {"flags": ["\\Flagged"]}),
]
EVERY_TOOL: list[tuple[Tool, dict[str, Any]]] = [(search_mail, {}), *UID_TOOLS]


def arguments(tool: Tool, extra: dict[str, Any]) -> dict[str, Any]:
    return extra if tool is search_mail else {"uid": 1, **extra}


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says anything."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


@pytest.mark.parametrize(("tool", "extra"), UID_TOOLS, ids=lambda t: getattr(t, "name", ""))
async def test_an_unknown_uid_is_named_with_the_way_out(
    mail: Services, dovecot: DovecotServer, tool: Tool, extra: dict[str, Any]
) -> None:
    deliver(dovecot, message())
    text = await refused(mail, tool, uid=99, **extra)
    assert "There is no message with uid 99 in 'INBOX'" in text
    assert "Find it with search_mail" in text
    assert len(mailbox_state(dovecot)) == 1
    assert mailbox_state(dovecot, "Drafts") == []


@pytest.mark.parametrize(("tool", "extra"), EVERY_TOOL, ids=lambda t: getattr(t, "name", ""))
async def test_a_missing_mailbox_is_named_with_the_ones_that_exist(
    mail: Services, dovecot: DovecotServer, tool: Tool, extra: dict[str, Any]
) -> None:
    text = await refused(mail, tool, **arguments(tool, extra), mailbox="Inbox/Projekte")
    assert "The mailbox 'Inbox/Projekte' does not exist" in text
    assert "'INBOX', " in text or "'INBOX'." in text
    assert "'Drafts'" in text


async def test_a_renumbered_mailbox_refuses_the_old_uids(
    mail: Services, dovecot: DovecotServer
) -> None:
    doveadm(dovecot, "mailbox", "create", "-u", dovecot.user, "Projects")
    deliver(dovecot, message("Old numbering"), mailbox="Projects")
    listed = await call(mail, search_mail, mailbox="Projects")
    old = listed.structured["uidvalidity"]
    doveadm(
        dovecot, "mailbox", "update", "-u", dovecot.user, "--uid-validity", str(old + 7), "Projects"
    )

    for tool, extra in UID_TOOLS:
        text = await refused(mail, tool, uid=1, mailbox="Projects", uidvalidity=old, **extra)
        assert f"its UIDVALIDITY is now {old + 7}, not {old}" in text, tool.name
        assert "Find the message again with search_mail" in text
    assert [m["subject"] for m in mailbox_state(dovecot, "Projects")] == ["Old numbering"]
    current = await call(mail, read_mail, uid=1, mailbox="Projects", uidvalidity=old + 7)
    assert "Old numbering" in current.content


async def test_a_server_that_is_down_is_named(mail: Services, dovecot: DovecotServer) -> None:
    stop(dovecot)
    for tool, extra in EVERY_TOOL:
        text = await refused(mail, tool, **arguments(tool, extra))
        assert f"The IMAP server 127.0.0.1:{dovecot.port} refused the connection" in text


async def test_a_server_that_never_greets_times_out(mail: Services, dovecot: DovecotServer) -> None:
    with silent_server() as port:
        mail.settings[MailSettings] = mail_settings(dovecot, port=port, timeout_seconds=0.3)
        text = await refused(mail, search_mail)
    assert f"The IMAP server 127.0.0.1:{port} did not greet within 0.3 s" in text


async def test_a_wrong_password_is_refused_once_and_named(
    mail: Services, dovecot: DovecotServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "wrong horse")
    text = await refused(mail, search_mail)
    assert "refused the login of 'secretary'" in text
    assert f"password in the environment variable {PASSWORD_ENV!r}" in text
    # One attempt, no retry: repeated failures are what gets an account locked. (Dovecot logs
    # the attempt when the connection has closed, a moment after the tool returned.)
    for _ in range(200):
        if "auth failed" in dovecot.log():
            break
        await anyio.sleep(0.05)
    assert dovecot.log().count("auth failed, 1 attempts") == 1


async def test_missing_account_settings_say_what_to_set(
    mail: Services, dovecot: DovecotServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    mail.settings[MailSettings] = MailSettings()
    assert "username is not set in the [tools.mail] settings" in await refused(mail, search_mail)
    mail.settings[MailSettings] = mail_settings(dovecot, password_env=None)
    assert "password_env is not set" in await refused(mail, search_mail)
    monkeypatch.delenv(PASSWORD_ENV)
    mail.settings[MailSettings] = mail_settings(dovecot)
    text = await refused(mail, search_mail)
    assert f"environment variable {PASSWORD_ENV!r}, which is not set" in text


async def test_tls_settings_that_do_not_fit_the_server_are_named(
    mail: Services, dovecot: DovecotServer
) -> None:
    mail.settings[MailSettings] = mail_settings(dovecot, security="starttls")
    assert "does not offer STARTTLS" in await refused(mail, search_mail)
    mail.settings[MailSettings] = mail_settings(dovecot, security="ssl")
    text = await refused(mail, search_mail)
    assert f"TLS with the IMAP server 127.0.0.1:{dovecot.port} failed" in text
    assert "set security = 'starttls'" in text


async def test_a_message_over_the_size_limit_is_not_fetched(
    mail: Services, dovecot: DovecotServer
) -> None:
    deliver(dovecot, message("Big", "x" * 5000))
    mail.settings[MailSettings] = mail_settings(dovecot, max_message_bytes=2048)
    text = await refused(mail, read_mail, uid=1)
    assert "over the 2,048 bytes read_mail fetches (max_message_bytes in [tools.mail])" in text


async def test_a_draft_needs_a_sender(mail: Services, dovecot: DovecotServer) -> None:
    deliver(dovecot, message())
    mail.settings[MailSettings] = mail_settings(dovecot, from_address=None)
    text = await refused(mail, draft_reply, uid=1, body="Hi")
    assert "from_address is set neither in [tools.mail] nor in [tools.email]" in text
    assert mailbox_state(dovecot, "Drafts") == []
