"""`[tools.mail]`: the IMAP account the mail tools read and file mail in.

Kept apart from the tools so `wakeful.config` can validate it without importing the IMAP client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...env_secrets import refuse_inline_secret

__all__ = ["MailSettings"]

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})


class MailSettings(BaseModel):
    """The IMAP account of search_mail, read_mail, draft_reply, move_mail, archive_mail and
    flag_mail, and the limits on what they fetch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    """The IMAP server's host name."""

    port: int = Field(default=993, ge=1, le=65535)
    """The IMAP server's port: usually 993 (TLS from the start) or 143 (plain or STARTTLS)."""

    security: Literal["ssl", "starttls", "none"] = "ssl"
    """"ssl" connects with TLS from the start, "starttls" upgrades a plain connection before
    logging in (refused if the server does not offer it), "none" talks in clear text: allowed
    for a server on this machine only, where nobody can read the login on the wire."""

    ca_file: Path | None = None
    """A PEM file of the CA certificates to trust instead of the system's, for a server whose
    certificate comes from its own CA (self-hosted); None trusts the system's CAs."""

    username: str | None = None
    """The IMAP login; the tools refuse to run without one."""

    password_env: str | None = None
    """The NAME of the environment variable that holds the password (never the password)."""

    from_address: str | None = None
    """The sender of drafted replies, e.g. "Agent <agent@example.com>"; None uses the
    `[tools.email]` from_address. Replies to all leave this address out of the recipients."""

    drafts_mailbox: str = "Drafts"
    """Where draft_reply saves drafts when the server marks no mailbox \\Drafts (SPECIAL-USE)."""

    archive_mailbox: str = "Archive"
    """Where archive_mail files mail when the server marks no mailbox \\Archive (SPECIAL-USE)."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long connecting and each IMAP command may take."""

    max_message_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """The largest message read_mail fetches (attachments included)."""

    max_body_chars: int = Field(default=20_000, ge=500, le=1_000_000)
    """The most characters of a body read_mail shows; the whole text is saved to a file."""

    @model_validator(mode="before")
    @classmethod
    def _no_password_in_file(cls, data: Any) -> Any:
        return refuse_inline_secret(data, "password", what="the mail tools' password")

    @model_validator(mode="after")
    def _clear_text_only_here(self) -> MailSettings:
        if self.security == "none" and self.host.lower() not in LOOPBACK_HOSTS:
            raise ValueError(
                f"security = 'none' would send the IMAP login to {self.host} in clear text; it is "
                "allowed for 127.0.0.1, ::1 and localhost only. Use 'ssl' (port 993) or "
                "'starttls' (port 143)."
            )
        return self
