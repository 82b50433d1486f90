"""What an XMPP channel reads, as one `[[channels.xmpp]]` table of wakeful.toml (or the
arguments of `connect_channel`): the account the agent logs in with, who the user and their
contacts are, the rooms it joins, and which session each conversation goes to.

The password is never in the file: `password_env` names the environment variable that holds it,
and a `password` key is refused with that advice. A connection without TLS is allowed only to
the same machine, where nobody can read the login on the wire.
"""

from __future__ import annotations

import os
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...env_secrets import refuse_inline_secret, secret_from_env
from ...errors import ConfigError

__all__ = ["RoomSettings", "SessionMapping", "TlsMode", "XmppChannelSettings", "bare_jid"]

TlsMode = Literal["starttls", "direct", "plain"]
SessionMapping = Literal["per_conversation", "one"]

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
# A bare JID: local@domain (the local part is required: the user and contacts are people).
_BARE_JID: Final = re.compile(r"[^@/\s\"&'<>:]+@[^@/\s]+")


def bare_jid(value: str) -> str:
    """`value` ("Alice@Example.org/phone") as a bare JID, lowercased ("alice@example.org"): how
    the channel compares senders. Resource parts never decide who someone is."""
    return value.split("/", 1)[0].strip().lower()


class RoomSettings(BaseModel):
    """A multi-user chat room (XEP-0045) the channel joins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jid: str = Field(min_length=3)
    """The room's address, e.g. "team@conference.example.org"."""

    nick: str = Field(default="wakeful", min_length=1, max_length=64)
    """The agent's nickname in the room."""

    keywords: tuple[str, ...] = ()
    """Only messages with one of these words (whole words, case-insensitive) or the agent's
    nick wake the agent; empty: every message. Other messages are stored, as filtered."""

    password_env: str | None = None
    """The NAME of the environment variable holding the room's password, if it has one."""

    reply_in_room: bool = False
    """Whether messages for the user from this room's session are said in the room, where
    everyone in it reads them; by default they go to the user's own account, since a message
    for the user must not reach other people. Turn it on for a room the user shares only with
    people who may read them."""

    @field_validator("jid")
    @classmethod
    def _room_jid(cls, value: str) -> str:
        room = bare_jid(value)
        if not _BARE_JID.fullmatch(room) or "/" in value:
            raise ValueError(
                f"{value!r} is not a room address: write the room's bare JID, e.g. "
                "'team@conference.example.org' (the nick goes in `nick`)"
            )
        return room


