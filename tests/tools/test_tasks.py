"""A task handle's life as its manager drives it: run in its own scope, cancel, finish."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from wakeful.events import Event
from wakeful.tools.result import ToolResult
from wakeful.tools.tasks import TaskHandle, TaskManager

pytestmark = pytest.mark.anyio


async def _discard(event: Event) -> Any:
    return None


async def test_a_task_that_raises_ends_failed_with_the_error_named() -> None:
    async def broken(handle: TaskHandle) -> ToolResult:
        raise RuntimeError("disk on fire")

    async with anyio.create_task_group() as tg:
        handle = TaskManager(tg, _discard).start(session="s", tool="probe", run=broken)
        result = await handle.wait()
    assert handle.state == "failed" and not handle.cancelled_by_scope
    assert result.is_error and result.content == "probe failed with RuntimeError: disk on fire"


async def test_cancel_stops_the_work_in_its_own_scope_and_ends_the_output_streams() -> None:
    started = anyio.Event()

    async def forever(handle: TaskHandle) -> ToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with anyio.create_task_group() as tg:
        handle = TaskManager(tg, _discard).start(session="s", tool="probe", run=forever)
        lines = handle.subscribe()
        await started.wait()
        handle.cancel("no longer needed")
        result = await handle.wait()
        with lines, anyio.fail_after(1):
            assert [line async for line in lines] == []  # the stream ended with the task
    assert handle.done and handle.cancelled_by_scope and handle.state == "cancelled"
    assert handle.ended_at is not None and handle.runtime_seconds >= 0
    assert result.content == f"Task {handle.id} (probe) was cancelled: no longer needed."
