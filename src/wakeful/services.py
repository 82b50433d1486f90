"""The runtime services a tool can reach through its context."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

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
from .errors import UserError
from .events import Event
from .tools.tasks import TaskManager

if TYPE_CHECKING:
    from .channels.timers import TimerService
    from .store.sqlite import Store

Emit = Callable[[Event], Awaitable[object]]
# A callback that shows each sent message (as a dict, see `Outbox.send`); the console's printer.
Listener = Callable[[dict[str, Any]], Awaitable[None]]
# Hands a message to one named channel; returns that channel's id for its copy, if it has one.
Deliver = Callable[[OutboundMessage], Awaitable[str | None]]
# Which channels a message goes to (the delivery policy); by default, the channel it names.
Route = Callable[[OutboundMessage, str], Sequence[str]]


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

    async def by_channel_id(self, channel: str, channel_message_id: str) -> OutboundMessage | None:
        for message in self._messages.values():
            for delivery in message.deliveries:
                if (
                    delivery.channel == channel
                    and delivery.channel_message_id == channel_message_id
                ):
                    return message
        return None

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

    def __post_init__(self) -> None:
        self._repository_given = not isinstance(self.messages, MemoryMessages)

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
        channel: str = "console",
        urgency: str = "normal",
        parallel: bool = False,
        kind: MessageKind = "text",
        attachments: Sequence[MessageAttachment] = (),
        card: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> OutboundMessage:
        """Store a message to the user and hand it to its channels; return it as stored, with
        its deliveries. A named delivery that fails is recorded "failed" (with the error) and
        the others still run; a listener that fails is recorded "failed" and its error raised.
        """
        now = _now()
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
        targets = list(dict.fromkeys(self.route(message, channel) if self.route else [channel]))
        if self.listeners and channel not in targets:
            targets.append(channel)
        message = message._replace(
            deliveries=tuple(MessageDelivery(message.id, name, "queued", now) for name in targets)
        )
        await self.messages.add(message)
        entry = {
            "session": session,
            "text": text,
            "channel": channel,
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
        for name in targets:
            deliver = self.deliveries.get(name)
            if deliver is None:
                continue
            try:
                copy_id = await deliver(message)
            except Exception as exc:  # one channel's failure must not stop the others
                await self.messages.record_delivery(
                    message.id, name, "failed", error=f"{type(exc).__name__}: {exc}"
                )
                continue
            await self.messages.record_delivery(
                message.id, name, "sent", channel_message_id=copy_id
            )
        if self.listeners:
            try:
                for listener in self.listeners:
                    await listener(entry)
            except Exception as exc:
                await self.messages.record_delivery(
                    message.id, channel, "failed", error=f"{type(exc).__name__}: {exc}"
                )
                raise
            if channel not in self.deliveries:
                await self.messages.record_delivery(message.id, channel, "sent")
        return await self.messages.get(message.id) or message

    async def mark_read(self, ids: Iterable[str], *, channel: str = "console") -> list[str]:
        """Mark these messages read (seen on `channel`); return those that were unread."""
        return await self.messages.mark_read(ids, channel=channel)

    async def unread(self, session: str | None = None, *, limit: int = 50) -> list[OutboundMessage]:
        """The messages (of `session`, or all) the user has not read yet, newest first."""
        return await self.messages.list(session, unread_only=True, limit=limit)


@dataclass
class Services:
    tasks: TaskManager
    emit: Emit
    outbox: Outbox = field(default_factory=Outbox)
    timers: TimerService | None = None
    store: Store | None = None
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
