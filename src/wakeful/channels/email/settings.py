"""What an email channel reads, as one `[[channels.email]]` table of wakeful.toml (or the
arguments of `connect_channel`): the IMAP account, how mail is watched, which session each mail
goes to, and who the user and their contacts are.

The password is never in the file: `password_env` names the environment variable that holds it,
and a `password` key is refused with that advice. Plain-text IMAP is allowed only to the same
machine, where nobody can read the login on the wire.

The `smtp_*` keys, `from_address` and `notify_address` are for the other direction, messages to
the user (see :mod:`wakeful.channels.email.outbound`); each defaults to its IMAP counterpart, so
an account on one server needs none of them but `from_address` when its login is no address.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...env_secrets import refuse_inline_secret, secret_from_env
from ...errors import ConfigError

__all__ = ["EmailChannelSettings", "SessionMapping", "TlsMode"]

TlsMode = Literal["implicit", "starttls", "plain"]
SessionMapping = Literal["per_thread", "per_sender", "one"]

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
DEFAULT_PORTS: Final[dict[str, int]] = {"implicit": 993, "starttls": 143, "plain": 143}
DEFAULT_SMTP_PORTS: Final[dict[str, int]] = {"implicit": 465, "starttls": 587, "plain": 25}
# One bare address as a person types it: no spaces, brackets, quotes or list separators.
_ADDRESS: Final = re.compile(r"^[^@\s<>,;:\"()\[\]\\]+@[^@\s<>,;:\"()\[\]\\]+$")


class EmailChannelSettings(BaseModel):
    """One IMAP mailbox watched for new mail; see the module docs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1)
    """The IMAP server's host name."""

    port: int | None = Field(default=None, ge=1, le=65535)
    """The IMAP port; None picks 993 for implicit TLS and 143 otherwise."""

    tls: TlsMode = "implicit"
    """"implicit" connects with TLS from the start (port 993), "starttls" upgrades a plain
    connection (port 143), "plain" sends everything in clear text: to this machine only."""

    tls_ca_file: Path | None = None
    """A file of CA certificates (PEM) to trust for a server whose certificate no public CA
    signed (a self-hosted one); None trusts the system's CAs."""

    username: str = Field(min_length=1)
    """The IMAP login."""

    password_env: str = Field(min_length=1)
    """The NAME of the environment variable that holds the IMAP password (never the password)."""

    mailbox: str = Field(default="INBOX", min_length=1)
    """The mailbox watched for new mail."""

    idle: bool = True
    """Wait for the server to announce new mail (IMAP IDLE) instead of asking every
    `poll_interval_seconds`; the channel polls anyway when the server lacks IDLE."""

    poll_interval_seconds: float = Field(default=60.0, ge=0.05, le=86_400)
    """How often the mailbox is checked when IDLE is off or not offered by the server."""

    idle_renew_seconds: float = Field(default=25 * 60.0, ge=1, le=29 * 60.0)
    """How long one IDLE lasts before it is renewed (RFC 2177: before 29 minutes, when servers
    may drop a silent connection)."""

    first_sync: Literal["unseen", "new_only"] = "unseen"
    """What the very first start delivers: the unread mail already there (the newest
    `first_sync_limit`), or only mail that arrives from then on."""

    first_sync_limit: int = Field(default=50, ge=0, le=10_000)
    """The most unread messages the first start delivers."""

    sessions: SessionMapping = "per_thread"
    """Which session a mail goes to: one per thread, one per sender, or one for all mail."""

    session: str = Field(default="mail", min_length=1, max_length=64)
    """With sessions = "one", the session every mail goes to; otherwise the start of the
    sessions' names ("mail:thread-<id>", "mail:from-<address>")."""

    user_addresses: tuple[str, ...] = ()
    """The user's own addresses: authenticated mail from them is the user's."""

    contacts: tuple[str, ...] = ()
    """Addresses (or "@domain" for a whole domain) of the user's contacts."""

    contacts_file: Path | None = None
    """A file of contacts, one address or "@domain" a line ('#' starts a comment)."""

    sent_mailbox: str | None = "Sent"
    """The mailbox of the mail the user sent: everyone the user wrote to (To and Cc of its
    latest `correspondents_limit` messages, read on each connection) counts as a contact. None
    turns this off; a mailbox that does not exist is skipped, saying so in the log."""

    correspondents_limit: int = Field(default=500, ge=1, le=10_000)
    """How many of the latest sent messages are read for their recipients."""

    authserv_id: str | None = None
    """The receiving server's name in its Authentication-Results headers; when set, only those
    headers count (a sender can write its own). None trusts the topmost header, which the last
    server to receive the mail added."""

    max_text_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    """The most characters of a mail's text put in its event; the rest is saved to a file
    whose path the event gives."""

    thread_history: int = Field(default=5, ge=0, le=50)
    """How many earlier messages of a thread an event summarises."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long connecting and each IMAP command may take."""

    auth_failure_backoff_seconds: float = Field(default=900.0, ge=1, le=86_400)
    """How long to wait after the server refused the login, so retries never lock the
    account."""

    max_backoff_seconds: float = Field(default=300.0, ge=0.1, le=86_400)
    """The longest wait between reconnection attempts after a network failure."""

    smtp_host: str | None = Field(default=None, min_length=1)
    """The SMTP server messages to the user are sent through; None uses `host`."""

    smtp_port: int | None = Field(default=None, ge=1, le=65535)
    """The SMTP port; None picks 465 for implicit TLS, 587 for STARTTLS and 25 for plain."""

    smtp_tls: TlsMode | None = None
    """How the SMTP connection is protected, as `tls` for IMAP (None: the same as `tls`);
    "plain" only to this machine."""

    smtp_username: str | None = Field(default=None, min_length=1)
    """The SMTP login, used when the server offers AUTH; None uses `username`."""

    smtp_password_env: str | None = Field(default=None, min_length=1)
    """The NAME of the environment variable that holds the SMTP password; None uses
    `password_env`."""

    from_address: str | None = None
    """The address messages to the user come from, e.g. "assistant@example.com"; None uses
    `username` when it is an address. Replies to it reach the agent when it is this mailbox's."""

    notify_address: str | None = None
    """Where messages to the user go; None uses the first of `user_addresses`."""

    @model_validator(mode="before")
    @classmethod
    def _no_password_in_file(cls, data: Any) -> Any:
        return refuse_inline_secret(
            data,
            "password",
            what="an email channel's password",
            example_env="WAKEFUL_IMAP_PASSWORD",
        )

    @model_validator(mode="before")
    @classmethod
    def _no_smtp_password_in_file(cls, data: Any) -> Any:
        return refuse_inline_secret(
            data,
            "smtp_password",
            what="an email channel's SMTP password",
            example_env="WAKEFUL_SMTP_PASSWORD",
        )

    @field_validator("from_address", "notify_address")
    @classmethod
    def _one_address(cls, address: str | None) -> str | None:
        if address is None:
            return None
        address = address.strip()
        if not _ADDRESS.match(address) or not address.isascii():
            raise ValueError(
                f"{address!r} is not one plain email address; write it as "
                "'name@example.com' (ASCII, no display name)"
            )
        return address

    @field_validator("user_addresses", "contacts")
    @classmethod
    def _lowercase(cls, addresses: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(address.strip().lower() for address in addresses if address.strip())

    @model_validator(mode="after")
    def _plain_only_on_loopback(self) -> EmailChannelSettings:
        if self.tls == "plain" and self.host not in LOOPBACK_HOSTS:
            raise ValueError(
                f'tls = "plain" sends the IMAP password in clear text, so it is allowed only to '
                f'this machine (127.0.0.1), not to {self.host!r}: use tls = "implicit" (port 993) '
                'or tls = "starttls" (port 143)'
            )
        if self.smtp_security == "plain" and self.smtp_server not in LOOPBACK_HOSTS:
            raise ValueError(
                f"plain SMTP sends the login and the messages in clear text, so it is allowed "
                f"only to this machine (127.0.0.1), not to {self.smtp_server!r}: set "
                'smtp_tls = "implicit" (port 465) or smtp_tls = "starttls" (port 587)'
            )
        return self

    @property
    def smtp_server(self) -> str:
        """The SMTP server's host name."""
        return self.smtp_host if self.smtp_host is not None else self.host

    @property
    def smtp_security(self) -> TlsMode:
        """How the SMTP connection is protected."""
        return self.smtp_tls if self.smtp_tls is not None else self.tls

    @property
    def smtp_server_port(self) -> int:
        """The SMTP port to connect to."""
        if self.smtp_port is not None:
            return self.smtp_port
        return DEFAULT_SMTP_PORTS[self.smtp_security]

    @property
    def smtp_login(self) -> str:
        return self.smtp_username if self.smtp_username is not None else self.username

    def smtp_password(self) -> str:
        """The SMTP password from the environment; ConfigError naming the variable when it is
        unset."""
        variable = self.smtp_password_env or self.password_env
        reader = (
            f"The email channel for {self.username} logs in to the SMTP server "
            f"{self.smtp_server} with the password it reads"
        )
        return secret_from_env(variable, reader=reader)

    def sender(self) -> str:
        """The address messages to the user come from; ConfigError when there is none."""
        if self.from_address is not None:
            return self.from_address
        if _ADDRESS.match(self.username) and self.username.isascii():
            return self.username
        raise ConfigError(
            f"The email channel for {self.username} at {self.host} cannot send to the user: "
            f"its login {self.username!r} is no email address, so it does not know what to "
            'put in From. Set from_address (e.g. from_address = "assistant@example.com") '
            "in its [[channels.email]] table."
        )

    def recipient(self) -> str:
        """Where messages to the user go; ConfigError when there is nowhere."""
        if self.notify_address is not None:
            return self.notify_address
        if self.user_addresses and _ADDRESS.match(self.user_addresses[0]):
            return self.user_addresses[0]
        if self.user_addresses:
            raise ConfigError(
                f"The email channel for {self.username} sends to the user's first address, "
                f"and {self.user_addresses[0]!r} is none. Fix user_addresses, or set "
                "notify_address to where messages to the user should go."
            )
        raise ConfigError(
            f"The email channel for {self.username} at {self.host} cannot send to the user: "
            "it knows no address of theirs. Set notify_address (or user_addresses) in its "
            "[[channels.email]] table."
        )

    @property
    def imap_port(self) -> int:
        """The port to connect to."""
        return self.port if self.port is not None else DEFAULT_PORTS[self.tls]

    def password(self) -> str:
        """The password from the environment; ConfigError naming the variable when it is
        unset."""
        reader = f"The email channel for {self.username} at {self.host} reads its IMAP password"
        return secret_from_env(self.password_env, reader=reader)

    def contact_entries(self) -> frozenset[str]:
        """Every contact, from `contacts` and `contacts_file`, lowercased; ConfigError when the
        file cannot be read."""
        entries = set(self.contacts)
        if self.contacts_file is not None:
            try:
                text = self.contacts_file.expanduser().read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"The email channel for {self.username} could not read its contacts_file "
                    f"{self.contacts_file}: {exc.strerror or exc}. Fix the path or remove "
                    "contacts_file."
                ) from exc
            for line in text.splitlines():
                entry = line.split("#", 1)[0].strip().lower()
                if entry:
                    entries.add(entry)
        return frozenset(entries)
