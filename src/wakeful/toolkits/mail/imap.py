"""The mail tools' one adapter: an IMAP session over aioimaplib, opened for one tool call.

`MailAccount.open` connects (TLS, STARTTLS or plain), logs in and logs out again; in between a
tool selects a mailbox (read-only with EXAMINE unless it changes something), checks the
UIDVALIDITY it was given, and runs UID commands. Every failure of the server or the connection
becomes a ToolError that names the account and says what to do; aioimaplib's own exceptions
never leave this module.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import aioimaplib  # type: ignore[import-untyped]
import anyio

from ...errors import ToolError
from .mailbox_names import canonical_mailbox, decode_mailbox, quoted, quoted_mailbox
from .search_query import SearchCriteria
from .settings import MailSettings

__all__ = ["Fetched", "MailAccount", "Mailbox", "Selected"]

T = TypeVar("T")
_ImapFailure = (OSError, TimeoutError, aioimaplib.AioImapException)
_FETCH_START = re.compile(rb"^\d+ FETCH \(")
_UID = re.compile(rb"\bUID (\d+)")
_FLAGS = re.compile(rb"\bFLAGS \(([^)]*)\)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_INTERNALDATE = re.compile(rb'\bINTERNALDATE "([^"]*)"')
_LITERAL_SECTION = re.compile(rb"(BODY\[[^\]]*\](?:<\d+>)?) \{\d+\}$")
_LIST_LINE = re.compile(rb'^\(([^)]*)\) (?:"(?:[^"\\]|\\.)*"|NIL) (.*)$')
_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_APPENDUID = re.compile(rb"APPENDUID \d+ (\d+)")
_COPYUID = re.compile(rb"COPYUID (\d+) \S+ (\d+)")


@dataclass(frozen=True, slots=True)
class Mailbox:
    """A mailbox as LIST shows it: its name (decoded) and its attributes (e.g. \\Drafts)."""

    name: str
    attributes: frozenset[str]


@dataclass(frozen=True, slots=True)
class Selected:
    """The mailbox a session works in, and the UIDVALIDITY its UIDs belong to."""

    name: str
    uidvalidity: int


@dataclass(slots=True)
class Fetched:
    """One message of a UID FETCH answer: the attributes asked for, sections by name."""

    uid: int | None = None
    flags: tuple[str, ...] = ()
    size: int | None = None
    internal_date: str | None = None
    sections: dict[str, bytes] = field(default_factory=dict)

    def section(self, prefix: str) -> bytes:
        """The first section whose name starts with `prefix` (e.g. 'BODY[HEADER'); b'' if none."""
        return next((data for name, data in self.sections.items() if name.startswith(prefix)), b"")


class MailAccount:
    """A logged-in IMAP session; use :meth:`open`."""

    def __init__(self, client: aioimaplib.IMAP4, settings: MailSettings, tool_name: str) -> None:
        self._client = client
        self.settings = settings
        self.tool_name = tool_name
        self.selected: Selected | None = None

    # --- the session ----------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: MailSettings, tool_name: str) -> AsyncIterator[MailAccount]:
        """Connect and log in as the settings say; log out when the block ends."""
        if settings.username is None:
            raise ToolError(
                f"{tool_name} has no IMAP account: username is not set in the [tools.mail] "
                "settings. Set host, port, username and password_env there and restart."
            )
        password = _password(settings, tool_name)
        client = await _greeted(settings)
        account = cls(client, settings, tool_name)
        try:
            await account._login(settings.username, password)
            yield account
        finally:
            await account._close()

    async def _login(self, username: str, password: str) -> None:
        if self.settings.security == "starttls":
            await self._start_tls()
        response = await self._run(
            "log in", self._client.login(quoted(username, what="username"), password)
        )
        if response.result != "OK":
            raise ToolError(
                f"The IMAP server {self._where} refused the login of {username!r}: "
                f"{_said(response)}. Check username and the password in the environment "
                f"variable {self.settings.password_env!r} ([tools.mail] settings); the tools do "
                "not retry, so the account is not locked by repeated attempts."
            )

    async def _start_tls(self) -> None:
        protocol = self._client.protocol
        if "STARTTLS" not in protocol.capabilities:
            raise ToolError(
                f"The IMAP server {self._where} does not offer STARTTLS, and the [tools.mail] "
                "settings ask for it (security = 'starttls'). Use security = 'ssl' with the "
                "server's TLS port (usually 993), or 'none' for a server on this machine only."
            )
        command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await self._run("start TLS", protocol.execute(command))
        if response.result != "OK":
            raise ToolError(f"The IMAP server {self._where} refused STARTTLS: {_said(response)}.")
        loop = asyncio.get_running_loop()
        try:
            transport = await self._run(
                "start TLS",
                loop.start_tls(
                    protocol.transport,
                    protocol,
                    _tls_context(self.settings),
                    server_hostname=self.settings.host,
                ),
            )
        except ToolError as exc:
            if isinstance(exc.__cause__, ssl.SSLError):
                raise _tls_failed(self.settings, exc.__cause__) from exc.__cause__
            raise
        protocol.transport = transport
        await self._run("start TLS", protocol.capability())

    async def _close(self) -> None:
        with anyio.move_on_after(min(self.settings.timeout_seconds, 5.0)):
            try:
                if self._client.get_state() != "LOGOUT":
                    await self._client.logout()
            except _ImapFailure:
                pass  # the session is over either way; the transport is closed below
        transport = self._client.protocol.transport
        if transport is not None:
            transport.close()

    @property
    def _where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def has(self, capability: str) -> bool:
        return bool(self._client.has_capability(capability))

    async def _run(self, doing: str, command: Awaitable[T]) -> T:
        """Await one command, within the timeout; a failure becomes a ToolError."""
        try:
            with anyio.fail_after(self.settings.timeout_seconds):
                return await command
        except TimeoutError as exc:
            raise ToolError(
                f"The IMAP server {self._where} did not answer within "
                f"{self.settings.timeout_seconds:g} s (while trying to {doing}). Check that it "
                "is up, then call the tool again."
            ) from exc
        except (OSError, aioimaplib.AioImapException) as exc:
            raise ToolError(
                f"The connection to the IMAP server {self._where} failed while trying to "
                f"{doing} ({type(exc).__name__}: {exc}). Check that the server is up, then call "
                f"{self.tool_name} again."
            ) from exc

    # --- mailboxes ------------------------------------------------------------------------------

    async def mailboxes(self) -> list[Mailbox]:
        """Every mailbox of the account, with its attributes."""
        response = await self._run(
            "list the mailboxes", self._client.protocol.simple_command("LIST", '""', '"*"')
        )
        if response.result != "OK":
            raise ToolError(f"The IMAP server {self._where} refused LIST: {_said(response)}.")
        found: list[Mailbox] = []
        lines = list(response.lines)
        for index, line in enumerate(lines):
            if isinstance(line, bytearray):
                continue
            match = _LIST_LINE.match(line)
            if match is None:
                continue
            raw = match.group(2)
            if raw.endswith(b"}") and index + 1 < len(lines):
                raw = bytes(lines[index + 1])
            elif raw.startswith(b'"'):
                raw = re.sub(rb"\\(.)", rb"\1", raw[1:-1])
            attributes = frozenset(match.group(1).decode(errors="replace").split())
            found.append(Mailbox(decode_mailbox(raw.decode(errors="replace")), attributes))
        return found

    async def special_mailbox(self, use: str, configured: str) -> str:
        """The mailbox the server marks with `use` (e.g. '\\Drafts'), else `configured`."""
        boxes = await self.mailboxes()
        marked = [b.name for b in boxes if use.lower() in {a.lower() for a in b.attributes}]
        if marked:
            return marked[0]
        if any(b.name == configured for b in boxes):
            return configured
        raise ToolError(
            f"The account has no {use} mailbox: the server marks none with {use} and there is "
            f"no mailbox named {configured!r} (the [tools.mail] setting). Create one in the mail "
            f"program, or set the setting to one of: {_names(boxes)}."
        )

    async def select(
        self, mailbox: str, *, writable: bool, uidvalidity: int | None = None
    ) -> Selected:
        """Open `mailbox` (EXAMINE, read-only, unless `writable`); refuse a UIDVALIDITY that
        differs from `uidvalidity` (the UIDs it came with name other messages now)."""
        mailbox = canonical_mailbox(mailbox)
        name = quoted_mailbox(mailbox)
        protocol = self._client.protocol
        if writable:
            response = await self._run(f"open {mailbox!r}", self._client.select(name))
        else:
            response = await self._run(
                f"open {mailbox!r}", protocol.simple_command("EXAMINE", name)
            )
            if response.result == "OK":
                # aioimaplib tracks SELECT only; EXAMINE selects the mailbox read-only.
                protocol.state = aioimaplib.SELECTED
        if response.result != "OK":
            await self._no_such_mailbox(mailbox, response)
        current = next(
            (int(m.group(1)) for line in response.lines if (m := _UIDVALIDITY.search(line))),
            None,
        )
        if current is None:
            raise ToolError(
                f"The IMAP server {self._where} opened {mailbox!r} without saying its "
                "UIDVALIDITY, so its UIDs cannot be trusted. This server is not supported."
            )
        if uidvalidity is not None and uidvalidity != current:
            raise ToolError(
                f"The mailbox {mailbox!r} was renumbered: its UIDVALIDITY is now {current}, not "
                f"{uidvalidity}, so the uid you have names another message or none. Find the "
                "message again with search_mail and use its new uid and uidvalidity."
            )
        self.selected = Selected(mailbox, current)
        return self.selected

    async def _no_such_mailbox(self, mailbox: str, response: aioimaplib.Response) -> None:
        boxes = await self.mailboxes()
        if all(b.name != mailbox for b in boxes):
            raise ToolError(
                f"The mailbox {mailbox!r} does not exist on {self._where}. The mailboxes are: "
                f"{_names(boxes)}. Use one of them (names are case-sensitive, except INBOX)."
            )
        raise ToolError(
            f"The IMAP server {self._where} would not open {mailbox!r}: {_said(response)}."
        )

    # --- messages -------------------------------------------------------------------------------

    async def search(self, criteria: SearchCriteria) -> list[int]:
        """The UIDs of the selected mailbox's messages that match, in ascending order."""
        response = await self._run(
            "search",
            self._client.protocol.search(
                *criteria.arguments, charset=criteria.charset, by_uid=True
            ),
        )
        if response.result != "OK":
            raise ToolError(
                f"The IMAP server {self._where} refused the search: {_said(response)}. Simplify "
                "the query (plain words) and try again."
            )
        uids: set[int] = set()
        for line in response.lines[:-1]:
            if isinstance(line, bytes) and re.fullmatch(rb"[\d ]*", line):
                uids.update(int(n) for n in line.split())
        return sorted(uids)

    async def fetch(self, uids: Sequence[int], items: str) -> list[Fetched]:
        """The selected mailbox's messages `uids` (those that still exist), with `items`."""
        if not uids:
            return []
        uid_set = ",".join(str(u) for u in uids)
        response = await self._run(
            "fetch mail", self._client.protocol.fetch(uid_set, items, by_uid=True)
        )
        if response.result != "OK":
            raise ToolError(f"The IMAP server {self._where} refused FETCH: {_said(response)}.")
        wanted = set(uids)
        return [m for m in _parse_fetch(response.lines) if m.uid in wanted]

    async def one(self, uid: int, items: str) -> Fetched:
        """Message `uid` of the selected mailbox; ToolError naming the way out if it is gone."""
        found = await self.fetch([uid], items)
        if not found:
            where = self.selected.name if self.selected else "the mailbox"
            raise ToolError(
                f"There is no message with uid {uid} in {where!r}: it was moved or deleted, or "
                "the uid is from another mailbox. Find it with search_mail (in the mailbox it "
                "is in) and use the uid it shows."
            )
        return found[0]

    async def store(self, uid: int, operation: str, flags: Sequence[str]) -> None:
        """Add (`+FLAGS.SILENT`) or remove (`-FLAGS.SILENT`) flags on message `uid`."""
        response = await self._run(
            "change flags",
            self._client.protocol.store(
                str(uid), operation, "(" + " ".join(flags) + ")", by_uid=True
            ),
        )
        if response.result != "OK":
            raise ToolError(
                f"The IMAP server {self._where} refused to change the flags of uid {uid}: "
                f"{_said(response)}."
            )

    async def append(self, data: bytes, mailbox: str, flags: str) -> int | None:
        """Save a message in `mailbox`; its new UID when the server says it (UIDPLUS)."""
        response = await self._run(
            f"save to {mailbox!r}",
            self._client.protocol.append(
                data, quoted_mailbox(mailbox), flags, None, timeout=self.settings.timeout_seconds
            ),
        )
        if response.result != "OK":
            raise ToolError(
                f"The IMAP server {self._where} refused to save the message in {mailbox!r}: "
                f"{_said(response)}."
            )
        return _first_number(_APPENDUID, response)

    async def move(self, uid: int, mailbox: str) -> tuple[int, int] | None:
        """Move message `uid` of the selected mailbox to `mailbox` (MOVE, else COPY, \\Deleted
        and UID EXPUNGE of that UID alone); (UIDVALIDITY, UID) there when the server says."""
        target = quoted_mailbox(mailbox)
        protocol = self._client.protocol
        if self.has("MOVE"):
            response = await self._run(
                f"move to {mailbox!r}", protocol.move(str(uid), target, by_uid=True)
            )
            self._moved(uid, mailbox, response)
            return _copied_as(response)
        if not self.has("UIDPLUS"):
            raise ToolError(
                f"The IMAP server {self._where} has neither MOVE nor UIDPLUS, so a message "
                "cannot be moved without also expunging others marked deleted. Move it in a "
                "mail program instead."
            )
        response = await self._run(
            f"copy to {mailbox!r}", protocol.copy(str(uid), target, by_uid=True)
        )
        self._moved(uid, mailbox, response)
        await self.store(uid, "+FLAGS.SILENT", ["\\Deleted"])
        expunged = await self._run("expunge", protocol.expunge(str(uid), by_uid=True))
        if expunged.result != "OK":
            raise ToolError(
                f"The message was copied to {mailbox!r} but the server would not remove it "
                f"from the original mailbox: {_said(expunged)}. It is now in both."
            )
        return _copied_as(response)

    def _moved(self, uid: int, mailbox: str, response: aioimaplib.Response) -> None:
        if response.result != "OK":
            said = _said(response)
            hint = (
                " The mailbox does not exist: give one that does (search_mail lists them when "
                "asked for a missing one)."
                if "TRYCREATE" in said.upper()
                else ""
            )
            raise ToolError(
                f"The IMAP server {self._where} refused to move uid {uid} to {mailbox!r}: "
                f"{said}.{hint}"
            )


