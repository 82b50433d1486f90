"""What a channel is: a source that turns outside happenings into events.

A channel runs in the runtime's task group: :meth:`Channel.run` reports started once it is
ready (for `task_group.start`), hands every event to the `emit` it was built with, and returns
when its source ends or it is cancelled. :meth:`Channel.health` says how it is doing, for
`wakeful doctor` and the operator. The console, the timers and, next, email, webhooks and IM
are channels; text that arrives through one is data, tagged by its source, never an instruction.

A kind whose channels *pull* from their source (:attr:`ChannelKind.pulls`: a mailbox polled, a
bot's updates long-polled, a logged-in IM connection) must run on one worker at a time when
several workers share a store; the runtime then runs each such channel only while it holds the
channel's role (:class:`RoleLeases`). Channels that are pushed to (webhooks) run on every worker.
A message for such a channel sent by another worker is handed over to the holder
(:class:`HandedOver`), which sends it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel

from ..errors import StoreError
from ..events import Event
from .records import OutboundMessage
from .repositories import ChannelCursorRepository

__all__ = [
    "Channel",
    "ChannelContext",
    "ChannelHealth",
    "ChannelKind",
    "ChannelState",
    "Delivery",
    "HandedOver",
    "Inbox",
    "Reach",
    "ReadReceipts",
    "RoleFencedCursors",
    "RoleHolder",
    "RoleLease",
    "RoleLeases",
    "RoleLost",
    "UserReach",
    "kind_pulls",
    "source_event_id",
]

# "standby": a channel that pulls, run by another worker of the cluster (see RoleLeases).
ChannelState = Literal["starting", "running", "degraded", "stopped", "standby"]

# What became of an event handed to an Inbox: stored and handed to its session; already stored
# (a redelivery, recognised by its id, dropped); or stored but kept from the agent by a filter.
Delivery = Literal["stored", "duplicate", "filtered"]


def source_event_id(channel: str, source_id: str) -> str:
    """The stable id of the event for `source_id` (a Message-ID, a delivery id, an update id)
    arriving through `channel`: the same on every redelivery, so the store recognises it."""
    digest = hashlib.sha256(f"{channel}\0{source_id}".encode()).hexdigest()
    return "ev_" + digest[:24]


@dataclass(frozen=True)
class ChannelHealth:
    """How a channel is doing: its state, a line saying why when it is not plainly running
    (e.g. "IMAP login refused; retrying in 30 s"), and when it last delivered an event."""

    state: ChannelState
    detail: str = ""
    last_event_at: datetime | None = None


@runtime_checkable
class Channel(Protocol):
    """A source of events; see the module docs."""

    @property
    def name(self) -> str:
        """The channel's name in events and health reports, e.g. "timers", "console"."""
        ...

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Deliver events until the source ends or the call is cancelled."""
        ...

    def health(self) -> ChannelHealth:
        """How the channel is doing now."""
        ...


class Inbox(Protocol):
    """Where channels hand what arrives from outside: stored durably before anything is
    acknowledged to the sender, deduplicated by event id (give events a
    :func:`source_event_id`), and handed to the event's session unless `filtered` says why the
    agent should not be woken (then it is stored with status "filtered", countable with
    `wakeful events tail --filtered`, never handed over). Text in the event is data: the Inbox
    scans it for instructions aimed at the assistant and flags the event when it finds some.

    When `deliver` returns, the event is durable: a channel acknowledges its source (an HTTP
    2xx, an IMAP cursor advance) only after that.
    """

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        """Store and hand over one event; `filtered` is the reason a filter gave, if any."""
        ...

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        """The same for a burst (a mailbox sync, a webhook batch), in one write."""
        ...


@runtime_checkable
class UserReach(Protocol):
    """A channel that can also carry messages to the user (an IM, email): the runtime's
    delivery policy hands it the messages it chose this channel for.

    `send_to_user` delivers one stored message to the user: to the conversation of the
    message's session when the channel has one (the Telegram chat the user wrote from), else to
    the user's own address on the channel (their private chat, their JID, their mailbox). Text
    goes byte for byte; a card is rendered the channel's way (buttons where it has them, plain
    text otherwise); attachments are sent as files where the channel can, else named. It returns
    the channel's own id for the copy (one string: "<chat>:<message id>", a Message-ID) so that a
    reaction, a reply or a read marker on the copy can be traced back, or None. It raises when
    the channel did not take the message (the error says why); the outbox records the delivery
    "failed" and the policy tries the next channel.

    `show_read` reflects on the copy that the user read the message elsewhere (a reaction, an
    edit, a marker), where the channel can; it returns False when it cannot (then nothing is
    changed and nothing raised)."""

    @property
    def name(self) -> str: ...

    async def send_to_user(self, message: OutboundMessage) -> str | None: ...

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool: ...


class HandedOver(Exception):
    """Raised by :meth:`Reach.send_to_user` when `channel` runs on another worker of the
    cluster (it pulls, and that worker holds its role): the message was not sent here but handed
    over to that worker, which sends it and records the delivery. The outbox leaves the delivery
    "queued" meanwhile: neither failed nor to be tried elsewhere."""


class Reach(Protocol):
    """The channels that can carry messages to the user, by name (the runtime's channels):
    what the delivery policy chooses among."""

    def reachable(self) -> list[str]:
        """The full names of those that can take a message now (running here, or run by
        another worker that is handed the message), in the order they were configured."""
        ...

    async def send_to_user(self, channel: str, message: OutboundMessage) -> str | None:
        """Deliver on `channel` (see :class:`UserReach`); raises when it did not, and
        :class:`HandedOver` when another worker running the channel will."""
        ...

    async def send_digest_to_user(
        self, channel: str, digest: OutboundMessage, parts: Sequence[str]
    ) -> str | None:
        """Deliver `digest`, standing for the stored messages `parts`, on `channel` (as
        :meth:`send_to_user`, HandedOver included: a channel another worker runs is handed the
        digest as those ids, and that worker records each of them)."""
        ...

    async def show_read(self, channel: str, message: OutboundMessage, copy_id: str) -> bool:
        """Reflect on the copy that the message was read elsewhere, where the channel can."""
        ...


class ReadReceipts(Protocol):
    """Where a channel reports that the user read a copy it delivered (an XMPP "displayed"
    marker, a Telegram reply to or button press on the copy): the message is then read
    everywhere, and pending escalations of it are cancelled."""

    async def copy_read(
        self, channel: str, channel_message_id: str, *, through: bool = False
    ) -> list[str]:
        """Mark read the message whose copy on `channel` has this id (with `through`, also every
        earlier message of its session); return the ids that were unread until now (none for an
        id no message has)."""
        ...

    async def copy_delivered(self, channel: str, channel_message_id: str) -> bool:
        """The copy with this id reached the user's device (an XMPP receipt); its delivery
        becomes "delivered" (never moving back from "read"). False for an unknown id."""
        ...


@dataclass(frozen=True)
class ChannelContext:
    """What the runtime gives a channel it builds: its name (unique in the runtime, e.g.
    "email:work", "webhook:github"), the Inbox to deliver to (already applying this channel's
    filter: a channel just delivers everything it receives), its cursors in the store, and the
    workspace (where attachments are saved)."""

    name: str
    inbox: Inbox
    cursors: ChannelCursorRepository
    workspace: Path
    # The runtime's services (wakeful.services.Services), for channels that watch the runtime
    # itself (system: tasks, user activity, the store's path); None outside a runtime.
    services: object | None = None
    # Where the channel reports that the user read a copy it delivered (see UserReach); None
    # outside a runtime.
    reads: ReadReceipts | None = None


class ChannelKind(Protocol):
    """One kind of channel ("email", "webhook", "github", "matrix", …): how its settings are
    validated (from `[[channels.<kind>]]` tables in wakeful.toml, or the arguments of
    `connect_channel`) and how a channel is built from them.

    A kind may also have a class attribute ``pulls = True`` when its channels fetch from their
    source over a connection of their own (IMAP, Telegram's getUpdates, an XMPP login): with
    several workers sharing a store, such a channel runs on one worker at a time (see
    :func:`kind_pulls`). It is not a member of this protocol, so kinds written before it keep
    working: a kind without it is pushed to (webhooks) or local (timers), and runs everywhere.
    """

    @property
    def kind(self) -> str: ...

    @property
    def settings_model(self) -> type[BaseModel]: ...

    def build(self, settings: Any, context: ChannelContext) -> Channel:
        """A channel for `settings` (an instance of `settings_model`), not yet running."""
        ...


def kind_pulls(kind: object) -> bool:
    """Whether channels of `kind` pull from their source (its ``pulls`` attribute, False when
    it has none): such a channel runs on one worker of a cluster at a time."""
    return getattr(kind, "pulls", False) is True


@dataclass(frozen=True)
class RoleLease:
    """A worker's hold on a role ("channel:email:work"): what it renews and releases. `epoch`
    grows each time the role is taken; `expires_at` (the database's clock) is when another
    worker may take it unless it is renewed."""

    role: str
    owner: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True)
class RoleHolder:
    """Who holds a role now, for health reports: the worker and how long its lease has left."""

    owner: str
    epoch: int
    expires_in_s: float


class RoleLost(StoreError):
    """Raised by a cursor write of a channel that pulls when this worker no longer holds, or
    may no longer hold, the channel's role (its lease ran out or another worker took it):
    nothing was written. The runtime stops the channel and puts it in standby; the worker that
    holds the role now writes the channel's cursors."""


@runtime_checkable
class RoleFencedCursors(Protocol):
    """A store's channel cursors that can be written under a role's lease (PostgreSQL's): each
    write of the view :meth:`held_by` gives checks the lease in its own transaction."""

    def held_by(self, lease: RoleLease) -> ChannelCursorRepository:
        """The cursors as the holder of `lease` writes them: a write raises :class:`RoleLost`,
        nothing written, once the lease has expired or the role moved to another worker."""
        ...


class RoleLeases(Protocol):
    """Roles that one worker of a cluster holds at a time, by expiring leases: the runtime runs
    a pulling channel only while it holds the channel's role (the PostgreSQL store's
    :class:`wakeful.store.postgres.roles.PostgresRoleLeases`). Without one (SQLite, one process)
    every channel simply runs."""

    @property
    def owner(self) -> str:
        """The worker that takes roles through this object."""
        ...

    @property
    def lease_seconds(self) -> float:
        """How long a role stays held unrenewed (renew it every third of this)."""
        ...

    async def take(self, role: str) -> RoleLease | None:
        """Take `role` when nobody holds it (or its lease expired): a new epoch; None while
        another worker holds it."""
        ...

    async def renew(self, lease: RoleLease) -> RoleLease | None:
        """Extend `lease` by the lease time; None when it was lost (taken over, released, or
        expired first): stop acting on the role at once."""
        ...

    async def release(self, lease: RoleLease) -> bool:
        """Give the role up, so another worker takes it at once; False when it was not held."""
        ...

    async def holder(self, role: str) -> RoleHolder | None:
        """Who holds `role` now; None when nobody does."""
        ...

    async def hand_over(self, role: str, message_id: str) -> None:
        """Leave the stored message `message_id` to the holder of `role` to send (its delivery
        on the role's channel is "queued"); once per message and role."""
        ...

    async def handed_over(self, role: str, *, within_s: float, limit: int) -> list[str]:
        """The ids of the messages handed over to `role` in the last `within_s` seconds and not
        yet done with, oldest first, at most `limit` (older ones are dropped, unsent)."""
        ...

    async def done_with(self, role: str, message_id: str) -> None:
        """Forget the hand-over of `message_id` to `role`: it was sent, failed or needs nothing."""
        ...
