"""The runtime services a tool can reach through its context."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .clock import Clock
from .core.channel import HandedOver
from .core.records import (
    DeliveryState,
    MessageAttachment,
    MessageDelivery,
    MessageKind,
    OutboundMessage,
    advanced_delivery,
    iso_utc,
)
from .core.repositories import MessageRepository
from .core.session_writes import SessionWrites, shared_writes
from .delivery.handed_over import HandedOverFollower
from .errors import UserError
from .events import Event
from .tools.tasks import TaskManager

if TYPE_CHECKING:
    from .channels.timers import TimerService
    from .core.channel import Reach
    from .core.runtime_store import RuntimeStore

Emit = Callable[[Event], Awaitable[object]]
# A callback that shows each sent message (as a dict, see `Outbox.send`); the console's printer.
Listener = Callable[[dict[str, Any]], Awaitable[None]]
# Hands a message to one named channel; returns that channel's id for its copy, if it has one.
Deliver = Callable[[OutboundMessage], Awaitable[str | None]]
# Which channels a message goes to now (the delivery policy), given the conversation's channel
# (None: the session's own, which the policy knows); without one, the channel the sender names.
Route = Callable[[OutboundMessage, str | None], Sequence[str]]
Fallback = Callable[[OutboundMessage, Sequence[str]], str | None]
# Told which messages became read (newly; ids) and on which channel: the delivery policy
# cancels their escalations, the web console clears their badge, IM copies show it.
ReadListener = Callable[[list[str], str], Awaitable[None]]
DeliveryListener = Callable[[OutboundMessage], Awaitable[None]]


# How long a receipt for a copy not yet recorded is kept, and how many at most.
EARLY_RECEIPT_SECONDS = 30.0
EARLY_RECEIPTS_KEPT = 1000


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(8)}"


def _now() -> str:
    return iso_utc(datetime.now(UTC))


@dataclass
class MemoryMessages:
    """The :class:`~wakeful.core.repositories.MessageRepository` of a runtime without a store:
    the same read-state semantics, for the life of the process."""

    _messages: dict[str, OutboundMessage] = field(default_factory=dict)

    async def add(self, message: OutboundMessage) -> None:
        if message.id in self._messages:
            raise UserError(f"A message with the id {message.id} is stored already.")
        self._messages[message.id] = message

    async def record_delivery(
        self,
        message_id: str,
        channel: str,
        state: DeliveryState,
        *,
        channel_message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        message = self._messages.get(message_id)
        if message is None:
            raise UserError(
                f"No message {message_id} is stored, so its delivery on {channel} cannot be "
                "recorded; store the message first (Outbox.send)."
            )
        now = _now()
        deliveries = list(message.deliveries)
        index = next((i for i, d in enumerate(deliveries) if d.channel == channel), None)
        if index is None:
            deliveries.append(MessageDelivery(message_id, channel, "queued", now))
            index = len(deliveries) - 1
        old = deliveries[index]
        deliveries[index] = old._replace(
            state=advanced_delivery(old.state, state),
            updated_at=now,
            channel_message_id=channel_message_id or old.channel_message_id,
            error=error or old.error,
            sent_at=old.sent_at or (now if state in ("sent", "delivered") else None),
            read_at=old.read_at or (now if state == "read" else None),
        )
        self._messages[message_id] = message._replace(deliveries=tuple(deliveries))
        if state == "read":
            await self.mark_read([message_id], channel=channel)

    async def mark_read(self, ids: Iterable[str], *, channel: str) -> list[str]:
        now, newly = _now(), []
        for message_id in dict.fromkeys(ids):
            message = self._messages.get(message_id)
            if message is None:
                continue
            if message.read_at is None:
                newly.append(message_id)
                message = message._replace(read_at=now, read_on=channel)
            deliveries = tuple(
                d._replace(state="read", read_at=d.read_at or now, updated_at=now)
                if d.channel == channel
                else d
                for d in message.deliveries
            )
            self._messages[message_id] = message._replace(deliveries=deliveries)
        return newly

    async def mark_read_through(self, session: str, message_id: str, *, channel: str) -> list[str]:
        ids = [m.id for m in self._messages.values() if m.session == session]
        if message_id not in ids:
            return []
        return await self.mark_read(ids[: ids.index(message_id) + 1], channel=channel)

    async def get(self, message_id: str) -> OutboundMessage | None:
        return self._messages.get(message_id)

    async def all_by_channel_id(
        self, channel: str, channel_message_id: str
    ) -> list[OutboundMessage]:
        return [
            message
            for message in self._messages.values()
            if any(
                d.channel == channel and d.channel_message_id == channel_message_id
                for d in message.deliveries
            )
        ]

    async def list(
        self,
        session: str | None = None,
        *,
        unread_only: bool = False,
        limit: int = 50,
        before: str | None = None,
    ) -> list[OutboundMessage]:
        newest_first = list(reversed(self._messages.values()))
        if before is not None:
            ids = [m.id for m in newest_first]
            newest_first = newest_first[ids.index(before) + 1 :] if before in ids else []
        return [
            m
            for m in newest_first
            if (session is None or m.session == session) and not (unread_only and m.read)
        ][:limit]

    async def unread_count(self, session: str | None = None) -> int:
        return sum(
            1
            for m in self._messages.values()
            if not m.read and (session is None or m.session == session)
        )


@dataclass
class Outbox:
    """Where messages to the user go: each is stored (`messages`: the store's repository once
    the runtime has a store, in memory before) with a delivery per channel it was handed to,
    then handed to its channels. `sent` records each send as a dict; `listeners` (the console's
    printer, tests) are called with that dict and count as the delivery on the message's channel.

    `deliveries` are named channels' hooks and `route` the policy choosing among them (by
    default, the channel the sender names): the seam where delivery by urgency plugs in.
    """

    sent: list[dict[str, Any]] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    messages: MessageRepository = field(default_factory=MemoryMessages)
    deliveries: dict[str, Deliver] = field(default_factory=dict)
    route: Route | None = None
    # After a channel failed: the next one to try, given those tried (the policy's), or None.
    fallback: Fallback | None = None
    # The channels that can carry messages to the user (the runtime's), by name.
    reach: Reach | None = None
    read_listeners: list[ReadListener] = field(default_factory=list)
    # Told of a message whose deliveries changed (sent, failed, delivered, an escalation): the
    # web console shows them live.
    delivery_listeners: list[DeliveryListener] = field(default_factory=list)
    # What stamps each message's creation time (the runtime's clock; the wall clock by default).
    clock: Clock | None = None
    # Where a session's message is added (see wakeful.core.session_writes): as one worker of
    # several, through the view fenced by the session's lease, so a worker that lost the
    # session neither stores nor shows it; by default (and with a repository of its own given),
    # `messages`.
    session_writes: SessionWrites = shared_writes

    def __post_init__(self) -> None:
        self._repository_given = not isinstance(self.messages, MemoryMessages)
        # Receipts that arrived before their copy's id was recorded (a fast phone answers while
        # `send_to_user` is still returning): (channel, copy id) → ("read"/"read through"/
        # "delivered", when), applied once the id is recorded, forgotten after a while.
        self._early: dict[tuple[str, str], tuple[str, float]] = {}
        # The copies (channel, copy id) whose messages are being recorded "sent" with that id (a
        # digest's parts, one after the other): a receipt meanwhile is also kept as early, so
        # the parts recorded after it are read too.
        self._recording: set[tuple[str, str]] = set()
        # The messages handed over to another worker, followed by `follow_handed_over`.
        self._handed_over = HandedOverFollower(
            messages=lambda: self.messages,
            changed=self._tell_deliveries,
            copy_recorded=self._copy_recorded,
            read=self._told,
        )

    def keep_messages_in(self, repository: MessageRepository) -> None:
        """Keep the messages from now on in `repository` (a runtime's store, at each start;
        the outbox may outlive a runtime and serve the next). An outbox made with a repository
        of its own keeps that one."""
        if not self._repository_given:
            self.messages = repository

    async def send(
        self,
        session: str,
        text: str,
        *,
        channel: str | None = None,
        urgency: str = "normal",
        parallel: bool = False,
        kind: MessageKind = "text",
        attachments: Sequence[MessageAttachment] = (),
        card: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> OutboundMessage:
        """Store a message to the user and hand it to its channels; return it as stored, with
        its deliveries.

        `channel` is where the conversation is; by default the session's own (the delivery
        policy knows it; "console" without one). The policy (`route`) may choose other channels
        and plan more for later. A named delivery that fails is recorded "failed" (with the
        error), the others still run, and the policy's `fallback` names the next channel to
        try; a listener that fails is recorded "failed" and its error raised.
        """
        now = iso_utc(self.clock.now()) if self.clock is not None else _now()
        message = OutboundMessage(
            id=new_message_id(),
            session=session,
            created_at=now,
            urgency=urgency,
            kind=kind,
            text=text,
            attachments=tuple(attachments),
            card=card,
            title=title,
        )
        shown_on = channel or "console"
        targets = list(dict.fromkeys(self.route(message, channel) if self.route else [shown_on]))
        message = message._replace(
            deliveries=tuple(MessageDelivery(message.id, name, "queued", now) for name in targets)
        )
        # Added first: a message its session may no longer send (SessionMoved) goes nowhere.
        fenced = None if self._repository_given else self.session_writes(session)
        await (fenced.messages if fenced is not None else self.messages).add(message)
        entry = {
            "session": session,
            "text": text,
            "channel": shown_on,
            "urgency": urgency,
            "parallel": parallel,
            "id": message.id,
            "kind": kind,
            "attachments": [item._asdict() for item in message.attachments],
            "card": card,
        }
        if title is not None:
            entry["title"] = title
        self.sent.append(entry)
        tried: list[str] = []
        failed: list[str] = []
        for name in targets:
            tried.append(name)
            if not await self._hand(message, name):
                failed.append(name)
        while failed and self.fallback is not None:
            failed.pop()
            instead = self.fallback(message, tried)
            if instead is None:
                break
            tried.append(instead)
            await self.record_delivery(message.id, instead, "queued")
            if not await self._hand(message, instead):
                failed.append(instead)
        if self.listeners:
            try:
                for listener in self.listeners:
                    await listener(entry)
            except Exception as exc:
                await self.record_delivery(
                    message.id, shown_on, "failed", error=f"{type(exc).__name__}: {exc}"
                )
                raise
            for name in dict.fromkeys((shown_on, "console")):
                if name in tried and self._hook(name) is None:
                    # The listeners (the consoles) showed it: delivered there.
                    await self.record_delivery(message.id, name, "sent")
        return await self.messages.get(message.id) or message

    async def deliver(self, message: OutboundMessage, channel: str) -> bool:
        """Hand a stored message to one more channel now (an escalation, the end of quiet
        hours); False when that channel failed (recorded)."""
        await self.record_delivery(message.id, channel, "queued")
        if channel == "console" and self._hook(channel) is None:
            # Shown on every console the moment it was sent; now it counts as delivered there.
            await self.record_delivery(message.id, channel, "sent")
            return True
        return await self._hand(message, channel)

    async def deliver_digest(
        self, messages: Sequence[OutboundMessage], channel: str, digest: OutboundMessage
    ) -> bool:
        """Hand `digest` (standing for `messages`) to `channel`; each message gets a delivery
        there with the digest's copy id, so a read receipt on the digest reads them all. A
        channel another worker runs takes the digest over (HandedOver) as a message: the
        deliveries stay "queued" until that worker sends it and records them."""
        deliver = self._hook(channel, parts=[message.id for message in messages])
        if deliver is None:
            return False
        for message in messages:
            await self.record_delivery(message.id, channel, "queued")
        try:
            copy_id = await deliver(digest)
        except HandedOver:
            for message in messages:
                self._handed_over.follow(message.id, channel)
            return True
        except Exception as exc:
            for message in messages:
                await self.record_delivery(
                    message.id, channel, "failed", error=f"{type(exc).__name__}: {exc}"
                )
            return False
        if copy_id is None:
            for message in messages:
                await self.record_delivery(message.id, channel, "sent")
            return True
        self._recording.add((channel, copy_id))
        try:
            for message in messages:
                await self.record_delivery(message.id, channel, "sent", channel_message_id=copy_id)
        finally:
            self._recording.discard((channel, copy_id))
        if self._early:
            await self._apply_early(channel, copy_id)
        return True

    def _hook(self, name: str, *, parts: Sequence[str] = ()) -> Deliver | None:
        """How to hand a message to channel `name`: a named delivery, or a channel that can
        reach the user; None for the consoles (they listen). With `parts`, the message is a
        digest standing for those stored messages."""
        found = self.deliveries.get(name)
        if found is not None:
            return found
        reach = self.reach
        if reach is not None and name in reach.reachable():

            async def to_channel(message: OutboundMessage) -> str | None:
                if parts:
                    return await reach.send_digest_to_user(name, message, parts)
                return await reach.send_to_user(name, message)

            return to_channel
        return None

    async def _hand(self, message: OutboundMessage, name: str) -> bool:
        """Hand `message` to channel `name` and record how it went; False when it failed. A
        channel another worker runs takes it over (HandedOver): its delivery stays "queued"
        until that worker sends it and records the outcome."""
        deliver = self._hook(name)
        if deliver is None:
            return True
        try:
            copy_id = await deliver(message)
        except HandedOver:
            self._handed_over.follow(message.id, name)
            return True
        except Exception as exc:  # one channel's failure must not stop the others
            await self.record_delivery(
                message.id, name, "failed", error=f"{type(exc).__name__}: {exc}"
            )
            return False
        await self.record_delivery(message.id, name, "sent", channel_message_id=copy_id)
        if copy_id is not None and self._early:
            await self._apply_early(name, copy_id)
        return True

    async def mark_read(self, ids: Iterable[str], *, channel: str = "console") -> list[str]:
        """Mark these messages read (seen on `channel`); return those that were unread. The
        `read_listeners` hear of the newly read ones."""
        return await self._told(await self.messages.mark_read(ids, channel=channel), channel)

    async def mark_read_through(
        self, session: str, message_id: str, *, channel: str = "console"
    ) -> list[str]:
        """Mark read every message of `session` up to `message_id` (what a person who scrolled
        to it has seen); return those that were unread."""
        newly = await self.messages.mark_read_through(session, message_id, channel=channel)
        return await self._told(newly, channel)

    async def copy_read(
        self, channel: str, channel_message_id: str, *, through: bool = False
    ) -> list[str]:
        """The user read the copy with this id on `channel` (a channel's read receipt; see
        :class:`wakeful.core.channel.ReadReceipts`): mark read every message it stands for (one,
        or each part of a digest), and with `through` every earlier one of their sessions.
        Returns the newly read ids."""
        what = "read through" if through else "read"
        found = await self.messages.all_by_channel_id(channel, channel_message_id)
        if not found or (channel, channel_message_id) in self._recording:
            self._keep_early(channel, channel_message_id, what)
        return await self._read_copy(found, channel, what) if found else []

    async def copy_delivered(self, channel: str, channel_message_id: str) -> bool:
        """The copy with this id on `channel` reached the user's device: record every message
        it stands for delivered."""
        found = await self.messages.all_by_channel_id(channel, channel_message_id)
        if not found or (channel, channel_message_id) in self._recording:
            self._keep_early(channel, channel_message_id, "delivered")
        for message in found:
            await self.record_delivery(message.id, channel, "delivered")
        return bool(found)

    async def _read_copy(
        self, messages: Sequence[OutboundMessage], channel: str, what: str
    ) -> list[str]:
        """Mark `messages` (those one copy stands for, oldest first) read on `channel`, with
        "read through" every earlier message of their sessions too; the `read_listeners` hear
        of the newly read ones at once."""
        if what != "read through":
            return await self.mark_read([m.id for m in messages], channel=channel)
        newest = {message.session: message.id for message in messages}
        newly: list[str] = []
        for session, message_id in newest.items():
            newly += await self.messages.mark_read_through(session, message_id, channel=channel)
        return await self._told(newly, channel)

    def _keep_early(self, channel: str, copy_id: str, what: str) -> None:
        now = time.monotonic()
        self._early = {k: v for k, v in self._early.items() if now - v[1] < EARLY_RECEIPT_SECONDS}
        if len(self._early) < EARLY_RECEIPTS_KEPT:
            self._early[(channel, copy_id)] = (what, now)

    async def _apply_early(self, channel: str, copy_id: str) -> None:
        """Apply the receipt kept for this copy, now that its id is recorded, to every message
        it stands for."""
        early = self._early.pop((channel, copy_id), None)
        if early is None or time.monotonic() - early[1] >= EARLY_RECEIPT_SECONDS:
            return
        what = early[0]
        found = await self.messages.all_by_channel_id(channel, copy_id)
        if what == "delivered":
            for message in found:
                await self.record_delivery(message.id, channel, "delivered")
        elif found:
            await self._read_copy(found, channel, what)

    async def record_delivery(
        self,
        message_id: str,
        channel: str,
        state: DeliveryState,
        *,
        channel_message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record a delivery's state, and tell the `delivery_listeners` (an open console page
        shows where each message went)."""
        await self.messages.record_delivery(
            message_id, channel, state, channel_message_id=channel_message_id, error=error
        )
        if self.delivery_listeners:
            changed = await self.messages.get(message_id)
            if changed is not None:
                await self._tell_deliveries(changed)

    async def _tell_deliveries(self, message: OutboundMessage) -> None:
        for listener in list(self.delivery_listeners):
            await listener(message)

    async def follow_handed_over(self) -> None:
        """Run (in the runtime's task group, beside the delivery policy) until cancelled: tell
        the listeners here of what another worker records for the messages handed over to it,
        as if recorded here: the `delivery_listeners` of each change of the delivery (sent with
        the copy's id, failed, read), the `read_listeners` of a read on that channel (see
        :mod:`wakeful.delivery.handed_over`)."""
        await self._handed_over.run()

    async def _copy_recorded(self, channel: str, copy_id: str) -> None:
        """Another worker recorded the copy `copy_id` on `channel`: a receipt kept for it
        applies now."""
        if self._early:
            await self._apply_early(channel, copy_id)

    async def _told(self, newly: list[str], channel: str) -> list[str]:
        if newly:
            for listener in list(self.read_listeners):
                await listener(newly, channel)
        return newly

    async def unread(self, session: str | None = None, *, limit: int = 50) -> list[OutboundMessage]:
        """The messages (of `session`, or all) the user has not read yet, newest first."""
        return await self.messages.list(session, unread_only=True, limit=limit)