async def _connect(settings: MailSettings) -> aioimaplib.IMAP4:
    """A client that has the server's greeting; ToolError (and nothing left open) if not."""
    client: aioimaplib.IMAP4
    if settings.security == "ssl":
        client = aioimaplib.IMAP4_SSL(
            settings.host,
            settings.port,
            timeout=settings.timeout_seconds,
            ssl_context=_tls_context(settings),
        )
    else:
        client = aioimaplib.IMAP4(settings.host, settings.port, timeout=settings.timeout_seconds)
    try:
        await client.wait_hello_from_server()
    except BaseException:
        transport = client.protocol.transport
        if transport is not None:
            transport.close()
        raise
    return client


async def _greeted(settings: MailSettings) -> aioimaplib.IMAP4:
    where = f"{settings.host}:{settings.port}"
    try:
        return await _connect(settings)
    except TimeoutError as exc:
        raise ToolError(
            f"The IMAP server {where} did not greet within {settings.timeout_seconds:g} s. "
            "Check host, port and security in the [tools.mail] settings and that it is up."
        ) from exc
    except ConnectionRefusedError as exc:
        raise ToolError(
            f"The IMAP server {where} refused the connection: nothing listens there. Check "
            "that it is running and that host and port in the [tools.mail] settings are right."
        ) from exc
    except ssl.SSLError as exc:
        raise _tls_failed(settings, exc) from exc
    except (OSError, aioimaplib.AioImapException) as exc:
        raise ToolError(
            f"Could not connect to the IMAP server {where} ({type(exc).__name__}: {exc}). Check "
            "host and port in the [tools.mail] settings and that the server is up."
        ) from exc


