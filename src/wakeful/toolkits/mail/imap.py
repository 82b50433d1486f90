"""The mail tools' IMAP account: a session of the IMAP edge (:mod:`wakeful.imap`), opened for
one tool call.

`MailAccount.open` connects (TLS, STARTTLS or plain), logs in and logs out again; in between a
tool selects a mailbox (read-only with EXAMINE unless it changes something), checks the
UIDVALIDITY it was given, and runs UID commands (SPECIAL-USE, MOVE or its COPY fallback). Every
failure of the server or the connection becomes a ToolError that names the account and says what
to do; the edge's errors never leave this module.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final, TypeVar

from ... import imap
from ...env_secrets import secret_for_tool
from ...errors import ToolError
from ...imap import ImapResponse, ImapSession, TlsMode, refusal_text
from .mailbox_names import canonical_mailbox, decode_mailbox, quoted, quoted_mailbox
from .search_query import SearchCriteria
from .settings import MailSettings

__all__ = ["Fetched", "MailAccount", "Mailbox", "Selected"]

T = TypeVar("T")
_TLS_MODES: Final[dict[str, TlsMode]] = {"ssl": "implicit", "starttls": "starttls", "none": "plain"}
_FETCH_START = re.compile(rb"^\d+ FETCH \(")
_UID = re.compile(rb"\bUID (\d+)")
_FLAGS = re.compile(rb"\bFLAGS \(([^)]*)\)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_INTERNALDATE = re.compile(rb'\bINTERNALDATE "([^"]*)"')
_LITERAL_SECTION = re.compile(rb"(BODY\[[^\]]*\](?:<\d+>)?) \{\d+\}$")
_LIST_LINE = re.compile(rb'^\(([^)]*)\) (?:"(?:[^"\\]|\\.)*"|NIL) (.*)$')
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

    def __init__(self, session: ImapSession, settings: MailSettings, tool_name: str) -> None:
        self._session = session
        self._client = session.client
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
        username = quoted(settings.username, what="username")
        endpoint = imap.ImapEndpoint(
            host=settings.host,
            port=settings.port,
            tls=_TLS_MODES[settings.security],
            ca_file=settings.ca_file,
            timeout_seconds=settings.timeout_seconds,
        )
        try:
            async with ImapSession.open(endpoint, username, password) as session:
                yield cls(session, settings, tool_name)
        except imap.ImapError as exc:
            # Raised while connecting: the block's own commands raise ToolError already.
            raise _not_opened(exc, settings, tool_name) from (exc.__cause__ or exc)

    @property
    def _where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def has(self, capability: str) -> bool:
        return self._session.has(capability)

    async def _run(self, doing: str, command: Awaitable[T]) -> T:
        """Await one command, within the timeout; a failure becomes a ToolError."""
        try:
            return await self._session.run(
                doing, command, limit_seconds=self.settings.timeout_seconds
            )
        except imap.CommandFailed as exc:
            raise _command_failed(exc, doing, self.settings, self.tool_name) from (
                exc.__cause__ or exc
            )

    # --- mailboxes ------------------------------------------------------------------------------

    async def mailboxes(self) -> list[Mailbox]:
        """Every mailbox of the account, with its attributes."""
        response = await self._run(
            "list the mailboxes", self._client.protocol.simple_command("LIST", '""', '"*"')
        )
        if response.result != "OK":
            raise ToolError(
                f"The IMAP server {self._where} refused LIST: {refusal_text(response)}."
            )
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
        try:
            state = await self._session.select(quoted_mailbox(mailbox), read_only=not writable)
        except imap.MailboxRefused as exc:
            raise await self._no_such_mailbox(mailbox, exc.said) from None
        except imap.NoUidValidity as exc:
            raise ToolError(
                f"The IMAP server {self._where} opened {mailbox!r} without saying its "
                "UIDVALIDITY, so its UIDs cannot be trusted. This server is not supported."
            ) from exc
        except imap.CommandFailed as exc:
            raise _command_failed(exc, f"open {mailbox!r}", self.settings, self.tool_name) from (
                exc.__cause__ or exc
            )
        current = state.uidvalidity
        if uidvalidity is not None and uidvalidity != current:
            raise ToolError(
                f"The mailbox {mailbox!r} was renumbered: its UIDVALIDITY is now {current}, not "
                f"{uidvalidity}, so the uid you have names another message or none. Find the "
                "message again with search_mail and use its new uid and uidvalidity."
            )
        self.selected = Selected(mailbox, current)
        return self.selected

    async def _no_such_mailbox(self, mailbox: str, said: str) -> ToolError:
        """Why the server would not open `mailbox`: it does not exist (the error lists those
        that do), or the server's own words."""
        boxes = await self.mailboxes()
        if all(b.name != mailbox for b in boxes):
            return ToolError(
                f"The mailbox {mailbox!r} does not exist on {self._where}. The mailboxes are: "
                f"{_names(boxes)}. Use one of them (names are case-sensitive, except INBOX)."
            )
        return ToolError(f"The IMAP server {self._where} would not open {mailbox!r}: {said}.")

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
                f"The IMAP server {self._where} refused the search: {refusal_text(response)}. "
                "Simplify the query (plain words) and try again."
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
            raise ToolError(
                f"The IMAP server {self._where} refused FETCH: {refusal_text(response)}."
            )
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
                f"{refusal_text(response)}."
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
                f"{refusal_text(response)}."
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
                f"from the original mailbox: {refusal_text(expunged)}. It is now in both."
            )
        return _copied_as(response)

    def _moved(self, uid: int, mailbox: str, response: ImapResponse) -> None:
        if response.result != "OK":
            said = refusal_text(response)
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


