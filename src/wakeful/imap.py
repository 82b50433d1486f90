"""The IMAP edge: one logged-in session over aioimaplib, shared by the email channel and the mail
tools, with every failure mapped to one exception family (:class:`ImapError`).

:meth:`ImapSession.open` connects (implicit TLS, STARTTLS, or plain text), logs in, and logs out
on exit; in between a caller selects a mailbox and runs its own commands through
:meth:`ImapSession.run`, which races each against the connection's loss (a dropped connection is
noticed at once, not after a timeout) and maps what aioimaplib and the socket layer raise. Each
caller turns these errors into its own: the channel into its health and a backoff (long after
:class:`LoginRefused`, so retries never lock the account), the tools into a ToolError that says
what to fix. Policy (what to fetch, IDLE, MOVE) stays with the callers; this module only talks.
aioimaplib runs on asyncio, so the session needs anyio's asyncio backend (the runtime's).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar

import aioimaplib
import anyio

from .errors import WakefulError

__all__ = [
    "CaFileUnreadable",
    "CommandFailed",
    "ConnectFailed",
    "ConnectionLost",
    "ImapEndpoint",
    "ImapError",
    "ImapResponse",
    "ImapSession",
    "LoginDeferred",
    "LoginRefused",
    "MailboxRefused",
    "MailboxState",
    "NoUidValidity",
    "ServerRefused",
    "StartTlsFailed",
    "StartTlsMissing",
    "StartTlsRefused",
    "TlsMode",
    "refusal_text",
    "tls_context",
]

T = TypeVar("T")
TlsMode = Literal["implicit", "starttls", "plain"]
# A server's answer to a command: `result` ("OK", "NO", "BAD") and `lines` (bytes, and bytearray
# for literals). aioimaplib has no type hints, so this names it for readers only.
ImapResponse: TypeAlias = aioimaplib.Response

# What aioimaplib and the socket layer raise when a server is unreachable, slow or misbehaves.
_IMAP_FAILURES: Final = (
    OSError,
    TimeoutError,
    asyncio.IncompleteReadError,
    aioimaplib.AioImapException,
)
_EXISTS: Final = re.compile(rb"^(?:\* )?\d+ EXISTS\s*$")
_UIDVALIDITY: Final = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_UIDNEXT: Final = re.compile(rb"\[UIDNEXT (\d+)\]")
# RFC 5530: the server could not check the login just now; not a refusal of the password.
_TEMPORARY_LOGIN_FAILURES: Final = (b"[UNAVAILABLE]", b"[SERVERBUG]", b"[INUSE]", b"[LIMIT]")
_GOODBYE_SECONDS: Final = 2.0


class ImapError(WakefulError):
    """Raised by :class:`ImapSession` and :func:`tls_context`: the IMAP server could not be
    reached or used. Callers catch it at their edge and raise their own error."""


class CaFileUnreadable(ImapError):
    """Raised by :func:`tls_context`: the CA file could not be loaded (the cause says why)."""

    def __init__(self, ca_file: Path) -> None:
        super().__init__(f"The CA file {str(ca_file)!r} could not be read as PEM certificates.")
        self.ca_file = ca_file


class CommandFailed(ImapError):
    """Raised by :meth:`ImapSession.run`: a command failed at the connection (it timed out, the
    socket failed, aioimaplib gave up); `__cause__` is what was raised, `doing` the command."""

    def __init__(self, doing: str, message: str | None = None) -> None:
        super().__init__(message or f"IMAP {doing} failed.")
        self.doing = doing


class ConnectionLost(CommandFailed):
    """Raised by :meth:`ImapSession.run`: the server closed the connection before or during the
    command (no `__cause__`)."""


class ConnectFailed(CommandFailed):
    """Raised by :meth:`ImapSession.open`: the connection, its TLS handshake or the server's
    greeting failed; `__cause__` is what was raised (e.g. ConnectionRefusedError, TimeoutError,
    ssl.SSLCertVerificationError)."""


class StartTlsFailed(ConnectFailed):
    """Raised by :meth:`ImapSession.open`: the STARTTLS exchange or its TLS handshake failed
    at the connection; `__cause__` is what was raised."""


class StartTlsMissing(ImapError):
    """Raised by :meth:`ImapSession.open`: STARTTLS was asked for and the server does not offer
    it, so the login would go in clear text."""


class ServerRefused(ImapError):
    """The server answered a command with NO or BAD; `said` is its answer as text."""

    def __init__(self, message: str, response: ImapResponse) -> None:
        super().__init__(message)
        self.response = response
        self.said = refusal_text(response)


class LoginRefused(ServerRefused):
    """Raised by :meth:`ImapSession.open`: the server refused the login (wrong username or
    password); retrying soon may get the account locked."""


class LoginDeferred(ServerRefused):
    """Raised by :meth:`ImapSession.open`: the server could not check the login just now
    (RFC 5530 UNAVAILABLE, SERVERBUG, INUSE, LIMIT); a retry may succeed."""


class StartTlsRefused(ServerRefused):
    """Raised by :meth:`ImapSession.open`: the server answered STARTTLS with an error."""


class MailboxRefused(ServerRefused):
    """Raised by :meth:`ImapSession.select`: the server would not open the mailbox."""


class NoUidValidity(ImapError):
    """Raised by :meth:`ImapSession.select`: the server opened the mailbox without saying its
    UIDVALIDITY, so its UIDs cannot be trusted."""


@dataclass(frozen=True, slots=True)
class ImapEndpoint:
    """Where and how to connect: the server, the TLS mode, the CA file (None: the system's CAs)
    and the seconds a greeting or a command may take."""

    host: str
    port: int
    tls: TlsMode
    ca_file: Path | None
    timeout_seconds: float

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class MailboxState:
    """What SELECT (or EXAMINE) said about the mailbox: its UIDVALIDITY and the next UID it
    will give (None when the server did not say)."""

    uidvalidity: int
    uidnext: int | None


def tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """Certificates checked against the system's CAs, or only those of `ca_file`;
    :class:`CaFileUnreadable` when it cannot be loaded."""
    if ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise CaFileUnreadable(ca_file) from exc


class _NoticingProtocol(aioimaplib.IMAP4ClientProtocol):  # type: ignore[misc]
    """aioimaplib's protocol, counting the EXISTS announcements it drops outside IDLE."""

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


class ImapSession:
    """A logged-in IMAP session; open it with :meth:`open`. `client` is the aioimaplib client,
    for the commands a caller runs itself (through :meth:`run`)."""

    def __init__(self, client: Any, endpoint: ImapEndpoint) -> None:
        self.client = client
        self.endpoint = endpoint
        self._lost = anyio.Event()
        self._logged_in = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        endpoint: ImapEndpoint,
        username: str,
        password: str,
        context: ssl.SSLContext | None = None,
    ) -> AsyncIterator[ImapSession]:
        """Connect (with TLS as `endpoint` says, over `context` or one made from its CA file),
        log in as `username` (as it goes on the wire), and log out on exit."""
        if context is None and endpoint.tls != "plain":
            context = tls_context(endpoint.ca_file)
        session: ImapSession | None = None

        def lost(_: Exception | None) -> None:
            if session is not None:
                session._lost.set()

        client = _Client(
            host=endpoint.host,
            port=endpoint.port,
            timeout=endpoint.timeout_seconds,
            conn_lost_cb=lost,
            ssl_context=context if endpoint.tls == "implicit" else None,
        )
        session = cls(client, endpoint)
        try:
            try:
                await client.wait_hello_from_server()
            except _IMAP_FAILURES as exc:
                raise ConnectFailed(
                    "connect",
                    f"Could not connect to the IMAP server {endpoint.where} "
                    f"({type(exc).__name__}: {exc}).",
                ) from exc
            if endpoint.tls == "starttls":
                assert context is not None
                await session._start_tls(context)
            await session._login(username, password)
            session._logged_in = True
            yield session
        finally:
            await session._close()

    @property
    def lost(self) -> bool:
        """Whether the server has closed the connection."""
        return self._lost.is_set()

    @property
    def exists_notices(self) -> int:
        """How many times the server announced the mailbox's message count (new mail)."""
        protocol = self.client.protocol
        return protocol.exists_notices if isinstance(protocol, _NoticingProtocol) else 0

    def has(self, capability: str) -> bool:
        """Whether the server offers `capability` (e.g. IDLE, MOVE, UIDPLUS)."""
        return bool(self.client.has_capability(capability))

    async def select(self, quoted_mailbox: str, *, read_only: bool) -> MailboxState:
        """Open the mailbox (EXAMINE when `read_only`, else SELECT) and say its UIDVALIDITY;
        :class:`MailboxRefused` or :class:`NoUidValidity` when that fails."""
        if read_only:
            protocol = self.client.protocol
            response = await self.run(
                f"EXAMINE {quoted_mailbox}",
                protocol.simple_command("EXAMINE", quoted_mailbox),
                limit_seconds=self.endpoint.timeout_seconds,
            )
            if response.result == "OK":
                # aioimaplib tracks SELECT only; EXAMINE selects the mailbox read-only.
                protocol.state = aioimaplib.SELECTED
        else:
            response = await self.run(
                f"SELECT {quoted_mailbox}",
                self.client.select(quoted_mailbox),
                limit_seconds=self.endpoint.timeout_seconds,
            )
        if response.result != "OK":
            raise MailboxRefused(
                f"The IMAP server {self.endpoint.where} would not open {quoted_mailbox}.",
                response,
            )
        text = b"\n".join(bytes(line) for line in response.lines)
        validity = _UIDVALIDITY.search(text)
        if validity is None:
            raise NoUidValidity(
                f"The IMAP server {self.endpoint.where} gave no UIDVALIDITY for {quoted_mailbox}."
            )
        uidnext = _UIDNEXT.search(text)
        return MailboxState(int(validity.group(1)), int(uidnext.group(1)) if uidnext else None)

    async def run(
        self, doing: str, operation: Awaitable[T], *, limit_seconds: float | None = None
    ) -> T:
        """Await one command, raced against the connection's loss and, when given, within
        `limit_seconds`; :class:`CommandFailed` (or :class:`ConnectionLost`) when it fails."""
        return await self._run(doing, operation, limit_seconds, CommandFailed)

    async def _run(
        self,
        doing: str,
        operation: Awaitable[T],
        limit_seconds: float | None,
        failed: type[CommandFailed],
    ) -> T:
        if self._lost.is_set():
            if asyncio.iscoroutine(operation):
                operation.close()
            raise ConnectionLost(doing, f"The IMAP server closed the connection before {doing}.")
        outcome: list[T] = []
        failure: list[BaseException] = []

        async def attempt() -> None:
            try:
                with anyio.fail_after(limit_seconds):
                    outcome.append(await operation)
            except _IMAP_FAILURES as exc:
                failure.append(exc)
            group.cancel_scope.cancel()

        async def watch() -> None:
            await self._lost.wait()
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(attempt)
            group.start_soon(watch)
        if failure:
            cause = failure[0]
            raise failed(doing, f"IMAP {doing} failed ({type(cause).__name__}: {cause}).") from (
                cause
            )
        if not outcome:
            raise ConnectionLost(doing, f"The IMAP server closed the connection during {doing}.")
        return outcome[0]

    async def _start_tls(self, context: ssl.SSLContext) -> None:
        where = self.endpoint.where
        if not self.has("STARTTLS"):
            raise StartTlsMissing(f"The IMAP server {where} does not offer STARTTLS.")
        protocol = self.client.protocol
        timeout = self.endpoint.timeout_seconds
        command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await self._run("STARTTLS", protocol.execute(command), timeout, StartTlsFailed)
        if response.result != "OK":
            raise StartTlsRefused(f"The IMAP server {where} refused STARTTLS.", response)
        loop = asyncio.get_running_loop()
        upgrade = loop.start_tls(
            protocol.transport, protocol, context, server_hostname=self.endpoint.host
        )
        protocol.transport = await self._run("STARTTLS", upgrade, timeout, StartTlsFailed)
        await self._run("STARTTLS", protocol.capability(), timeout, StartTlsFailed)

    async def _login(self, username: str, password: str) -> None:
        response = await self.run(
            "LOGIN",
            self.client.login(username, password),
            limit_seconds=self.endpoint.timeout_seconds,
        )
        if response.result == "OK":
            return
        where = self.endpoint.where
        said = b" ".join(line for line in response.lines if isinstance(line, bytes))
        if said.startswith(_TEMPORARY_LOGIN_FAILURES):
            raise LoginDeferred(f"The IMAP server {where} could not log in just now.", response)
        raise LoginRefused(f"The IMAP server {where} refused the login.", response)

    async def _close(self) -> None:
        """Log out politely when the connection still stands; never wait long for it."""
        with anyio.move_on_after(min(self.endpoint.timeout_seconds, _GOODBYE_SECONDS), shield=True):
            if self._logged_in and not self._lost.is_set():
                # Closing anyway: a failed goodbye changes nothing.
                with contextlib.suppress(*_IMAP_FAILURES):
                    await self.client.logout()
        self.client._client_task.cancel()  # a connection attempt still under way
        transport = self.client.protocol.transport
        if transport is not None:
            transport.close()
        # aioimaplib's own tasks (an IDLE the server never ended) would wait forever.
        for task in [*self.client.tasks, *self.client.protocol.tasks]:
            task.cancel()


def refusal_text(response: ImapResponse) -> str:
    """What the server said with a refusal: its result and last line, as text."""
    text = [bytes(line).decode(errors="replace") for line in response.lines if line]
    return f"{response.result} {text[-1]}" if text else str(response.result)
