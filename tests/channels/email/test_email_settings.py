"""`[[channels.email]]` settings: a password in the file, clear text to another machine and a
missing password variable are refused with the way out."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from wakeful.channels.email import KIND, EmailChannelSettings
from wakeful.errors import ConfigError

BASE = {"host": "imap.example.com", "username": "me@example.com", "password_env": "MAIL_PW"}


def test_a_password_written_in_the_file_is_refused_naming_password_env() -> None:
    with pytest.raises(ValidationError) as caught:
        EmailChannelSettings.model_validate({**BASE, "password": "hunter2"})
    message = str(caught.value)
    assert "must not be written in wakeful.toml" in message
    assert "password_env" in message
    assert "hunter2" not in message.split("input_value")[0]


def test_plain_text_imap_is_allowed_only_to_this_machine() -> None:
    with pytest.raises(ValidationError, match='tls = "implicit"'):
        EmailChannelSettings.model_validate({**BASE, "tls": "plain"})
    local = EmailChannelSettings.model_validate({**BASE, "host": "127.0.0.1", "tls": "plain"})
    assert local.imap_port == 143


def test_ports_default_by_tls_mode() -> None:
    assert EmailChannelSettings.model_validate(BASE).imap_port == 993
    assert EmailChannelSettings.model_validate({**BASE, "tls": "starttls"}).imap_port == 143
    assert EmailChannelSettings.model_validate({**BASE, "port": 1993}).imap_port == 1993


def test_an_unset_password_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAIL_PW", raising=False)
    settings = EmailChannelSettings.model_validate(BASE)
    with pytest.raises(ConfigError, match="MAIL_PW, which is not set"):
        settings.password()
    monkeypatch.setenv("MAIL_PW", "s3cret")
    assert settings.password() == "s3cret"


def test_idle_renewal_must_stay_under_29_minutes() -> None:
    with pytest.raises(ValidationError, match="idle_renew_seconds"):
        EmailChannelSettings.model_validate({**BASE, "idle_renew_seconds": 30 * 60})


def test_contacts_come_from_the_list_and_the_file(tmp_path: Path) -> None:
    book = tmp_path / "contacts.txt"
    book.write_text("# colleagues\nBob@Example.com\n@partner.org  # the whole domain\n\n")
    settings = EmailChannelSettings.model_validate(
        {**BASE, "contacts": ["Carol@x.org"], "contacts_file": str(book)}
    )
    assert settings.contact_entries() == {"carol@x.org", "bob@example.com", "@partner.org"}


def test_an_unreadable_contacts_file_is_named(tmp_path: Path) -> None:
    settings = EmailChannelSettings.model_validate(
        {**BASE, "contacts_file": str(tmp_path / "missing.txt")}
    )
    with pytest.raises(ConfigError, match=r"missing\.txt"):
        settings.contact_entries()


def test_the_kind_validates_settings_for_the_registry() -> None:
    assert KIND.kind == "email"
    assert KIND.settings_model is EmailChannelSettings
