"""The IMAP edge: one logged-in connection to a mailbox, over aioimaplib, with its errors mapped
to two of ours (:class:`ImapUnavailable`, and :class:`ImapLoginRefused` for a refused login).

It only moves mail: the channel decides what to fetch and when. Every command is raced against
the connection's loss, so a dropped connection is noticed at once rather than after a timeout.
The server's untagged `EXISTS` announcements are counted (aioimaplib drops those that arrive
outside IDLE), so new mail announced in the middle of a command is never missed before an IDLE.
aioimaplib runs on asyncio, so this channel needs anyio's asyncio backend (the runtime's).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import Any, Final, TypeVar

import aioimaplib  # type: ignore[import-untyped]
import anyio

from ...errors import ConfigError, WakefulError
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

# What aioimaplib and the socket layer raise when a server is unreachable, slow or misbehaves.
_IMAP_ERRORS: Final = (
    OSError,
    TimeoutError,
    asyncio.IncompleteReadError,
    aioimaplib.AioImapException,
)
_EXISTS: Final = re.compile(rb"^(?:\* )?\d+ EXISTS\s*$")
_UIDVALIDITY: Final = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_UIDNEXT: Final = re.compile(rb"\[UIDNEXT (\d+)\]")
_FETCH_UID: Final = re.compile(rb"\d+ FETCH \(.*?UID (\d+)")
_FETCH_SIZE: Final = re.compile(rb"RFC822\.SIZE (\d+)")
_TEMPORARY_LOGIN_FAILURES: Final = (b"[UNAVAILABLE]", b"[SERVERBUG]", b"[INUSE]", b"[LIMIT]")
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


@dataclass(frozen=True)
class MailboxState:
    """What SELECT said about the mailbox: its UIDVALIDITY and the next UID it will give."""

    uidvalidity: int
    uidnext: int | None


class _NoticingProtocol(aioimaplib.IMAP4ClientProtocol):  # type: ignore[misc]
    """aioimaplib's protocol, counting the EXISTS announcements it would otherwise drop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exists_notices = 0

    def _untagged_response(self, line: bytes) -> Any:
        if _EXISTS.match(line):
            self.exists_notices += 1
        return super()._untagged_response(line)


