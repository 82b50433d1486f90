"""What a Telegram channel reads, as one `[[channels.telegram]]` table of wakeful.toml (or the
arguments of `connect_channel`): the bot, who the user and their contacts are, which chats count,
and which session each chat goes to.

The token is never in the file: `token_env` names the environment variable that holds it, and a
`token` key (or a token written where the variable's name goes) is refused with that advice. The
Bot API is reached over HTTPS; plain HTTP only on this machine (a local Bot API server, a test).
"""

from __future__ import annotations

import os
import re
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...env_secrets import refuse_inline_secret
from ...errors import ConfigError

__all__ = ["DEFAULT_API_URL", "SessionMapping", "TelegramChannelSettings"]

DEFAULT_API_URL: Final = "https://api.telegram.org"
SessionMapping = Literal["per_chat", "one"]

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
# What a bot token looks like ("123456:ABC-DEF…"), to catch one written where its variable's
# name belongs.
_TOKEN_SHAPE: Final = re.compile(r"\d+:[A-Za-z0-9_-]{20,}")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TelegramChannelSettings(BaseModel):
    """One Telegram bot whose updates are followed by long polling; see the module docs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_env: str = Field(min_length=1, max_length=200)
    """The NAME of the environment variable that holds the bot token (never the token)."""

    api_url: str = DEFAULT_API_URL
    """The Bot API server: Telegram's, or a local Bot API server."""

    user_ids: tuple[int, ...] = ()
    """The user's own Telegram user ids: what they write is user input. Ids, never names or
    usernames, which anyone can choose."""

    contacts: tuple[int, ...] = ()
    """Telegram user ids of the user's contacts; anyone else is a stranger."""

    chats: tuple[int, ...] = ()
    """The chats whose messages wake the agent (empty: every chat the bot is in). Messages in
    other chats are stored as filtered, never handed to the agent."""

    sessions: SessionMapping = "per_chat"
    """Which session a message goes to: one per chat, or one for the whole bot."""

    session: str = Field(default="telegram", min_length=1, max_length=64)
    """With sessions = "one", the session every message goes to; otherwise the start of the
    sessions' names ("telegram:chat-<id>")."""

    poll_timeout_seconds: int = Field(default=30, ge=0, le=50)
    """How long one getUpdates call waits for an update (long polling)."""

    max_text_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    """The most characters of a message's text put in its event; the whole text is saved to a
    file whose path the event gives."""

    request_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    """How long connecting and each request may take (a long poll gets its wait on top)."""

    auth_failure_backoff_seconds: float = Field(default=900.0, ge=0.05, le=86_400)
    """How long to wait after the server refused the token before trying again."""

    max_backoff_seconds: float = Field(default=300.0, ge=0.05, le=86_400)
    """The longest wait between attempts after a network or server failure."""

    @model_validator(mode="before")
    @classmethod
    def _no_token_in_file(cls, data: Any) -> Any:
        return refuse_inline_secret(
            data, "token", what="a Telegram bot token", example_env="WAKEFUL_TELEGRAM_TOKEN"
        )

    @field_validator("token_env")
    @classmethod
    def _environment_name(cls, value: str) -> str:
        if _TOKEN_SHAPE.search(value):
            raise ValueError(
                "token_env holds what looks like a bot token: it must name the environment "
                'variable that holds the token (token_env = "WAKEFUL_TELEGRAM_TOKEN"), and the '
                "token should be revoked with @BotFather now that it was written down"
            )
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not an environment variable name: use letters, digits and '_', "
                'e.g. token_env = "WAKEFUL_TELEGRAM_TOKEN"'
            )
        return value

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        url = value.rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not a Bot API address: write one such as "
                f"{DEFAULT_API_URL!r}, without '/bot<token>'"
            )
        if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
            raise ValueError(
                f"{value!r} would send the bot token in clear text: use https, or http only to "
                "this machine (http://127.0.0.1:8081 for a local Bot API server)"
            )
        if "/bot" in parts.path:
            raise ValueError(
                f"{value!r} holds a '/bot…' path: give only the server, e.g. {DEFAULT_API_URL!r}; "
                "the channel adds the token from token_env"
            )
        return url

    def token(self) -> str:
        """The token from the environment; ConfigError naming the variable when it is unset."""
        value = os.environ.get(self.token_env, "").strip()
        if not value:
            raise ConfigError(
                f"The Telegram channel reads its bot token from the environment variable "
                f"{self.token_env}, which is not set. Set it before starting (export "
                f"{self.token_env}=<the token @BotFather gave>)."
            )
        return value

    def session_for(self, chat_id: int) -> str:
        """The session the messages of chat `chat_id` go to."""
        if self.sessions == "one":
            return self.session
        return f"{self.session}:chat-{chat_id}"
