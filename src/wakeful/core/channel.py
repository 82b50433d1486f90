"""What a channel is: a source that turns outside happenings into events.

A channel runs in the runtime's task group: :meth:`Channel.run` reports started once it is
ready (for `task_group.start`), hands every event to the `emit` it was built with, and returns
when its source ends or it is cancelled. :meth:`Channel.health` says how it is doing, for
`wakeful doctor` and the operator. The console, the timers and, next, email, webhooks and IM
are channels; text that arrives through one is data, tagged by its source, never an instruction.
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

from ..events import Event
from .repositories import ChannelCursorRepository

__all__ = [
    "Channel",
    "ChannelContext",
    "ChannelHealth",
    "ChannelKind",
    "ChannelState",
    "Delivery",
    "Inbox",
    "source_event_id",
]

ChannelState = Literal["starting", "running", "degraded", "stopped"]

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


class ChannelKind(Protocol):
    """One kind of channel ("email", "webhook", "github", "matrix", …): how its settings are
    validated (from `[[channels.<kind>]]` tables in wakeful.toml, or the arguments of
    `connect_channel`) and how a channel is built from them."""

    @property
    def kind(self) -> str: ...

    @property
    def settings_model(self) -> type[BaseModel]: ...

    def build(self, settings: Any, context: ChannelContext) -> Channel:
        """A channel for `settings` (an instance of `settings_model`), not yet running."""
        ...