@dataclass
class Services:
    tasks: TaskManager
    emit: Emit
    outbox: Outbox = field(default_factory=Outbox)
    timers: TimerService | None = None
    store: RuntimeStore | None = None
    # Where shell commands run unless a call names another directory.
    workdir: Path | None = None
    # Settings of tool families by their class (e.g. the web tools' base URLs); see `settings`.
    settings: dict[type[Any], Any] = field(default_factory=dict)
    # What tool families keep for the life of the runtime or MCP connection (a shell history,
    # running interpreters), by class; see `state_of`. The owner of the services closes it
    # (`close_state`) when it ends.
    state: dict[type[Any], Any] = field(default_factory=dict)


S = TypeVar("S")


def settings_of(services: Services, kind: type[S]) -> S:
    """The settings of one kind the runtime or server was given, or that kind's defaults."""
    found = services.settings.get(kind)
    return found if isinstance(found, kind) else kind()


def state_of(services: Services, kind: type[S]) -> S:
    """The services' state object of one kind, created with `kind()` on first use."""
    found = services.state.get(kind)
    if not isinstance(found, kind):
        found = kind()
        services.state[kind] = found
    return found


async def close_state(services: Services) -> None:
    """Close every state object that can be closed (`aclose()`), newest first."""
    for value in reversed(list(services.state.values())):
        aclose = getattr(value, "aclose", None)
        if aclose is not None:
            await aclose()
