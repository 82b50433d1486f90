"""The XMPP channel: one account, logged in with slixmpp inside the runtime's event loop, its
messages delivered to the Inbox as events (see :mod:`.inbound`).

slixmpp is asyncio code that schedules its own tasks on the running loop; the channel owns
each client for one connection only. It connects, waits for the session (or a refusal, or a
failure), reads the roster, announces itself and joins its rooms, then delivers until the
connection is lost; a new client is made for the next attempt, after a backoff that doubles
up to `max_backoff_seconds` (a refused login waits `auth_failure_backoff_seconds`, so that
retries never lock the account). slixmpp's own reconnection is not used: one owner decides when
to retry, and says so in :meth:`XmppChannel.health`.

Messages are handed from slixmpp's handlers to the delivering task through a memory stream, in
order, and delivered in bursts (`deliver_many`) of what has arrived. Messages stored by the
server while the agent was away (offline storage, XEP-0160) come on login. A message the
server handed over but the Inbox never stored (the runtime crashed, the disk was full) is read
again from the account's archive (XEP-0313) on the next login, from a little before the last
stored message (kept in the channel's cursors). Each message's id (XEP-0359 origin-id or
stanza-id, else a hash) makes a second delivery a duplicate. On joining
a room the channel asks for the history since it last heard from the room (kept beside the
cursors), or none on the first join.

The channel also carries messages to the user (:class:`~wakeful.core.channel.UserReach`; see
:mod:`.outbound`): :meth:`XmppChannel.send_to_user` sends one, and the receipts, markers and
replies that come back about it are reported to the runtime's read receipts in order with the
messages, never handed to the agent.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ...core.channel import ChannelContext, ChannelHealth, ChannelState
from ...core.records import OutboundMessage
from ...errors import UserError
from ...events import Event, utc_now
from .inbound import (
    MessageType,
    ReceivedMessage,
    contact_matcher,
    full_text_path,
    message_event,
)
from .outbound import (
    RECEIPTS_NS,
    CopyReceipt,
    UserConversation,
    check_sendable,
    message_body,
    receipts_in,
    recipient,
)
from .settings import RoomSettings, XmppChannelSettings, bare_jid

__all__ = ["XmppChannel", "XmppUnavailable"]

log = logging.getLogger(__name__)

SID_NS: Final = "urn:xmpp:sid:0"
DELAY_NS: Final = "urn:xmpp:delay"
MUC_USER_NS: Final = "http://jabber.org/protocol/muc#user"
MESSAGE_TYPES: Final = frozenset({"chat", "normal", "groupchat", "headline"})
BURST: Final = 200
ROOM_SEEN_KEY: Final = "room-seen:"
ARCHIVE_SINCE_KEY: Final = "archive-since"
# The archive is read from a little before the last stored message: clocks differ, and what is
# read twice is recognised.
ARCHIVE_MARGIN: Final = timedelta(minutes=5)
ARCHIVE_PAGE: Final = 100
ARCHIVE_MOST: Final = 5_000
TO_USER_KEY: Final = "to-user"

Outcome = Literal["lost", "auth", "failed"]
# What slixmpp's handlers hand the delivering task, in the order it came.
Arrival = ReceivedMessage | CopyReceipt


class XmppUnavailable(UserError):
    """Raised by :meth:`XmppChannel.send` and :meth:`XmppChannel.send_to_user` when the
    channel is not connected to its server."""


class XmppChannel:
    """One XMPP account as a channel; see the module docs."""

    def __init__(self, settings: XmppChannelSettings, context: ChannelContext) -> None:
        self._settings = settings
        self._context = context
        self._health = ChannelHealth("starting", f"connecting to {self._where}")
        self._last_event_at: datetime | None = None
        self._client: Any = None  # the slixmpp ClientXMPP of the live session, if any
        self._rooms: dict[str, RoomSettings] = {room.jid: room for room in settings.rooms}
        self._to_user = UserConversation()

    @property
    def name(self) -> str:
        return self._context.name

    @property
    def settings(self) -> XmppChannelSettings:
        return self._settings

    @property
    def _where(self) -> str:
        host = self._settings.host or self._settings.domain
        return f"{self._settings.jid} at {host}:{self._settings.port}"

    def health(self) -> ChannelHealth:
        return ChannelHealth(self._health.state, self._health.detail, self._last_event_at)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Stay logged in and deliver messages until cancelled."""
        settings = self._settings
        password = settings.password()
        for room in settings.rooms:
            settings.room_password(room)  # a missing variable is said now, not at each join
        kept = await self._context.cursors.get(self.name, TO_USER_KEY)
        self._to_user = UserConversation.from_json(kept)
        send, receive = anyio.create_memory_object_stream[Arrival](math.inf)
        task_status.started()
        try:
            async with anyio.create_task_group() as group, send, receive:
                group.start_soon(self._deliver_all, receive)
                await self._stay_connected(password, send)
        finally:
            self._set("stopped", "stopped")

    async def send(self, to: str, text: str) -> None:
        """Send `text` to `to` (a person's JID, or a room the channel has joined);
        XmppUnavailable when the channel is not connected now."""
        client = self._connected()
        room = bare_jid(to)
        kind = "groupchat" if room in self._rooms else "chat"
        client.send_message(mto=room if kind == "groupchat" else to, mbody=text, mtype=kind)

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        """Send a stored message to the user (see :class:`~wakeful.core.channel.UserReach` and
        :mod:`.outbound`) and return the copy's stanza id. XmppUnavailable when the channel is
        not connected, XmppUnsendable when XMPP cannot carry the text; nothing is sent then."""
        client = self._connected()
        to, kind = recipient(self._settings, message.session, self._to_user.jid)
        if kind == "groupchat" and not self._in_room(client, to):
            # The room refused the channel, or the join is under way: the user's own account.
            to, kind = recipient(self._settings, self._settings.user_session, self._to_user.jid)
        body = message_body(message, answerable=kind == "chat")
        check_sendable(body, message_id=message.id, channel=self.name)
        stanza = client.make_message(mto=to, mbody=body, mtype=kind)
        copy_id = str(stanza["id"] or client.new_id())
        stanza["id"] = copy_id
        if kind == "chat":  # XEP-0184: never in a room
            stanza["request_receipt"] = True
        stanza.enable("markable")
        if kind == "chat":
            # Kept before sending: a store that cannot keep it fails the delivery with nothing
            # sent, rather than after the user got the copy (the next channel would repeat it).
            self._to_user.sent(message, copy_id, utc_now())
            await self._context.cursors.put(self.name, TO_USER_KEY, self._to_user.to_json())
            if self._connected() is not client:  # the connection was lost meanwhile
                raise XmppUnavailable(
                    f"The XMPP channel {self.name} lost its connection before the message "
                    "was sent; it was not sent. It reconnects by itself."
                )
        stanza.send()
        return copy_id

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        """XMPP cannot show on the user's copy that they read it elsewhere: read markers
        (XEP-0333) are sent by the reader, and a marker from the agent would say the agent read
        its own message. Nothing is changed; always False."""
        return False

    def _in_room(self, client: Any, room: str) -> bool:
        try:
            return self._rooms[room].nick in client.plugin["xep_0045"].get_roster(room)
        except ValueError:  # never joined
            return False

    def _connected(self) -> Any:
        client = self._client
        if client is None:
            raise XmppUnavailable(
                f"The XMPP channel {self.name} is not connected ({self._health.detail}); the "
                "message was not sent. Try again when `wakeful doctor` shows it running."
            )
        return client

    def _queue(self, message: ReceivedMessage, send: MemoryObjectSendStream[Arrival]) -> None:
        """Hand a received message to the delivering task; one from the user's own account
        first says what it answers (a card's button) and which copies it shows read."""
        if message.type != "groupchat" and bare_jid(message.sender) in self._settings.user_jids:
            answer, read = self._to_user.user_wrote(message)
            send.send_nowait(replace(message, answer=answer))
            for copy_id in read:
                send.send_nowait(CopyReceipt(copy_id, "read"))
            return
        send.send_nowait(message)

    # The connection.

    async def _stay_connected(self, password: str, send: MemoryObjectSendStream[Arrival]) -> None:
        settings = self._settings
        failures = 0
        while True:
            outcome, detail, was_running = await self._one_session(password, send)
            failures = 0 if was_running else failures + 1
            if outcome == "auth":
                wait = settings.auth_failure_backoff_seconds
                self._set(
                    "degraded",
                    f"The server refused the login of {settings.jid} ({detail}). Retrying in "
                    f"{wait:g} s, not sooner, so that retries never get the account locked.",
                )
            else:
                wait = min(
                    settings.max_backoff_seconds,
                    settings.min_backoff_seconds * 2 ** max(0, failures - 1),
                )
                what = "lost the connection to" if was_running else "could not connect to"
                self._set("degraded", f"{what} {self._where} ({detail}); retrying in {wait:g} s")
            log.warning("%s: %s", self.name, self._health.detail)
            await anyio.sleep(wait)

    async def _one_session(
        self, password: str, send: MemoryObjectSendStream[Arrival]
    ) -> tuple[Outcome, str, bool]:
        """Connect once and deliver until the connection ends: (why it ended, a detail, whether
        the session had started)."""
        import slixmpp  # only a runtime with an XMPP channel loads it
        from slixmpp.exceptions import XMPPError

        settings = self._settings
        status_send, status_receive = anyio.create_memory_object_stream[tuple[str, str]](math.inf)
        client = slixmpp.ClientXMPP(settings.jid, password)
        client.enable_direct_tls = settings.tls == "direct"
        client.enable_starttls = settings.tls == "starttls"
        client.enable_plaintext = settings.tls == "plain"
        client.register_plugin("xep_0045")
        client.register_plugin("xep_0313")
        # Receipts are asked for on the copies sent to the user. None is given automatically:
        # the user's messages get theirs once the Inbox stored them (one sooner would be a lie),
        # others' none (it would tell a stranger that the account reads what it sends).
        client.register_plugin("xep_0184", {"auto_ack": False})
        client.register_plugin("xep_0333")
        if settings.tls == "plain":
            client.plugin["feature_mechanisms"].unencrypted_plain = True

        def status(what: str, detail: object = "") -> None:
            # slixmpp reports the end of a connection this session has already left behind.
            with contextlib.suppress(anyio.ClosedResourceError):
                status_send.send_nowait((what, str(detail or "")))

        async def session_start(_: object) -> None:
            try:
                await client.get_roster(timeout=settings.timeout_seconds)
            except (XMPPError, TimeoutError) as exc:
                status("failed", f"the server did not give the roster: {exc!r}")
                return
            client.send_presence()
            status("started")
            await self._catch_up(client, send)
            for room in settings.rooms:
                # A room that cannot be joined leaves the rest of the channel working.
                try:
                    await self._join(client, room)
                except (XMPPError, TimeoutError) as exc:
                    status("room", f"could not join the room {room.jid} ({exc!r})")

        def on_message(stanza: Any) -> None:
            message = self._received(stanza, client)
            if message is not None:
                self._queue(message, send)

        def on_receipt(stanza: Any) -> None:
            for receipt in receipts_in(stanza.xml, settings):
                send.send_nowait(receipt)

        client.add_event_handler("session_start", session_start)
        client.add_event_handler("message", on_message)
        # Both fire for a stanza with a receipt and a marker: reporting twice changes nothing.
        client.add_event_handler("receipt_received", on_receipt)
        client.add_event_handler("marker", on_receipt)
        client.add_event_handler("failed_auth", lambda _: status("auth", "not authorized"))
        client.add_event_handler("connection_failed", lambda exc: status("failed", exc))
        client.add_event_handler("disconnected", lambda why: status("lost", why))
        client.add_event_handler("stream_error", lambda err: status("failed", err["text"]))

        running = False
        try:
            client.connect(settings.host, settings.port)
            async with status_send, status_receive:
                with anyio.move_on_after(settings.timeout_seconds) as waited:
                    what, detail = await status_receive.receive()
                if waited.cancelled_caught:
                    return "failed", f"no session after {settings.timeout_seconds:g} s", False
                if what == "auth":
                    return "auth", detail, False
                if what != "started":
                    return "failed", detail or "connection refused", False
                running = True
                self._client = client
                self._set("running", f"logged in as {client.boundjid.full}")
                log.info("%s: logged in as %s", self.name, client.boundjid.full)
                while True:
                    what, detail = await status_receive.receive()
                    if what in ("lost", "failed"):
                        return "lost", detail or "closed by the server", True
                    if what == "room":
                        self._set("degraded", f"logged in as {client.boundjid.full}, but {detail}")
                        log.warning("%s: %s", self.name, self._health.detail)
        finally:
            self._client = None
            with anyio.CancelScope(shield=True):
                await _close(client, graceful=running)

    async def _join(self, client: Any, room: RoomSettings) -> None:
        seen = await self._context.cursors.get(self.name, ROOM_SEEN_KEY + room.jid)
        history: dict[str, Any] = (
            {"since": datetime.fromisoformat(seen)} if seen else {"maxstanzas": 0}
        )
        await client.plugin["xep_0045"].join_muc_wait(
            room.jid,
            room.nick,
            password=self._settings.room_password(room),
            timeout=self._settings.timeout_seconds,
            **history,
        )

    async def _catch_up(self, client: Any, send: MemoryObjectSendStream[Arrival]) -> None:
        """Hand over what the account's archive (XEP-0313) holds since the last message the
        Inbox stored, less a margin: messages the server delivered while the channel could not
        store them (the runtime crashed, the disk was full) are not lost, and those it had
        stored are duplicates. The first start only notes where to begin."""
        from slixmpp.exceptions import XMPPError

        cursors = self._context.cursors
        since = await cursors.get(self.name, ARCHIVE_SINCE_KEY)
        if since is None:
            await cursors.put(self.name, ARCHIVE_SINCE_KEY, utc_now().isoformat())
            return
        start = datetime.fromisoformat(since) - ARCHIVE_MARGIN
        results = client.plugin["xep_0313"].iterate(
            start=start, rsm={"max": ARCHIVE_PAGE}, total=ARCHIVE_MOST
        )
        count = 0
        try:
            async for result in results:
                if result["from"].bare not in ("", self._settings.account):
                    continue  # only our own server's archive speaks for the account
                forwarded = result["mam_result"]["forwarded"]
                message = self._received(
                    forwarded["stanza"],
                    client,
                    archive_id=result["mam_result"]["id"] or None,
                    sent_at=_delay(forwarded.xml),
                )
                if message is not None:
                    self._queue(message, send)
                    count += 1
        except (XMPPError, TimeoutError) as exc:
            # A server without an archive: offline storage still covers the channel's absences.
            log.info("%s: no catch-up from the message archive: %r", self.name, exc)
            return
        log.info("%s: %d messages from the archive since %s", self.name, count, start)

    def _received(
        self,
        stanza: Any,
        client: Any,
        *,
        archive_id: str | None = None,
        sent_at: datetime | None = None,
    ) -> ReceivedMessage | None:
        """The message in a stanza, or None for what is no one's words (errors, chat states,
        the agent's own messages and its echo in a room). `archive_id` and `sent_at` are given
        for a copy from the account's archive."""
        kind = stanza["type"] or "normal"
        body = stanza["body"]
        if kind not in MESSAGE_TYPES or not body:
            return None
        sender = str(stanza["from"])
        xml = stanza.xml
        if kind == "groupchat":
            room, _, nick = sender.partition("/")
            settings = self._rooms.get(bare_jid(room))
            if settings is None or not nick or nick == settings.nick:
                return None  # not a room we joined, the room's own notice, or our own echo
            trusted_by = bare_jid(room)
            occupant = client.plugin["xep_0045"].get_jid_property(room, nick, "jid")
        else:
            if bare_jid(sender) == self._settings.account:
                return None
            trusted_by, occupant = self._settings.account, None
        stanza_id = None
        for element in xml.findall(f"{{{SID_NS}}}stanza-id"):
            if bare_jid(element.get("by", "")) == trusted_by and element.get("id"):
                stanza_id = element.get("id")
        origin = xml.find(f"{{{SID_NS}}}origin-id")
        return ReceivedMessage(
            sender=sender,
            type=_message_type(kind),
            body=body,
            message_id=stanza["id"] or "",
            stanza_id=archive_id or stanza_id,
            origin_id=origin.get("id") if origin is not None else None,
            sent_at=sent_at or _delay(xml),
            thread=stanza["thread"] or None,
            occupant_jid=str(occupant) if occupant else None,
            on_roster=_on_roster(client, bare_jid(str(occupant) if occupant else sender)),
            receipt_requested=xml.find(f"{{{RECEIPTS_NS}}}request") is not None,
        )

    # Delivery.

    async def _deliver_all(self, receive: MemoryObjectReceiveStream[Arrival]) -> None:
        async for first in receive:
            burst = [first]
            while len(burst) < BURST:
                try:
                    burst.append(receive.receive_nowait())
                except anyio.WouldBlock:
                    break
            await self._deliver(burst)

    async def _deliver(self, burst: Sequence[Arrival]) -> None:
        messages = [item for item in burst if isinstance(item, ReceivedMessage)]
        if messages:
            await self._deliver_messages(messages)
        receipts = [item for item in burst if isinstance(item, CopyReceipt)]
        if receipts:
            await self._report(receipts)

    async def _report(self, receipts: Sequence[CopyReceipt]) -> None:
        """Tell the runtime's read receipts what the user's client said about copies (after the
        messages of the same burst are stored); outside a runtime nobody listens."""
        reads = self._context.reads
        if reads is None:
            return
        for receipt in receipts:
            if receipt.state == "read":
                await reads.copy_read(self.name, receipt.copy_id, through=True)
            else:
                await reads.copy_delivered(self.name, receipt.copy_id)

    async def _deliver_messages(self, burst: Sequence[ReceivedMessage]) -> None:
        context = self._context
        events: list[tuple[Event, str | None]] = []
        to_save: list[tuple[Event, str]] = []
        rooms_seen: dict[str, datetime] = {}
        for message in burst:
            event, full = message_event(
                message,
                channel=self.name,
                settings=self._settings,
                is_contact=contact_matcher(self._settings, on_roster=message.on_roster),
                workspace=context.workspace,
            )
            if full is not None:
                to_save.append((event, full))
            events.append((event, self._room_filter(message)))
            if message.type == "groupchat":
                room = bare_jid(message.sender)
                rooms_seen[room] = max(message.sent_at or event.ts, rooms_seen.get(room, event.ts))
        if to_save:
            await anyio.to_thread.run_sync(_save_texts, context.workspace, to_save)
        await context.inbox.deliver_many(events)
        self._last_event_at = utc_now()
        self._acknowledge(burst)
        # Every message received up to the burst's last one is stored now (they come in order).
        last = max(message.received_at for message in burst)
        await context.cursors.put(self.name, ARCHIVE_SINCE_KEY, last.isoformat())
        for room, at in rooms_seen.items():
            await context.cursors.put(self.name, ROOM_SEEN_KEY + room, at.isoformat())
        if any(message.answer is not None for message in burst):
            # A card answered is answered once, also after a restart.
            await context.cursors.put(self.name, TO_USER_KEY, self._to_user.to_json())

    def _acknowledge(self, stored: Sequence[ReceivedMessage]) -> None:
        """Send the receipts (XEP-0184) the user's client asked for on messages now stored."""
        client = self._client
        if client is None:
            return  # the connection is gone; the archive brings them again on the next login
        for message in stored:
            if (
                message.receipt_requested
                and message.message_id
                and message.type != "groupchat"
                and bare_jid(message.sender) in self._settings.user_jids
            ):
                receipt = client.make_message(mto=message.sender, mtype=message.type)
                receipt["receipt"] = message.message_id
                receipt.send()

    def _room_filter(self, message: ReceivedMessage) -> str | None:
        """Why a room message should not wake the agent (none of the room's keywords), or
        None."""
        if message.type != "groupchat":
            return None
        room = self._rooms[bare_jid(message.sender)]
        if not room.keywords:
            return None
        words = [*room.keywords, room.nick]
        pattern = r"(?<!\w)(" + "|".join(re.escape(word) for word in words) + r")(?!\w)"
        if re.search(pattern, message.body[:8192], re.IGNORECASE):
            return None
        return f"none of the room's keywords ({', '.join(room.keywords)}) nor its nick"

    def _set(self, state: ChannelState, detail: str) -> None:
        self._health = ChannelHealth(state, detail)


def _message_type(kind: str) -> MessageType:
    if kind == "chat":
        return "chat"
    if kind == "groupchat":
        return "groupchat"
    if kind == "headline":
        return "headline"
    return "normal"


def _delay(xml: ET.Element) -> datetime | None:
    element = xml.find(f"{{{DELAY_NS}}}delay")
    stamp = element.get("stamp") if element is not None else None
    if not stamp:
        return None
    try:
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _on_roster(client: Any, jid: str) -> bool:
    """Whether `jid` is on the agent account's roster (read, not created, as indexing would)."""
    if client is None:
        return False
    roster = client.client_roster
    return bool(roster.has_jid(jid)) and roster[jid]["subscription"] != "remove"


def _save_texts(workspace: Any, texts: Sequence[tuple[Event, str]]) -> None:
    for event, text in texts:
        path = full_text_path(workspace, event.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


async def _close(client: Any, *, graceful: bool) -> None:
    """End a client's connection and the tasks slixmpp started for it."""
    client.cancel_connection_attempt()
    if graceful and client.transport is not None:
        with anyio.move_on_after(2):
            await client.disconnect(wait=1)
    client.abort()
    filters = getattr(client, "_run_out_filters", None)
    if filters is not None:
        filters.cancel()
