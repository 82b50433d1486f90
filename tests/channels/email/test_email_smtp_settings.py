"""The sending side of `[[channels.email]]`: clear-text SMTP to another machine, an SMTP password
in the file, a sender or recipient that cannot be known, and the defaults that make one account
on one server need nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest
from email_harness import runtime_inbox
from pydantic import ValidationError

from wakeful.channels.email import KIND, EmailChannelSettings
from wakeful.core.channel import ChannelContext
from wakeful.core.records import OutboundMessage
from wakeful.errors import ConfigError
from wakeful.store.sqlite import Store

BASE = {"host": "mail.example.com", "username": "me@example.com", "password_env": "MAIL_PW"}

pytestmark = pytest.mark.anyio


def test_plain_smtp_is_allowed_only_to_this_machine() -> None:
    with pytest.raises(ValidationError) as caught:
        EmailChannelSettings.model_validate({**BASE, "smtp_tls": "plain"})
    said = str(caught.value)
    assert "'mail.example.com'" in said and 'smtp_tls = "implicit" (port 465)' in said

    # IMAP on this machine in clear text does not carry clear text to another SMTP server.
    local = {**BASE, "host": "127.0.0.1", "tls": "plain"}
    with pytest.raises(ValidationError, match=r"not to 'smtp\.example\.com'"):
        EmailChannelSettings.model_validate({**local, "smtp_host": "smtp.example.com"})
    tls = EmailChannelSettings.model_validate(
        {**local, "smtp_host": "smtp.example.com", "smtp_tls": "starttls"}
    )
    assert (tls.smtp_server, tls.smtp_server_port) == ("smtp.example.com", 587)


def test_smtp_defaults_follow_the_imap_account() -> None:
    settings = EmailChannelSettings.model_validate({**BASE, "user_addresses": ["Me@Home.net"]})
    assert settings.smtp_server == "mail.example.com"
    assert settings.smtp_security == "implicit" and settings.smtp_server_port == 465
    assert settings.smtp_login == "me@example.com"
    assert settings.sender() == "me@example.com"
    assert settings.recipient() == "me@home.net"
    ports = {
        mode: EmailChannelSettings.model_validate(
            {**BASE, "host": "127.0.0.1", "smtp_tls": mode}
        ).smtp_server_port
        for mode in ("implicit", "starttls", "plain")
    }
    assert ports == {"implicit": 465, "starttls": 587, "plain": 25}
    assert EmailChannelSettings.model_validate({**BASE, "smtp_port": 2525}).smtp_server_port == 2525


def test_an_smtp_password_in_the_file_is_refused_naming_smtp_password_env() -> None:
    with pytest.raises(ValidationError, match="smtp_password_env"):
        EmailChannelSettings.model_validate({**BASE, "smtp_password": "hunter2"})


def test_the_smtp_password_variable_is_named_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMTP_PW", raising=False)
    settings = EmailChannelSettings.model_validate({**BASE, "smtp_password_env": "SMTP_PW"})
    with pytest.raises(ConfigError, match="SMTP_PW"):
        settings.smtp_password()


@pytest.mark.parametrize(
    "address", ["Me <me@example.com>", "me@example.com\r\nBcc: x@evil.test", "nobody", "a@b c"]
)
def test_from_and_notify_addresses_must_be_one_plain_address(address: str) -> None:
    for key in ("from_address", "notify_address"):
        with pytest.raises(ValidationError, match="not one plain email address"):
            EmailChannelSettings.model_validate({**BASE, key: address})


async def test_a_login_that_is_no_address_needs_from_address_to_send(tmp_path: Path) -> None:
    settings = {**BASE, "username": "secretary", "user_addresses": ["me@home.net"]}
    async with await Store.open(tmp_path / "state.db") as store:
        context = ChannelContext(
            name="email:test",
            inbox=runtime_inbox(store),
            cursors=store.channel_cursors,
            workspace=tmp_path,
        )
        channel = KIND.build(settings, context)
        message = OutboundMessage("msg_1", "main", "2026-12-01T09:00:00Z", "normal", "text", "Hi")
        with pytest.raises(ConfigError) as caught:
            await channel.send_to_user(message)
        assert "from_address" in str(caught.value) and "'secretary'" in str(caught.value)

        nowhere = KIND.build({**BASE}, context)
        with pytest.raises(ConfigError, match="notify_address"):
            await nowhere.send_to_user(message)