def _tls_context(settings: MailSettings) -> ssl.SSLContext:
    """Certificates checked against the system's CAs, or only those of `ca_file`."""
    if settings.ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(settings.ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(
            f"The CA file {str(settings.ca_file)!r} of the [tools.mail] settings cannot be "
            f"loaded ({exc}). Give a readable PEM file of CA certificates, or remove ca_file "
            "to trust the system's CAs."
        ) from exc


def _tls_failed(settings: MailSettings, exc: ssl.SSLError) -> ToolError:
    where = f"{settings.host}:{settings.port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ToolError(
            f"TLS with the IMAP server {where} failed: its certificate is not trusted "
            f"({exc.verify_message}). If the server uses its own CA, set ca_file in "
            "[tools.mail] to that CA's PEM file; check that host is the name the certificate "
            "is for."
        )
    return ToolError(
        f"TLS with the IMAP server {where} failed ({exc.reason or exc}). If the port speaks "
        "plain IMAP, set security = 'starttls' (or 'none' on this machine) in [tools.mail]."
    )


def _password(settings: MailSettings, tool_name: str) -> str:
    if settings.password_env is None:
        raise ToolError(
            f"{tool_name} has no IMAP password: password_env is not set in the [tools.mail] "
            "settings. Set it to the NAME of an environment variable that holds the password."
        )
    password = os.environ.get(settings.password_env)
    if password is None:
        raise ToolError(
            f"The IMAP password is read from the environment variable "
            f"{settings.password_env!r}, which is not set. Set it where wakeful runs (or change "
            f"password_env in [tools.mail]), then call {tool_name} again."
        )
    if any(c in password for c in "\r\n\0"):
        raise ToolError(
            f"The IMAP password in the environment variable {settings.password_env!r} contains "
            "a line break or NUL, which IMAP cannot send (a trailing newline from a file, "
            "perhaps). Set the variable to the password alone."
        )
    return password