class XmppChannelSettings(BaseModel):
    """One XMPP account the agent logs in with; see the module docs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jid: str = Field(min_length=3)
    """The agent's own account, e.g. "assistant@example.org" (a resource may follow a "/")."""

    password_env: str = Field(min_length=1)
    """The NAME of the environment variable that holds the account's password (never the
    password)."""

    host: str | None = None
    """The server to connect to; None looks it up from the JID's domain (DNS SRV)."""

    port: int = Field(default=5222, ge=1, le=65535)
    """The server's client port (with `host`)."""

    tls: TlsMode = "starttls"
    """"starttls" upgrades the connection (port 5222), "direct" is TLS from the start (port
    5223), "plain" sends everything in clear text: to this machine only."""

    user_jids: tuple[str, ...] = Field(min_length=1)
    """The user's own accounts: what they send is the user's input. Resources are ignored."""

    contacts: tuple[str, ...] = ()
    """Accounts (or "@domain" for a whole domain) of the user's contacts, besides the agent
    account's roster; everyone else is a stranger."""

    rooms: tuple[RoomSettings, ...] = ()
    """Rooms to join."""

    sessions: SessionMapping = "per_conversation"
    """Which session a message from someone other than the user goes to: one per
    conversation (a person or a room), or one for them all."""

    session: str = Field(default="im", min_length=1, max_length=32)
    """With sessions = "one", the session those messages go to; otherwise the start of the
    sessions' names ("im:bob@example.org", "im:team@conference.example.org")."""

    user_session: str = Field(default="main", min_length=1, max_length=64)
    """The session the user's own messages go to (their conversation with the agent)."""

    max_text_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    """The most characters of a message put in its event; the whole text is saved to a file
    whose path the event gives."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long connecting and logging in may take."""

    min_backoff_seconds: float = Field(default=1.0, ge=0.01, le=3600)
    """The first wait before reconnecting after the connection was lost; doubled each failure
    in a row."""

    max_backoff_seconds: float = Field(default=300.0, ge=0.01, le=86_400)
    """The longest wait between reconnection attempts."""

    auth_failure_backoff_seconds: float = Field(default=900.0, ge=0.01, le=86_400)
    """How long to wait after the server refused the login, so retries never lock the
    account."""

    @model_validator(mode="before")
    @classmethod
    def _no_password_in_file(cls, data: Any) -> Any:
        return refuse_inline_secret(
            data,
            "password",
            what="an XMPP channel's password",
            example_env="WAKEFUL_XMPP_PASSWORD",
        )

    @field_validator("jid")
    @classmethod
    def _account(cls, value: str) -> str:
        value = value.strip()
        if not _BARE_JID.fullmatch(bare_jid(value)):
            raise ValueError(
                f"{value!r} is not an XMPP account: write it as 'name@example.org' (optionally "
                "with '/resource')"
            )
        return value

    @field_validator("user_jids")
    @classmethod
    def _users(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        kept = []
        for value in values:
            jid = bare_jid(value)
            if not _BARE_JID.fullmatch(jid) or "/" in value:
                raise ValueError(
                    f"{value!r} is not a bare XMPP address: write the user's account as "
                    "'name@example.org', without a resource"
                )
            kept.append(jid)
        return tuple(kept)

    @field_validator("contacts")
    @classmethod
    def _contacts(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        kept = []
        for value in values:
            entry = bare_jid(value)
            if not (_BARE_JID.fullmatch(entry) or re.fullmatch(r"@[^@/\s]+\.[^@/\s]+", entry)):
                raise ValueError(
                    f"{value!r} is not an XMPP address nor a domain: write 'bob@example.org' or "
                    "'@example.org'"
                )
            kept.append(entry)
        return tuple(kept)

    @field_validator("session")
    @classmethod
    def _session(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
            raise ValueError(
                f"{value!r} cannot start a session name: use letters, digits, '_', '.' or '-'"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> XmppChannelSettings:
        if self.tls == "plain" and (self.host or "") not in LOOPBACK_HOSTS:
            raise ValueError(
                f'tls = "plain" sends the XMPP password in clear text, so it is allowed only to '
                f'this machine (host = "127.0.0.1"), not to {self.host or self.domain!r}: use '
                'tls = "starttls" (port 5222) or tls = "direct" (port 5223)'
            )
        if self.account in self.user_jids:
            raise ValueError(
                f"jid {self.account!r} is also in user_jids: give the agent an account of its "
                "own, so that what the agent sends is never read back as the user's words"
            )
        if self.min_backoff_seconds > self.max_backoff_seconds:
            raise ValueError(
                f"min_backoff_seconds ({self.min_backoff_seconds}) is over max_backoff_seconds "
                f"({self.max_backoff_seconds}): lower the first or raise the second"
            )
        rooms = [room.jid for room in self.rooms]
        if len(set(rooms)) != len(rooms):
            raise ValueError("a room is listed twice in `rooms`: list each room once")
        return self

    @property
    def account(self) -> str:
        """The agent's bare JID, lowercased."""
        return bare_jid(self.jid)

    @property
    def domain(self) -> str:
        return self.account.split("@", 1)[1]

    def password(self) -> str:
        """The password from the environment; ConfigError naming the variable when it is
        unset."""
        reader = f"The XMPP channel for {self.jid} reads its password"
        return secret_from_env(self.password_env, reader=reader)

    def room_password(self, room: RoomSettings) -> str | None:
        """A room's password from the environment, or None when it has none; ConfigError when
        its variable is unset."""
        if room.password_env is None:
            return None
        value = os.environ.get(room.password_env)
        if not value:
            raise ConfigError(
                f"The XMPP room {room.jid} reads its password from the environment variable "
                f"{room.password_env}, which is not set. Set it, or remove password_env."
            )
        return value
