"""The runtime services a tool can reach through its context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .events import Event
from .tools.tasks import TaskManager

if TYPE_CHECKING:
    from .channels.timers import TimerService
    from .store.sqlite import Store

Emit = Callable[[Event], Awaitable[object]]


@dataclass
class Outbox:
    """Where `reply_to_user` sends messages: a callback per channel, and a record of each send."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    listeners: list[Callable[[dict[str, Any]], Awaitable[None]]] = field(default_factory=list)

    async def send(
        self,
        session: str,
        text: str,
        *,
        channel: str = "console",
        urgency: str = "normal",
        parallel: bool = False,
    ) -> None:
        message = {
            "session": session,
            "text": text,
            "channel": channel,
            "urgency": urgency,
            "parallel": parallel,
        }
        self.sent.append(message)
        for listener in self.listeners:
            await listener(message)


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


S = TypeVar("S")


def settings_of(services: Services, kind: type[S]) -> S:
    """The settings of one kind the runtime or server was given, or that kind's defaults."""
    found = services.settings.get(kind)
    return found if isinstance(found, kind) else kind()