def _parse_fetch(lines: Sequence[bytes | bytearray]) -> list[Fetched]:
    """The messages of a FETCH answer: attributes from its lines, sections from its literals."""
    found: list[Fetched] = []
    current: Fetched | None = None
    pending: str | None = None
    for line in lines:
        if isinstance(line, bytearray):
            if current is not None and pending is not None:
                current.sections[pending] = bytes(line)
            pending = None
            continue
        if _FETCH_START.match(line):
            current = Fetched()
            found.append(current)
        if current is None:
            continue
        if (m := _UID.search(line)) is not None:
            current.uid = int(m.group(1))
        if (m := _FLAGS.search(line)) is not None:
            # \Recent says only which session saw the message first: noise to a reader.
            flags = m.group(1).decode(errors="replace").split()
            current.flags = tuple(f for f in flags if f.lower() != "\\recent")
        if (m := _SIZE.search(line)) is not None:
            current.size = int(m.group(1))
        if (m := _INTERNALDATE.search(line)) is not None:
            current.internal_date = m.group(1).decode(errors="replace")
        if (m := _LITERAL_SECTION.search(line)) is not None:
            pending = m.group(1).decode(errors="replace")
    return found


def _first_number(pattern: re.Pattern[bytes], response: aioimaplib.Response) -> int | None:
    for line in response.lines:
        if isinstance(line, bytes) and (m := pattern.search(line)) is not None:
            return int(m.group(1))
    return None


def _copied_as(response: aioimaplib.Response) -> tuple[int, int] | None:
    for line in response.lines:
        if isinstance(line, bytes) and (m := _COPYUID.search(line)) is not None:
            return int(m.group(1)), int(m.group(2))
    return None


def _said(response: aioimaplib.Response) -> str:
    """What the server said with a refusal: its last line, as text."""
    text = [bytes(line).decode(errors="replace") for line in response.lines if line]
    return f"{response.result} {text[-1]}" if text else response.result


def _names(boxes: Sequence[Mailbox]) -> str:
    return ", ".join(repr(b.name) for b in boxes) or "(none)"
