"""The console and the timers are channels: they run in a task group and say how they are."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import anyio
import pytest

from wakeful.channels.console import ConsoleChannel
from wakeful.channels.timers import TimerService
from wakeful.clock import FakeClock
from wakeful.core.channel import Channel, ChannelHealth
from wakeful.events import Event
from wakeful.services import Outbox

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class _Runtime:
    """What a console needs of a runtime, and no more."""

    def __init__(self) -> None:
        self.outbox = Outbox()
        self.tasks = None
        self.approvals = None
        self.submitted: list[Event] = []

    async def submit(self, event: Event) -> object:
        self.submitted.append(event)
        return None

    async def wait_idle(self) -> None:
        return None


async def _discard(event: Event) -> None:
    return None


async def test_timers_are_a_channel_that_reports_what_waits() -> None:
    timers = TimerService(None, _discard, clock=FakeClock(T0))
    channel: Channel = timers
    assert isinstance(timers, Channel)
    assert channel.name == "timers"
    assert channel.health() == ChannelHealth("stopped", "not started")
    async with anyio.create_task_group() as tg:
        await tg.start(timers.run)
        await timers.set_timer(session="main", note="stand-up", delay_seconds=60)
        health = timers.health()
        assert health.state == "running"
        assert health.detail == "1 timer waiting; the next fires at 2026-03-01T09:01:00+00:00"
        tg.cancel_scope.cancel()
    assert timers.health().state == "stopped"


async def test_the_console_is_a_channel_running_while_it_reads() -> None:
    runtime = _Runtime()
    console = ConsoleChannel(runtime, stream=io.StringIO("hello\n"))  # type: ignore[arg-type]
    assert isinstance(console, Channel)
    assert console.name == "console"
    assert console.health().state == "stopped"
    async with anyio.create_task_group() as tg:
        await tg.start(console.run)
    assert [e.content for e in runtime.submitted] == ["hello"]
    assert console.health().state == "stopped"
