"""What a channel is: a source that turns outside happenings into events.

A channel runs in the runtime's task group: :meth:`Channel.run` reports started once it is
ready (for `task_group.start`), hands every event to the `emit` it was built with, and returns
when its source ends or it is cancelled. :meth:`Channel.health` says how it is doing, for
`wakeful doctor` and the operator. The console, the timers and, next, email, webhooks and IM
are channels; text that arrives through one is data, tagged by its source, never an instruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

import anyio
from anyio.abc import TaskStatus

__all__ = ["Channel", "ChannelHealth", "ChannelState"]

ChannelState = Literal["starting", "running", "degraded", "stopped"]


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
