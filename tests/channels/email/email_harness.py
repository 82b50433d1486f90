"""What the email channel tests share: the runtime's Inbox over a real Store, a channel on the
test Dovecot, delivering mail, waiting for events, and the user's own mail program."""

from __future__ import annotations

import contextlib
import email
import email.policy
import imaplib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any, TypeVar

import anyio

from wakeful.agent.router import Decision, Strategy
from wakeful.channels.email import KIND, EmailChannel, EmailChannelSettings
from wakeful.channels.filters import ChannelFilter
from wakeful.core.channel import ChannelContext, ReadReceipts
from wakeful.core.records import StoredEvent
from wakeful.events import DEFAULT_MAX_EVENT_BYTES, Event
from wakeful.runtime.inbox import FilteringInbox, RuntimeInbox
from wakeful.store.sqlite import Store

PASSWORD_ENV = "WAKEFUL_TEST_IMAP_PASSWORD"
CHANNEL = "email:test"
EX_TEMPFAIL = 75
T = TypeVar("T")


def runtime_inbox(store: Store, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> FilteringInbox:
    """The runtime's own Inbox over `store` (stores, drops redeliveries by id, scans for
    injected instructions), handing events to a list instead of sessions, with its counts of
    what was stored and what was a duplicate."""
    handed: list[Event] = []

    async def hand(event: Event) -> Decision:
        handed.append(event)
        return Decision(Strategy.QUEUE, reason="recorded by the test")

    inbox = RuntimeInbox(
        store=store,
        hand=hand,
        answers_approval=lambda event: False,
        max_event_bytes=max_event_bytes,
    )
    return FilteringInbox(inbox, ChannelFilter())


def email_channel(
    server: Any,
    store: Store,
    workspace: Path,
    *,
    inbox: FilteringInbox | None = None,
    reads: ReadReceipts | None = None,
    **overrides: Any,
) -> EmailChannel:
    settings = EmailChannelSettings.model_validate(
        {
            "host": server.host,
            "port": server.port,
            "tls": "plain",
            "username": server.user,
            "password_env": PASSWORD_ENV,
            "max_backoff_seconds": 0.5,
            **overrides,
        }
    )
    context = ChannelContext(
        name=CHANNEL,
        inbox=inbox or runtime_inbox(store),
        cursors=store.channel_cursors,
        workspace=workspace,
        reads=reads,
    )
    return KIND.build(settings, context)


def message(
    subject: str,
    *,
    sender: str = "Alice <alice@elsewhere.net>",
    text: str = "Hello.",
    headers: dict[str, str] | None = None,
    message_id: str | None = None,
) -> bytes:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = "secretary@example.com"
    mail["Subject"] = subject
    mail["Message-ID"] = message_id or f"<{uuid.uuid4().hex}@elsewhere.net>"
    for name, value in (headers or {}).items():
        mail[name] = value
    mail.set_content(text)
    return mail.as_bytes()


def retried(action: Callable[[], T]) -> T:
    """Run a doveadm command as a mail server does: a temporary failure (exit 75, EX_TEMPFAIL:
    Dovecot's auth service slow to answer on a busy machine) is tried again, a few times."""
    for attempt in range(10):
        try:
            return action()
        except subprocess.CalledProcessError as exc:
            if exc.returncode != EX_TEMPFAIL or attempt == 9:
                raise AssertionError(f"doveadm failed: {exc.stderr!r}") from exc
            time.sleep(0.5)
    raise AssertionError("unreachable")


def doveadm(server: Any, *args: str) -> str:
    """`server.doveadm(*args)`, with temporary failures tried again."""
    return retried(lambda: str(server.doveadm(*args)))


async def deliver(server: Any, raw: bytes, mailbox: str = "INBOX") -> None:
    """Deliver one message into `mailbox`, temporary failures tried again."""
    await anyio.to_thread.run_sync(retried, lambda: server.deliver(raw, mailbox))


async def email_events(store: Store) -> list[StoredEvent]:
    return [e for e in await store.events.recent(limit=10_000) if e.event.kind == "email.received"]


async def wait_for_events(store: Store, count: int, *, within: float = 45.0) -> list[Event]:
    """The email events once there are at least `count`; fails after `within` seconds."""
    found: list[StoredEvent] = []
    with anyio.move_on_after(within):
        # The store is the one place events show up, as a user would look for them.
        while len(found := await email_events(store)) < count:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    assert len(found) >= count, f"{len(found)} email events after {within} s, expected {count}"
    return [stored.event for stored in found]


async def wait_for_state(channel: EmailChannel, state: str, *, within: float = 45.0) -> str:
    """The channel's health detail once it is in `state`."""
    with anyio.move_on_after(within):
        while channel.health().state != state:  # noqa: ASYNC110 - health is read as doctor does
            await anyio.sleep(0.02)
    health = channel.health()
    assert health.state == state, f"channel is {health.state} ({health.detail}), not {state}"
    return health.detail


def stop_server(server: Any) -> None:
    """Stop the test Dovecot and drop its IMAP connections, as a crashed server would. (Its
    master leaves the IMAP processes of open connections running, so they are killed by pid;
    the stopped process's stderr pipe is closed, or it warns when collected.)"""
    if server.process is None:
        return  # stopped already
    pids = [int(line.split()[2]) for line in doveadm(server, "who", "-1").splitlines()[1:] if line]
    process = server.process
    server.stop()
    if process is not None and process.stderr is not None:
        process.stderr.close()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # it ended with the master
            os.kill(pid, signal.SIGKILL)


class MailProgram:
    """The user's mail program: its own IMAP connection to the mailbox (blocking; run it in a
    thread)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def _connect(self) -> imaplib.IMAP4:
        client = imaplib.IMAP4(self.server.host, self.server.port, timeout=30)
        client.login(self.server.user, self.server.password)
        client.select("INBOX")
        return client

    def _uids(self, client: imaplib.IMAP4, message_id: str) -> list[bytes]:
        status, found = client.uid("SEARCH", "HEADER", "Message-ID", f'"{message_id}"')
        assert status == "OK", found
        return found[0].split()

    def read(self, message_id: str) -> EmailMessage:
        """The mail with this Message-ID, without marking it read."""
        client = self._connect()
        try:
            uids = self._uids(client, message_id)
            assert len(uids) == 1, f"{len(uids)} mails with Message-ID {message_id}"
            status, data = client.uid("FETCH", uids[0], "(BODY.PEEK[])")
            assert status == "OK", data
            raw = data[0][1]
            assert isinstance(raw, bytes)
        finally:
            client.logout()
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed

    def flags(self, message_id: str) -> str:
        client = self._connect()
        try:
            uids = self._uids(client, message_id)
            status, data = client.uid("FETCH", uids[0], "(FLAGS)")
            assert status == "OK", data
            return str(data[0])
        finally:
            client.logout()

    def open(self, message_id: str) -> None:
        """The user opens the mail: the program sets its \\Seen flag."""
        client = self._connect()
        try:
            uids = self._uids(client, message_id)
            status, data = client.uid("STORE", uids[0], "+FLAGS", "(\\Seen)")
            assert status == "OK", data
        finally:
            client.logout()


async def in_thread(function: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(function, *args)