def _not_opened(exc: imap.ImapError, settings: MailSettings, tool_name: str) -> ToolError:
    """The tools' error for a failure to connect, start TLS or log in."""
    where = f"{settings.host}:{settings.port}"
    cause = exc.__cause__
    if isinstance(exc, imap.CaFileUnreadable):
        return ToolError(
            f"The CA file {str(settings.ca_file)!r} of the [tools.mail] settings cannot be "
            f"loaded ({cause}). Give a readable PEM file of CA certificates, or remove ca_file "
            "to trust the system's CAs."
        )
    if isinstance(exc, imap.StartTlsMissing):
        return ToolError(
            f"The IMAP server {where} does not offer STARTTLS, and the [tools.mail] settings ask "
            "for it (security = 'starttls'). Use security = 'ssl' with the server's TLS port "
            "(usually 993), or 'none' for a server on this machine only."
        )
    if isinstance(exc, imap.StartTlsRefused):
        return ToolError(f"The IMAP server {where} refused STARTTLS: {exc.said}.")
    if isinstance(exc, (imap.LoginRefused, imap.LoginDeferred)):
        return ToolError(
            f"The IMAP server {where} refused the login of {settings.username!r}: {exc.said}. "
            f"Check username and the password in the environment variable "
            f"{settings.password_env!r} ([tools.mail] settings); the tools do not retry, so the "
            "account is not locked by repeated attempts."
        )
    if isinstance(exc, imap.ConnectFailed) and isinstance(cause, ssl.SSLError):
        return _tls_failed(settings, cause)
    if isinstance(exc, imap.StartTlsFailed):
        return _command_failed(exc, "start TLS", settings, tool_name)
    if isinstance(exc, imap.ConnectFailed):
        if isinstance(cause, TimeoutError):
            return ToolError(
                f"The IMAP server {where} did not greet within {settings.timeout_seconds:g} s. "
                "Check host, port and security in the [tools.mail] settings and that it is up."
            )
        if isinstance(cause, ConnectionRefusedError):
            return ToolError(
                f"The IMAP server {where} refused the connection: nothing listens there. Check "
                "that it is running and that host and port in the [tools.mail] settings are "
                "right."
            )
        return ToolError(
            f"Could not connect to the IMAP server {where} ({type(cause).__name__}: {cause}). "
            "Check host and port in the [tools.mail] settings and that the server is up."
        )
    if isinstance(exc, imap.CommandFailed):
        return _command_failed(exc, "log in", settings, tool_name)
    return ToolError(f"{exc} Check the [tools.mail] settings, then call {tool_name} again.")


def _command_failed(
    exc: imap.CommandFailed, doing: str, settings: MailSettings, tool_name: str
) -> ToolError:
    """The tools' error for a command that failed at the connection (timeout, socket, loss)."""
    where = f"{settings.host}:{settings.port}"
    cause = exc.__cause__
    if isinstance(cause, TimeoutError):
        return ToolError(
            f"The IMAP server {where} did not answer within {settings.timeout_seconds:g} s "
            f"(while trying to {doing}). Check that it is up, then call the tool again."
        )
    detail = f"{type(cause).__name__}: {cause}" if cause is not None else "it closed the connection"
    return ToolError(
        f"The connection to the IMAP server {where} failed while trying to {doing} ({detail}). "
        f"Check that the server is up, then call {tool_name} again."
    )


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
    password = secret_for_tool(
        settings.password_env,
        what="The IMAP password",
        setting="password_env in [tools.mail]",
        tool=tool_name,
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


def _first_number(pattern: re.Pattern[bytes], response: ImapResponse) -> int | None:
    for line in response.lines:
        if isinstance(line, bytes) and (m := pattern.search(line)) is not None:
            return int(m.group(1))
    return None


def _copied_as(response: ImapResponse) -> tuple[int, int] | None:
    for line in response.lines:
        if isinstance(line, bytes) and (m := _COPYUID.search(line)) is not None:
            return int(m.group(1)), int(m.group(2))
    return None


def _names(boxes: Sequence[Mailbox]) -> str:
    return ", ".join(repr(b.name) for b in boxes) or "(none)"
