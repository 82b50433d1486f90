"""A started TimerService for timer tests, and a way to wait for the events it emits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from wakeful.channels.timers import TimerService
from wakeful.clock import FakeClock
from wakeful.events import Event
from wakeful.store.sqlite import Store


@asynccontextmanager
async def running(
    store: Store | None, clock: FakeClock
) -> AsyncIterator[tuple[TimerService, MemoryObjectReceiveStream[Event]]]:
    """A started TimerService whose emitted events arrive on the yielded stream."""
    send, receive = anyio.create_memory_object_stream[Event](10_000)
    with send, receive:
        service = TimerService(store, send.send, clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            yield service, receive
            tg.cancel_scope.cancel()


async def next_event(receive: MemoryObjectReceiveStream[Event]) -> Event:
    with anyio.fail_after(5):
        return await receive.receive()
