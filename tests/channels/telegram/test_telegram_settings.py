"""`[[channels.telegram]]` settings: a token is never accepted in the file, the Bot API is
reached over HTTPS (plain HTTP only on this machine), and each mistake says how to fix it."""

from __future__ import annotations

from typing import Any

import pytest

from wakeful.channels.registry import ChannelSpec, validated_settings
from wakeful.channels.telegram import KIND, TelegramChannelSettings
from wakeful.errors import UserError

SPEC = ChannelSpec("telegram", "bot", origin="wakeful.toml, [[channels.telegram]] table #1 (bot)")


def settings(**values: Any) -> TelegramChannelSettings:
    result = validated_settings(KIND, {"token_env": "WAKEFUL_TELEGRAM_TOKEN", **values}, SPEC.where)
    assert isinstance(result, TelegramChannelSettings)
    return result


def test_a_token_written_in_the_file_is_refused_with_the_way_out() -> None:
    with pytest.raises(UserError) as caught:
        settings(token="123456:AAE-secret-token-value-xxxxxxxxxxxx")
    message = str(caught.value)
    assert "[[channels.telegram]] table #1" in message
    assert "must not be written in wakeful.toml" in message and "token_env" in message
    assert "AAE-secret" not in message


def test_a_token_written_where_its_variables_name_goes_is_refused() -> None:
    with pytest.raises(UserError, match="looks like a bot token") as caught:
        settings(token_env="123456:AAE-secret-token-value-xxxxxxxxxxxx")
    assert "revoked" in str(caught.value)


def test_a_token_variable_name_must_be_a_name() -> None:
    with pytest.raises(UserError, match="is not an environment variable name"):
        settings(token_env="MY TOKEN")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://api.telegram.org", "clear text"),
        ("ftp://127.0.0.1", "is not a Bot API address"),
        ("https://api.telegram.org/bot123:abc", "'/bot…' path"),
    ],
)
def test_an_api_address_that_would_leak_or_break_the_token_is_refused(
    url: str, problem: str
) -> None:
    with pytest.raises(UserError, match=problem):
        settings(api_url=url)


def test_defaults_work_and_sessions_follow_the_chat() -> None:
    chosen = settings(api_url="http://127.0.0.1:8081/")
    assert chosen.api_url == "http://127.0.0.1:8081"
    assert settings().api_url == "https://api.telegram.org"
    assert chosen.session_for(-100) == "telegram:chat--100"
    assert settings(sessions="one", session="main").session_for(5) == "main"


def test_names_are_not_ids() -> None:
    with pytest.raises(UserError, match="user_ids"):
        settings(user_ids=["@me"])
