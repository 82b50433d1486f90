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
