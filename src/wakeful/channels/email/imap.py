"""The email channel: new mail in one IMAP mailbox becomes `email.received` events, in seconds
(IMAP IDLE, RFC 2177) or every poll interval where the server offers no IDLE.

The cursor is the mailbox's (UIDVALIDITY, last UID), kept in the store and advanced only after
the Inbox has stored the events up to it, so a crash at any point re-reads a little and never
skips: what is re-read has the same event id (from its Message-ID, or a hash of its bytes) and
the Inbox drops it as a duplicate. When the server gives the mailbox a new UIDVALIDITY (it was
recreated, or restored), old UIDs mean nothing: the channel re-reads what arrived since a day
before its last sync, and the same ids make what it had seen duplicates again.

On the very first start the channel takes the unread mail (the newest `first_sync_limit`), or
nothing with `first_sync = "new_only"`. A lost connection is retried with exponential backoff
(up to `max_backoff_seconds`); a refused login waits `auth_failure_backoff_seconds` (15 minutes)
so that retries never get the account locked; both are said in :meth:`EmailChannel.health`.
The thread's earlier messages (summaries of those this channel delivered) are kept beside the
cursor, so an event carries its thread without a query.

The channel also carries messages to the user (:class:`wakeful.core.channel.UserReach`, in
:mod:`.outbound`). When the user's address is this mailbox, its copies arrive here: each is
recognised by the record of what was sent (:mod:`.copies`) and never becomes an event (the
message is stored already, as the outbox's), and after each sync the channel checks whether the
user opened one of them in their mail program (its `\\Seen` flag) and reports it read through
the context's `reads`.

A reply from the user's own (authenticated) address to a copy reads it too, and its event names
the message it answers (`answers_message`); when it answers a card with a button's label (or
number) on its first line, it is that button's press, a `user.action` event in the card's
session, as the web console's buttons give. The user's own mail is remembered per session
(:mod:`.conversations`), so the agent's answer goes back in its thread.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus

from ...core.channel import ChannelContext, ChannelHealth, ChannelState, Delivery
from ...core.records import OutboundMessage
from ...errors import StoreError
from ...events import USER_ACTION, Event, InvalidEvent
from .connection import (
    IdleRefused,
    ImapConnection,
    ImapLoginRefused,
    ImapUnavailable,
    tls_context,
)
from .conversations import Conversation, Conversations
from .copies import SentCopies, SentCopy
from .outbound import SEEN, WAKEFUL_HEADER, EmailOutbound
from .parse import MALFORMED, AddressBook, ReceivedMail, mail_event, read_mail, unreadable_mail
from .settings import EmailChannelSettings

__all__ = ["EmailChannel", "MailboxCursor"]

log = logging.getLogger(__name__)

CURSOR_KEY: Final = "position"
# A batch of mail fetched and delivered together: at most this many messages or bytes.
BATCH_MESSAGES: Final = 25
BATCH_BYTES: Final = 16 * 1024 * 1024
# The most bytes of JSON an email event may take; a bigger one is shrunk (addresses and text
# cut) rather than refused, so one odd mail can never stop the mailbox.
MAX_EVENT_JSON_BYTES: Final = 512 * 1024
RESYNC_MARGIN: Final = timedelta(days=1)
# The most bytes of a mail read for its headers before it is parsed (to tell the channel's own
# copies from other mail without parsing a large one twice).
MAX_HEADER_BYTES: Final = 256 * 1024
# A Message-ID fit to be written into an answer's In-Reply-To and References as it is.
_PLAIN_ID: Final = re.compile(r"^<[!-;=?-~]{1,500}>$")
_BARE_KEYS: Final = (
    "from",
    "subject",
    "date",
    "message_id",
    "relation",
    "auth",
    "suspicious",
    "mailbox",
    "uid",
    "uidvalidity",
)


@dataclass(frozen=True)
class MailboxCursor:
    """How far the channel has read: the mailbox's UIDVALIDITY, the last UID delivered, and
    when (for a re-sync after the UIDVALIDITY changed)."""

    uidvalidity: int
    uid: int
    at: datetime

    def to_json(self) -> str:
        return json.dumps(
            {"uidvalidity": self.uidvalidity, "uid": self.uid, "at": self.at.isoformat()}
        )

    @classmethod
    def from_json(cls, text: str) -> MailboxCursor:
        data = json.loads(text)
        return cls(int(data["uidvalidity"]), int(data["uid"]), datetime.fromisoformat(data["at"]))


class EmailChannel:
    """One IMAP mailbox as a channel; see the module docs."""

    def __init__(self, settings: EmailChannelSettings, context: ChannelContext) -> None:
        self._settings = settings
        self._context = context
        self._book = AddressBook(
            user=frozenset(settings.user_addresses), contacts=settings.contact_entries()
        )
        self._health = ChannelHealth("starting", f"connecting to {self._where}")
        self._last_event_at: datetime | None = None
        self._cursor: MailboxCursor | None = None
        self._failures = 0  # connection failures in a row, for the backoff
        self._copies = SentCopies(context.cursors, context.name)
        self._conversations = Conversations(context.cursors, context.name)
        self._outbound = EmailOutbound(settings, context, self._copies, self._conversations)

    @property
    def name(self) -> str:
        return self._context.name

    @property
    def settings(self) -> EmailChannelSettings:
        return self._settings

    def health(self) -> ChannelHealth:
        return ChannelHealth(self._health.state, self._health.detail, self._last_event_at)

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        """Mail `message` to the user (see :mod:`.outbound`); the copy's Message-ID."""
        return await self._outbound.send_to_user(message)

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        """Mark the copy read (`\\Seen`) in the watched mailbox; False when it is not there."""
        return await self._outbound.show_read(message, channel_message_id)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the mailbox until cancelled, reconnecting as needed."""
        settings = self._settings
        password = settings.password()
        context = tls_context(settings)
        task_status.started()
        self._failures = 0
        try:
            while True:
                try:
                    async with ImapConnection.open(settings, password, context) as connection:
                        await self._follow(connection)
                except ImapLoginRefused as exc:
                    wait = settings.auth_failure_backoff_seconds
                    self._set(
                        "degraded",
                        f"{exc} Retrying in {_duration(wait)}, not sooner, so "
                        "that retries never get the account locked.",
                    )
                    log.warning("%s: %s", self.name, self._health.detail)
                    await anyio.sleep(wait)
                except (ImapUnavailable, StoreError, OSError) as exc:
                    self._failures += 1
                    wait = min(settings.max_backoff_seconds, 2.0 ** (self._failures - 1))
                    wait *= random.uniform(0.5, 1.0)
                    again = f"Reconnecting in {wait:.1f} s (attempt {self._failures})."
                    self._set("degraded", f"{exc} {again}")
                    log.warning("%s: %s", self.name, self._health.detail)
                    await anyio.sleep(wait)
        finally:
            self._set("stopped", "")

    async def _learn_correspondents(self, connection: ImapConnection) -> None:
        """Count everyone the user wrote to (the Sent mailbox) as a contact, on each connection
        (new sent mail is seen at the next one)."""
        settings = self._settings
        if settings.sent_mailbox is None:
            return
        found = await connection.correspondents(
            settings.sent_mailbox, settings.correspondents_limit
        )
        if found is None:
            log.info(
                "%s: no mailbox %r on the server, so no contacts are learned from sent mail; "
                "set sent_mailbox to its name (or to nothing to stop looking)",
                self.name,
                settings.sent_mailbox,
            )
            return
        self._book = replace(self._book, correspondents=found - self._book.user)

    async def _follow(self, connection: ImapConnection) -> None:
        """Deliver what is new, then wait for more (IDLE or polling), until the connection
        fails."""
        settings = self._settings
        await self._learn_correspondents(connection)
        state = await connection.select(settings.mailbox)
        await self._catch_up(connection, state.uidvalidity, state.uidnext)
        idle = settings.idle and connection.has_idle
        if idle:
            watching = f"waiting for mail in {self._where} (IMAP IDLE)"
        else:
            why = " (the server offers no IDLE)" if settings.idle else ""
            watching = (
                f"checking {self._where} every {_duration(settings.poll_interval_seconds)}{why}"
            )
        while True:
            await self._deliver_new(connection, state.uidvalidity)
            await self._report_reads(connection, state.uidvalidity)
            self._set("running", watching)
            self._failures = 0  # connected and caught up: the next outage backs off afresh
            if idle:
                try:
                    await connection.idle(settings.idle_renew_seconds)
                except IdleRefused as exc:
                    idle = False
                    every = _duration(settings.poll_interval_seconds)
                    watching = f"checking {self._where} every {every} ({exc})"
                    log.warning("%s: %s; polling instead", self.name, exc)
            else:
                await anyio.sleep(settings.poll_interval_seconds)

    async def _catch_up(
        self, connection: ImapConnection, uidvalidity: int, uidnext: int | None
    ) -> None:
        """Set the cursor for this mailbox: the stored one, or after a first start or a changed
        UIDVALIDITY, one past what was delivered now."""
        stored = await self._context.cursors.get(self.name, CURSOR_KEY)
        cursor = MailboxCursor.from_json(stored) if stored else None
        if cursor is not None and cursor.uidvalidity == uidvalidity:
            self._cursor = cursor
            return
        backlog: list[int] = []
        if cursor is None:
            if self._settings.first_sync == "unseen":
                backlog = (await connection.unseen_uids())[-self._settings.first_sync_limit :]
            why = "first start"
        else:
            since = (cursor.at - RESYNC_MARGIN).date()
            backlog = await connection.uids_since(since)
            why = (
                f"the mailbox's UIDVALIDITY changed from {cursor.uidvalidity} to {uidvalidity}; "
                f"re-reading what arrived since {since.isoformat()}"
            )
            log.warning("%s: %s", self.name, why)
        self._cursor = MailboxCursor(uidvalidity, 0, datetime.now(UTC))
        # On a first start the cursor moves only once the backlog is in: a crash meanwhile
        # takes the backlog again (duplicates), never the read mail after it. After a re-sync
        # it moves batch by batch, which skips nothing either: what follows has higher UIDs.
        await self._deliver(connection, backlog, uidvalidity, advance=cursor is not None)
        last = max([(uidnext or 1) - 1, *backlog])
        await self._save_cursor(MailboxCursor(uidvalidity, last, datetime.now(UTC)))
        log.info("%s: %s; following from UID %d", self.name, why, last)

    async def _deliver_new(self, connection: ImapConnection, uidvalidity: int) -> None:
        """Deliver every message past the cursor, until a search finds none and the server
        announced no new mail meanwhile."""
        while True:
            assert self._cursor is not None
            notices = connection.exists_notices
            new = await connection.uids_after(self._cursor.uid)
            if new:
                await self._deliver(connection, new, uidvalidity)
            elif connection.exists_notices == notices:
                return

    async def _deliver(
        self,
        connection: ImapConnection,
        uids: Sequence[int],
        uidvalidity: int,
        *,
        advance: bool = True,
    ) -> None:
        """Fetch, parse and deliver `uids` in batches, advancing the cursor after each unless
        `advance` is off."""
        if not uids:
            return
        sizes = await connection.sizes(list(uids))
        for batch in _batches([uid for uid in uids if uid in sizes], sizes):
            fetched = await connection.fetch(batch)
            threads: dict[str, list[dict[str, str]]] = {}
            events: list[Event] = []
            replied: set[str] = set()  # copies the user answered, so read
            conversations: dict[str, Conversation] = {}  # the user's latest mail, by session
            for uid in batch:
                raw = fetched.get(uid)
                if raw is None:
                    continue  # expunged between the search and the fetch: nothing to deliver
                if await self._is_own_copy(raw, uid, uidvalidity):
                    continue
                mail = await anyio.to_thread.run_sync(partial(self._read, raw))
                history = await self._thread_history(mail.thread_id, threads)
                previous = [entry for entry in history if entry.get("id") != mail.source_id]
                where = {"mailbox": self._settings.mailbox, "uid": uid, "uidvalidity": uidvalidity}
                answered = await self._copies.find(str(mail.content.get("in_reply_to") or ""))
                if answered is not None:
                    where["answers_message"] = answered.message_id
                    if mail.source.type == "user":
                        replied.add(answered.copy_id)
                recent = previous[-self._settings.thread_history :]
                pressed = _pressed(mail, answered, self.name)
                event = pressed or self._event(mail, recent, where)
                events.append(event)
                conversation = _conversation(mail)
                if conversation is not None and pressed is None:
                    conversations[event.session] = conversation
                history[:] = [*previous, {"id": mail.source_id, **mail.summary}][-50:]
            if events:
                outcomes = await self._hand_over(events)
                if any(outcome != "duplicate" for outcome in outcomes):
                    self._last_event_at = datetime.now(UTC)
                await self._remember_threads(threads)
                for session, conversation in conversations.items():
                    await self._conversations.record(session, conversation)
                await self._report_replies(replied)
            if advance and (
                self._cursor is None
                or max(batch) > self._cursor.uid
                or self._cursor.uidvalidity != uidvalidity
            ):
                await self._save_cursor(MailboxCursor(uidvalidity, max(batch), datetime.now(UTC)))

    async def _is_own_copy(self, raw: bytes, uid: int, uidvalidity: int) -> bool:
        """Whether `raw` is a copy this channel sent to the user (then its place is noted, for
        its read state): the message is stored already, and the user reading their own
        message must never wake the agent. It is one when its Message-ID is one the channel
        made, even with its X-Wakeful-Message header stripped on the way; a mail that only
        claims to be one, by that header, is not."""
        try:
            parser = email.parser.BytesHeaderParser(policy=email.policy.default)
            headers = parser.parsebytes(_head(raw))
            copy_id, claimed = headers.get("Message-ID"), headers.get(WAKEFUL_HEADER)
        except MALFORMED:
            return False  # read_mail makes what it can of it, as of any mail
        copy = await self._copies.own_copy(
            None if copy_id is None else str(copy_id).strip(),
            None if claimed is None else str(claimed),
        )
        if copy is None:
            if claimed is not None:
                log.info(
                    "%s: a mail at UID %d says it is a copy of %r, which this channel did not "
                    "send; it is delivered as any other mail",
                    self.name,
                    uid,
                    str(claimed),
                )
            return False
        await self._copies.placed(copy.copy_id, uid, uidvalidity)
        log.debug("%s: UID %d is the copy of %s sent to the user", self.name, uid, copy.message_id)
        return True

    async def _report_replies(self, copy_ids: set[str]) -> None:
        """The user answered these copies (from their own, authenticated address): they read
        them."""
        reads = self._context.reads
        if reads is None or not copy_ids:
            return
        for copy_id in copy_ids:
            await reads.copy_read(self.name, copy_id)
        await self._copies.mark_read(copy_ids)

    async def _report_reads(self, connection: ImapConnection, uidvalidity: int) -> None:
        """Report read the copies the user has opened here since the last sync (flagged
        `\\Seen` by their mail program), as reading the message anywhere."""
        reads = self._context.reads
        if reads is None:
            return
        watched = await self._copies.watched(uidvalidity)
        if not watched:
            return
        flags = await connection.flags([copy.uid for copy in watched if copy.uid is not None])
        gone = {copy.copy_id for copy in watched if copy.uid not in flags}
        seen = {copy.copy_id for copy in watched if SEEN in flags.get(copy.uid or 0, ())}
        for copy_id in seen:
            newly = await reads.copy_read(self.name, copy_id)
            if newly:
                log.info("%s: the user read %s in their mail program", self.name, newly)
        await self._copies.mark_read(seen)
        await self._copies.lost(gone)

    async def _hand_over(self, events: list[Event]) -> list[Delivery]:
        """Deliver a batch in one write; when the Inbox refuses one as too large (its cap is
        the runtime's), each on its own, a refused one cut to its headers and the start of
        its text, and one refused even so left out with an error logged, so that one mail can
        never hold up the mailbox."""
        inbox = self._context.inbox
        try:
            return await inbox.deliver_many([(event, None) for event in events])
        except InvalidEvent:
            outcomes: list[Delivery] = []
            for event in events:
                try:
                    outcomes.append(await inbox.deliver(event))
                except InvalidEvent:
                    try:
                        outcomes.append(await inbox.deliver(_bare(event)))
                    except InvalidEvent as exc:
                        log.error("%s: mail %s left out: %s", self.name, event.id, exc)
            return outcomes

    def _read(self, raw: bytes) -> ReceivedMail:
        settings = self._settings
        try:
            return read_mail(
                raw,
                channel=self.name,
                workspace=self._context.workspace,
                book=self._book,
                authserv_id=settings.authserv_id,
                max_text_chars=settings.max_text_chars,
            )
        except MALFORMED as exc:
            log.warning("%s: a mail could not be parsed (%r); delivering it raw", self.name, exc)
            return unreadable_mail(raw, channel=self.name, workspace=self._context.workspace)

    def _event(
        self, mail: ReceivedMail, previous: list[dict[str, str]], where: dict[str, Any]
    ) -> Event:
        """The mail's event; `where` (mailbox, uid, uidvalidity) is what the mail tools take to
        act on it (read_mail, draft_reply, flag_mail, archive_mail), with `answers_message` (a
        `msg_…` id) when the mail replies to a message the channel sent the user."""
        event = mail_event(
            mail, channel=self.name, session=self._session_for(mail), previous=previous
        )
        if isinstance(event.content, dict):
            event = event.model_copy(update={"content": {**event.content, **where}})
        if len(event.to_json().encode()) > MAX_EVENT_JSON_BYTES:
            event = _shrunk(event)
        return event

    def _session_for(self, mail: ReceivedMail) -> str:
        settings = self._settings
        if settings.sessions == "one":
            return settings.session
        if settings.sessions == "per_sender":
            return f"{settings.session}:from-{mail.sender or 'unknown'}"
        return f"{settings.session}:thread-{_short_hash(mail.thread_id)}"

    async def _thread_history(
        self, thread_id: str, threads: dict[str, list[dict[str, str]]]
    ) -> list[dict[str, str]]:
        if thread_id not in threads:
            stored = await self._context.cursors.get(self.name, _thread_key(thread_id))
            threads[thread_id] = list(json.loads(stored)) if stored else []
        return threads[thread_id]

    async def _remember_threads(self, threads: dict[str, list[dict[str, str]]]) -> None:
        for thread_id, history in threads.items():
            value = json.dumps(history, ensure_ascii=False)
            await self._context.cursors.put(self.name, _thread_key(thread_id), value)

    async def _save_cursor(self, cursor: MailboxCursor) -> None:
        await self._context.cursors.put(self.name, CURSOR_KEY, cursor.to_json())
        self._cursor = cursor

    def _set(self, state: ChannelState, detail: str) -> None:
        self._health = ChannelHealth(state, detail, self._last_event_at)

    @property
    def _where(self) -> str:
        s = self._settings
        return f"{s.mailbox} of {s.username} at {s.host}:{s.imap_port}"


def _batches(uids: list[int], sizes: dict[int, int]) -> list[list[int]]:
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for uid in uids:
        if current and (len(current) >= BATCH_MESSAGES or total + sizes[uid] > BATCH_BYTES):
            batches.append(current)
            current, total = [], 0
        current.append(uid)
        total += sizes[uid]
    if current:
        batches.append(current)
    return batches


def _shrunk(event: Event) -> Event:
    """A copy of an oversized email event that fits: long lists and the text cut, saying so.
    (Attachments and long texts are already files; headers can still be huge.)"""
    content = dict(event.content) if isinstance(event.content, dict) else {}
    text = str(content.get("text", ""))[:4_000]
    content["text"] = text + "\n[Cut: this mail was too large for one event.]"
    content["attachments"] = (content.get("attachments") or [])[:50]
    return event.model_copy(update={"content": content})


def _bare(event: Event) -> Event:
    """The smallest useful form of an email event: who, what about, the start of the text."""
    content = event.content if isinstance(event.content, dict) else {}
    kept: dict[str, Any] = {key: content[key] for key in _BARE_KEYS if key in content}
    kept["subject"] = str(kept.get("subject", ""))[:200]
    kept["text"] = str(content.get("text", ""))[:1_000] + (
        "\n[Cut: this mail was too large for an event; read it with the mail tools.]"
    )
    attachments = content.get("attachments") or []
    kept["attachments"] = [{"name": a.get("name"), "path": a.get("path")} for a in attachments[:10]]
    return event.model_copy(update={"content": kept, "context": {}})


def _pressed(mail: ReceivedMail, answered: SentCopy | None, channel: str) -> Event | None:
    """The `user.action` of the user's reply to a card's copy that names one of its buttons
    (the payload the web console's buttons give, in the card's session); None for any other
    mail, and for a reply from anyone but the user (authenticated)."""
    if answered is None or not answered.actions or mail.source.type != "user":
        return None
    reply = str(mail.content.get("text") or "")
    action_id = answered.choice(reply)
    if action_id is None:
        return None
    card_id = answered.message_id
    return Event(
        id=mail.event_id,
        kind=USER_ACTION,
        source=mail.source,
        channel=channel,
        content={"card_id": card_id, "action_id": action_id, "message_id": card_id},
        context={"reply": reply[:2_000], "thread": mail.thread_id},
        session=answered.session or "main",
    )


def _conversation(mail: ReceivedMail) -> Conversation | None:
    """The mail as the user's latest in its session's conversation, when the user wrote it
    (authenticated) and it has a Message-ID to answer; None otherwise."""
    message_id = str(mail.content.get("message_id") or "")
    if mail.source.type != "user" or not _PLAIN_ID.match(message_id):
        return None
    thread_id = mail.thread_id if _PLAIN_ID.match(mail.thread_id) else message_id
    subject = " ".join(str(mail.content.get("subject") or "").split())[:200]
    return Conversation(message_id, thread_id, subject, mail.sender.lower())


def _head(raw: bytes) -> bytes:
    """The header section of a mail (up to its first empty line), at most MAX_HEADER_BYTES."""
    start = raw[:MAX_HEADER_BYTES]
    ends = [found for found in (start.find(b"\r\n\r\n"), start.find(b"\n\n")) if found >= 0]
    return start[: min(ends) + 2] if ends else start


def _thread_key(thread_id: str) -> str:
    return "thread:" + _short_hash(thread_id)


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:g} s"
