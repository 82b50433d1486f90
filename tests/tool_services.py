"""Real runtime services for tool tests: a TaskManager in a task group, and the events it emits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from wakeful.errors import ToolError
from wakeful.events import Event
from wakeful.services import Services
from wakeful.tools.spec import Tool, ToolContext, ToolResult
from wakeful.tools.tasks import TaskManager


class Events:
    """The events the services emitted, and ways to wait for them."""

    def __init__(self) -> None:
        self.seen: list[Event] = []
        self._arrived = anyio.Event()

    async def emit(self, event: Event) -> None:
        self.seen.append(event)
        self._arrived.set()
        self._arrived = anyio.Event()

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.seen if e.kind == kind]

    async def until(self, done: Callable[[], bool]) -> None:
        with anyio.fail_after(5):
            while not done():
                await self._arrived.wait()

    async def first(self, matches: Callable[[Event], bool]) -> Event:
        with anyio.fail_after(5):
            while True:
                for event in self.seen:
                    if matches(event):
                        return event
                await self._arrived.wait()


@asynccontextmanager
async def tool_services(workdir: Path | None = None) -> AsyncIterator[tuple[Services, Events]]:
    events = Events()
    async with anyio.create_task_group() as tg:
        services = Services(tasks=TaskManager(tg, events.emit), emit=events.emit, workdir=workdir)
        yield services, events
        services.tasks.cancel_all("the test is over")


async def call(services: Services, tool: Tool, **arguments: Any) -> ToolResult:
    """Run `tool` as the runtime would, in session "main"."""
    return await tool.run(arguments, ToolContext("main", "call_1", tool.name, services))


async def refused(services: Services, tool: Tool, **arguments: Any) -> str:
    """The message of the ToolError that `tool` raises for `arguments` (fails if it runs)."""
    with pytest.raises(ToolError) as caught:
        await call(services, tool, **arguments)
    return str(caught.value)