class _Client(aioimaplib.IMAP4):  # type: ignore[misc]
    def create_client(
        self,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop | None,
        conn_lost_cb: Callable[[Exception | None], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        local_loop = loop if loop is not None else asyncio.get_running_loop()
        self.protocol = _NoticingProtocol(local_loop, conn_lost_cb)
        self._client_task = local_loop.create_task(
            local_loop.create_connection(lambda: self.protocol, host, port, ssl=ssl_context)
        )


class ImapConnection:
    """A logged-in IMAP connection; open it with :meth:`open`."""

    def __init__(self, client: _Client, settings: EmailChannelSettings) -> None:
        self._client = client
        self._settings = settings
        self._lost = anyio.Event()
        self._logged_in = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls, settings: EmailChannelSettings, password: str, context: ssl.SSLContext | None
    ) -> AsyncIterator[ImapConnection]:
        """Connect (with TLS as configured, over `context`), log in, and log out on exit."""
        connection: ImapConnection | None = None

        def lost(_: Exception | None) -> None:
            if connection is not None:
                connection._lost.set()

        client = _Client(
            host=settings.host,
            port=settings.imap_port,
            timeout=settings.timeout_seconds,
            conn_lost_cb=lost,
            ssl_context=context if settings.tls == "implicit" else None,
        )
        connection = cls(client, settings)
        try:
            try:
                await client.wait_hello_from_server()
                if settings.tls == "starttls":
                    assert context is not None
                    await connection._starttls(context)
            except _IMAP_ERRORS as exc:
                hint = (
                    " If the server's certificate is its own (self-signed), set tls_ca_file to "
                    "the certificate of the CA that signed it."
                    if isinstance(exc, ssl.SSLCertVerificationError)
                    else ""
                )
                raise ImapUnavailable(
                    f"Could not connect to the IMAP server {settings.host}:{settings.imap_port} "
                    f"({type(exc).__name__}: {exc}).{hint}"
                ) from exc
            await connection._login(password)
            connection._logged_in = True
            yield connection
        finally:
            await connection._close()

    @property
    def has_idle(self) -> bool:
        return bool(self._client.has_capability("IDLE"))

    @property
    def exists_notices(self) -> int:
        """How many times the server announced the mailbox's message count (new mail)."""
        protocol = self._client.protocol
        return protocol.exists_notices if isinstance(protocol, _NoticingProtocol) else 0

    async def select(self, mailbox: str) -> MailboxState:
        response = await self._command(self._client.select(_quoted(mailbox)), f"SELECT {mailbox}")
        if response.result != "OK":
            said = b" ".join(line for line in response.lines if isinstance(line, bytes))
            raise ImapUnavailable(
                f"The IMAP server would not open the mailbox {mailbox!r} "
                f"({said.decode(errors='replace').strip()}). Check `mailbox` in the channel's "
                "settings (INBOX, or a folder's full name such as Archive/2026)."
            )
        text = b"\n".join(line for line in response.lines if isinstance(line, bytes))
        validity = _UIDVALIDITY.search(text)
        if validity is None:
            raise ImapUnavailable(f"The IMAP server gave no UIDVALIDITY for {mailbox}.")
        uidnext = _UIDNEXT.search(text)
        return MailboxState(int(validity.group(1)), int(uidnext.group(1)) if uidnext else None)

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
            if self._lost.is_set():
                raise
            raise IdleRefused(f"the server did not accept IDLE ({exc.__cause__ or exc})") from exc
        try:
            await self._command(client.wait_server_push(timeout=seconds + 5), "IDLE wait")
        except ImapUnavailable as exc:
            if not isinstance(exc.__cause__, TimeoutError) or self._lost.is_set():
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

    async def _login(self, password: str) -> None:
        settings = self._settings
        response = await self._command(self._client.login(settings.username, password), "LOGIN")
        if response.result != "OK":
            said = b" ".join(line for line in response.lines if isinstance(line, bytes))
            if said.startswith(_TEMPORARY_LOGIN_FAILURES):
                # RFC 5530: the server could not check the login just now; not a refusal.
                raise ImapUnavailable(
                    f"The IMAP server {settings.host} could not log in {settings.username!r} "
                    f"just now ({said.decode(errors='replace').strip()})."
                )
            raise ImapLoginRefused(
                f"The IMAP server {settings.host} refused the login of {settings.username!r} "
                f"({said.decode(errors='replace').strip()}). Check the username and the password "
                f"in ${settings.password_env}."
            )

    async def _starttls(self, context: ssl.SSLContext) -> None:
        if not self._client.has_capability("STARTTLS"):
            raise ImapUnavailable(
                f"The IMAP server {self._settings.host} does not offer STARTTLS, so the login "
                'would go in clear text; use tls = "implicit" (port 993) instead.'
            )
        protocol = self._client.protocol
        command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await protocol.execute(command)
        if response.result != "OK":
            raise ImapUnavailable(f"The IMAP server refused STARTTLS: {response.lines!r}.")
        loop = asyncio.get_running_loop()
        protocol.transport = await loop.start_tls(
            protocol.transport, protocol, context, server_hostname=self._settings.host
        )
        await protocol.capability()

    async def _command(self, operation: Awaitable[T], what: str) -> T:
        """Run one command, raced against the connection's loss, with errors mapped."""
        if self._lost.is_set():
            if asyncio.iscoroutine(operation):
                operation.close()
            raise ImapUnavailable(f"The IMAP server closed the connection before {what}.")
        outcome: list[T] = []
        failure: list[BaseException] = []

        async def run() -> None:
            try:
                outcome.append(await operation)
            except _IMAP_ERRORS as exc:
                failure.append(exc)
            group.cancel_scope.cancel()

        async def watch() -> None:
            await self._lost.wait()
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            group.start_soon(watch)
        if failure:
            raise ImapUnavailable(
                f"IMAP {what} failed ({type(failure[0]).__name__}: {failure[0]})."
            ) from failure[0]
        if not outcome:
            raise ImapUnavailable(f"The IMAP server closed the connection during {what}.")
        return outcome[0]

    async def _close(self) -> None:
        """Log out politely when the connection still stands; never wait long for it."""
        with anyio.move_on_after(2, shield=True):
            if self._logged_in and not self._lost.is_set():
                # Closing anyway: a failed goodbye changes nothing.
                with contextlib.suppress(*_IMAP_ERRORS):
                    await self._client.logout()
        self._client._client_task.cancel()  # a connection attempt still under way
        transport = self._client.protocol.transport
        if transport is not None:
            transport.close()
        # aioimaplib's own tasks (an IDLE the server never ended) would wait forever.
        for task in [*self._client.tasks, *self._client.protocol.tasks]:
            task.cancel()


def tls_context(settings: EmailChannelSettings) -> ssl.SSLContext | None:
    """The TLS context for the settings (None for plain text); ConfigError when the CA file
    cannot be read."""
    if settings.tls == "plain":
        return None
    try:
        return ssl.create_default_context(cafile=settings.tls_ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"The email channel's tls_ca_file {settings.tls_ca_file} could not be read as PEM "
            f"certificates ({exc}). Fix the path, or remove tls_ca_file to trust the system's "
            "CAs."
        ) from exc


def _uid_set(uids: list[int]) -> str:
    return ",".join(str(uid) for uid in uids)


def _quoted(mailbox: str) -> str:
    escaped = mailbox.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
