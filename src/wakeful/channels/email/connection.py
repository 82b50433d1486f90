"""The email channel's IMAP connection: the commands the channel uses (search, fetch, IDLE) on a
session of the IMAP edge (:mod:`wakeful.imap`), whose errors become two of ours
(:class:`ImapUnavailable`, and :class:`ImapLoginRefused` for a refused login).

It only moves mail: the channel decides what to fetch and when. The edge races every command
against the connection's loss and counts the server's untagged `EXISTS` announcements, so new
mail announced in the middle of a command is never missed before an IDLE.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import ssl
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import date
from typing import Final, TypeVar

from ... import imap
from ...errors import ConfigError, WakefulError
from ...imap import ImapResponse, ImapSession, MailboxState
from .settings import EmailChannelSettings

__all__ = [
    "IdleRefused",
    "ImapConnection",
    "ImapLoginRefused",
    "ImapUnavailable",
    "MailboxState",
    "tls_context",
]

T = TypeVar("T")

_FETCH_UID: Final = re.compile(rb"\d+ FETCH \(.*?UID (\d+)")
_FETCH_SIZE: Final = re.compile(rb"RFC822\.SIZE (\d+)")
_FETCH_FLAGS: Final = re.compile(rb"FLAGS \(([^)]*)\)")
_FETCH_UID_ANYWHERE: Final = re.compile(rb"UID (\d+)")
# A Message-ID that can go in a quoted IMAP search string as it is.
_SEARCHABLE_ID: Final = re.compile(r"^<[!#-\[\]-~]+>$")
_MONTHS: Final = [
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
]


class ImapUnavailable(WakefulError):
    """The IMAP server could not be reached, dropped the connection, timed out or answered with
    an error; the channel retries with backoff."""


class IdleRefused(ImapUnavailable):
    """The server answered IDLE with an error on a connection that still stands; the channel
    polls on this connection instead."""


class ImapLoginRefused(ImapUnavailable):
    """The server refused the login; the channel waits long before trying again, so that
    retries never get the account locked."""


class ImapConnection:
    """A logged-in IMAP connection; open it with :meth:`open`."""

    def __init__(self, session: ImapSession, settings: EmailChannelSettings) -> None:
        self._session = session
        self._client = session.client
        self._settings = settings

    @classmethod
    @asynccontextmanager
    async def open(
        cls, settings: EmailChannelSettings, password: str, context: ssl.SSLContext | None
    ) -> AsyncIterator[ImapConnection]:
        """Connect (with TLS as configured, over `context`), log in, and log out on exit."""
        endpoint = imap.ImapEndpoint(
            host=settings.host,
            port=settings.imap_port,
            tls=settings.tls,
            ca_file=settings.tls_ca_file,
            timeout_seconds=settings.timeout_seconds,
        )
        try:
            async with ImapSession.open(endpoint, settings.username, password, context) as session:
                yield cls(session, settings)
        except imap.ImapError as exc:
            # Raised while connecting: the block's own commands raise ImapUnavailable already.
            raise _unavailable(exc, settings) from (exc.__cause__ or exc)

    @property
    def has_idle(self) -> bool:
        return self._session.has("IDLE")

    @property
    def exists_notices(self) -> int:
        """How many times the server announced the mailbox's message count (new mail)."""
        return self._session.exists_notices

    async def select(self, mailbox: str) -> MailboxState:
        try:
            return await self._session.select(_quoted(mailbox), read_only=False)
        except imap.MailboxRefused as exc:
            raise ImapUnavailable(
                f"The IMAP server would not open the mailbox {mailbox!r} "
                f"({_joined(exc.response)}). Check `mailbox` in the channel's "
                "settings (INBOX, or a folder's full name such as Archive/2026)."
            ) from None
        except imap.NoUidValidity as exc:
            raise ImapUnavailable(f"The IMAP server gave no UIDVALIDITY for {mailbox}.") from exc
        except imap.CommandFailed as exc:
            raise ImapUnavailable(str(exc)) from (exc.__cause__ or exc)

    async def correspondents(self, mailbox: str, limit: int) -> frozenset[str] | None:
        """The addresses in To and Cc of the latest `limit` messages of `mailbox` (the user's
        Sent mail), read-only; None when the server has no such mailbox. Select the followed
        mailbox again afterwards."""
        try:
            await self._session.select(_quoted(mailbox), read_only=True)
        except (imap.MailboxRefused, imap.NoUidValidity):
            return None
        except imap.CommandFailed as exc:
            raise ImapUnavailable(str(exc)) from (exc.__cause__ or exc)
        uids = (await self._search("ALL"))[-limit:]
        if not uids:
            return frozenset()
        response = await self._command(
            self._client.uid("fetch", _uid_set(uids), "(UID BODY.PEEK[HEADER.FIELDS (TO CC)])"),
            "UID FETCH recipients",
        )
        headers = [
            line.decode("utf-8", "replace").replace("\r\n", "\n")
            for line in response.lines
            if isinstance(line, bytearray)
        ]
        found = email.utils.getaddresses(
            [value for text in headers for value in _header_values(text)]
        )
        return frozenset(address.lower() for _, address in found if "@" in address)

    async def uids_after(self, uid: int) -> list[int]:
        """UIDs above `uid`, ascending (IMAP's `n:*` includes the last message even when its
        UID is below n; that one is left out)."""
        return [found for found in await self._search(f"UID {uid + 1}:*") if found > uid]

    async def uids_since(self, day: date) -> list[int]:
        """UIDs of messages the server received on or after `day`."""
        return await self._search(f"SINCE {day.day}-{_MONTHS[day.month - 1]}-{day.year}")

    async def unseen_uids(self) -> list[int]:
        return await self._search("UNSEEN")

    async def sizes(self, uids: list[int]) -> dict[int, int]:
        """Each message's size in bytes."""
        if not uids:
            return {}
        response = await self._command(
            self._client.uid("fetch", _uid_set(uids), "(UID RFC822.SIZE)"), "UID FETCH sizes"
        )
        sizes: dict[int, int] = {}
        for line in response.lines:
            if isinstance(line, bytes):
                uid, size = _FETCH_UID.match(line), _FETCH_SIZE.search(line)
                if uid and size:
                    sizes[int(uid.group(1))] = int(size.group(1))
        return sizes

    async def uids_with_message_id(self, message_id: str) -> list[int]:
        """UIDs of the messages whose Message-ID header holds `message_id` ("<…@…>"); none
        for an id that cannot be searched for as it is (quotes, backslashes, spaces)."""
        if not _SEARCHABLE_ID.match(message_id):
            return []
        return await self._search(f'HEADER Message-ID "{message_id}"')

    async def flags(self, uids: list[int]) -> dict[int, frozenset[str]]:
        """Each message's flags (e.g. "\\Seen"); a UID no longer in the mailbox is left out."""
        if not uids:
            return {}
        response = await self._command(
            self._client.uid("fetch", _uid_set(uids), "(UID FLAGS)"), "UID FETCH flags"
        )
        found: dict[int, frozenset[str]] = {}
        for line in response.lines:
            if isinstance(line, bytes) and b" FETCH " in line:
                uid, flags = _FETCH_UID_ANYWHERE.search(line), _FETCH_FLAGS.search(line)
                if uid and flags:
                    words = flags.group(1).decode(errors="replace").split()
                    found[int(uid.group(1))] = frozenset(words)
        return found

    async def mark_seen(self, uids: list[int]) -> None:
        """Set the \\Seen flag on these messages (read, as a mail program shows them)."""
        if not uids:
            return
        response = await self._command(
            self._client.uid("store", _uid_set(uids), "+FLAGS.SILENT", "(\\Seen)"),
            "UID STORE \\Seen",
        )
        if response.result != "OK":
            raise ImapUnavailable(
                f"The IMAP server would not mark messages read ({_joined(response)})."
            )

    async def fetch(self, uids: list[int]) -> dict[int, bytes]:
        """The raw bytes of each message, without marking it read."""
        response = await self._command(
            self._client.uid("fetch", _uid_set(uids), "(UID BODY.PEEK[])"), "UID FETCH"
        )
        found: dict[int, bytes] = {}
        pending: int | None = None
        for line in response.lines:
            if isinstance(line, bytearray):
                if pending is not None:
                    found[pending] = bytes(line)
                pending = None
            elif isinstance(line, bytes):
                match = _FETCH_UID.match(line)
                pending = int(match.group(1)) if match and line.endswith(b"}") else None
        return found

    async def idle(self, seconds: float) -> None:
        """Wait in IDLE until the server announces a change or `seconds` pass, then end the
        IDLE (RFC 2177)."""
        client = self._client
        try:
            idle = await self._command(client.idle_start(timeout=seconds), "IDLE")
        except ImapUnavailable as exc:
            if self._session.lost:
                raise
            raise IdleRefused(f"the server did not accept IDLE ({exc.__cause__ or exc})") from exc
        try:
            await self._command(client.wait_server_push(timeout=seconds + 5), "IDLE wait")
        except ImapUnavailable as exc:
            if not isinstance(exc.__cause__, TimeoutError) or self._session.lost:
                raise
        client.idle_done()
        await self._command(asyncio.wait_for(idle, self._settings.timeout_seconds), "IDLE end")

    async def _search(self, criteria: str) -> list[int]:
        response = await self._command(self._client.uid_search(criteria, charset=None), "SEARCH")
        uids: list[int] = []
        for line in response.lines[:-1]:
            if isinstance(line, bytes):
                uids.extend(int(word) for word in line.split() if word.isdigit())
        return sorted(set(uids))

    async def _command(self, operation: Awaitable[T], what: str) -> T:
        """Run one command on the session, its failure mapped to ImapUnavailable (caused by
        what the connection raised, e.g. TimeoutError)."""
        try:
            return await self._session.run(what, operation)
        except imap.CommandFailed as exc:
            raise ImapUnavailable(str(exc)) from (exc.__cause__ or exc)


def _header_values(text: str) -> list[str]:
    """The values of the header fields in `text` (folded lines joined)."""
    values: list[str] = []
    for line in text.split("\n"):
        if line[:1] in (" ", "\t") and values:
            values[-1] += " " + line.strip()
        elif ":" in line:
            values.append(line.split(":", 1)[1].strip())
    return values


def tls_context(settings: EmailChannelSettings, mode: str | None = None) -> ssl.SSLContext | None:
    """The TLS context for the settings' IMAP connection, or for the given `mode` (the SMTP
    side's `smtp_security`); None for plain text; ConfigError when the CA file cannot be
    read."""
    if (mode or settings.tls) == "plain":
        return None
    try:
        return imap.tls_context(settings.tls_ca_file)
    except imap.CaFileUnreadable as exc:
        raise ConfigError(
            f"The email channel's tls_ca_file {settings.tls_ca_file} could not be read as PEM "
            f"certificates ({exc.__cause__}). Fix the path, or remove tls_ca_file to trust the "
            "system's CAs."
        ) from exc.__cause__


def _unavailable(exc: imap.ImapError, settings: EmailChannelSettings) -> ImapUnavailable:
    """The channel's error for a failure to connect or log in."""
    where = f"{settings.host}:{settings.imap_port}"
    if isinstance(exc, imap.LoginRefused):
        return ImapLoginRefused(
            f"The IMAP server {settings.host} refused the login of {settings.username!r} "
            f"({_joined(exc.response)}). Check the username and the password in "
            f"${settings.password_env}."
        )
    if isinstance(exc, imap.LoginDeferred):
        return ImapUnavailable(
            f"The IMAP server {settings.host} could not log in {settings.username!r} just now "
            f"({_joined(exc.response)})."
        )
    if isinstance(exc, imap.StartTlsMissing):
        return ImapUnavailable(
            f"The IMAP server {settings.host} does not offer STARTTLS, so the login would go in "
            'clear text; use tls = "implicit" (port 993) instead.'
        )
    if isinstance(exc, imap.StartTlsRefused):
        return ImapUnavailable(f"The IMAP server refused STARTTLS: {exc.response.lines!r}.")
    if isinstance(exc, imap.ConnectFailed):
        cause = exc.__cause__
        hint = (
            " If the server's certificate is its own (self-signed), set tls_ca_file to the "
            "certificate of the CA that signed it."
            if isinstance(cause, ssl.SSLCertVerificationError)
            else ""
        )
        return ImapUnavailable(
            f"Could not connect to the IMAP server {where} ({type(cause).__name__}: {cause}).{hint}"
        )
    return ImapUnavailable(str(exc))


def _joined(response: ImapResponse) -> str:
    """The text lines of a server's answer, joined."""
    said = b" ".join(line for line in response.lines if isinstance(line, bytes))
    return said.decode(errors="replace").strip()


def _uid_set(uids: list[int]) -> str:
    return ",".join(str(uid) for uid in uids)


def _quoted(mailbox: str) -> str:
    escaped = mailbox.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
