"""task_status, cancel_task and list_tasks over real background shell commands."""

from __future__ import annotations

import gc
import json
import sys
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from process_probes import live_group_members
from tool_services import Events, tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.store.sqlite import Store
from wakeful.toolkits.execution.run_shell import run_shell
from wakeful.toolkits.tasks import TASK_TOOLS, cancel_task, list_tasks, task_status
from wakeful.toolkits.triggers.shell_monitor import monitor_shell
from wakeful.tools.spec import Tool, ToolContext, ToolResult
from wakeful.tools.tasks import (
    RUNTIME_STOPPED,
    TaskHandle,
    TaskManager,
    TaskRecord,
    TaskState,
)


async def call(
    tool: Tool, services: Services, session: str = "main", **arguments: Any
) -> dict[str, Any]:
    result = await tool.run(arguments, ToolContext(session, "call_1", tool.name, services))
    assert not result.is_error, result.content
    value: dict[str, Any] = json.loads(result.content)
    return value


async def start_background(services: Services, command: str, session: str = "main") -> TaskHandle:
    answer = await call(run_shell, services, session, command=command, background=True)
    handle = services.tasks.get(answer["task_id"])
    assert handle is not None
    return handle


async def wait_for_lines(handle: TaskHandle, count: int) -> None:
    with anyio.fail_after(5):
        while True:
            if handle.output_line_count >= count:
                return
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_status_shows_state_percent_output_and_runtime() -> None:
    async with tool_services() as (services, _):
        handle = await start_background(services, "echo starting; echo 'progress 33%'; sleep 100")
        await wait_for_lines(handle, 2)

        status = await call(task_status, services, task_id=handle.id)

    assert status["state"] == "running"
    assert status["percent"] == 33.0
    assert status["last_output"] == ["starting", "progress 33%"]
    assert status["tool"] == "run_shell"
    assert status["runtime_seconds"] >= 0
    assert "result" not in status


@pytest.mark.anyio
async def test_status_of_a_finished_task_has_its_result() -> None:
    async with tool_services() as (services, _):
        handle = await start_background(services, "echo done")
        await handle.wait()

        status = await call(task_status, services, task_id=handle.id, lines=1)

    assert status["state"] == "completed"
    assert status["result"] == "Exit code 0. Output:\ndone"


@pytest.mark.anyio
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_cancel_kills_the_whole_process_group_and_records_why() -> None:
    command = "echo group $$; bash -c 'sleep 100 & wait' & sleep 100 & wait"
    async with tool_services() as (services, events):
        handle = await start_background(services, command)
        await wait_for_lines(handle, 1)
        pgid = int(handle.output[0].split()[1])

        answer = await call(cancel_task, services, task_id=handle.id, reason="wrong branch")
        status = await call(task_status, services, task_id=handle.id)

    assert answer == {"task_id": handle.id, "status": "cancelled", "cancel_reason": "wrong branch"}
    assert status["state"] == "cancelled"
    assert status["cancel_reason"] == "wrong branch"
    assert live_group_members(pgid) == []
    assert events.seen == []  # no tool.result for a task the agent cancelled itself


@pytest.mark.anyio
async def test_cancelling_a_finished_task_says_it_had_finished() -> None:
    async with tool_services() as (services, _):
        handle = await start_background(services, "exit 1")
        await handle.wait()

        answer = await call(cancel_task, services, task_id=handle.id)

    assert answer["status"] == "already_finished"
    assert answer["state"] == "failed"
    assert handle.cancel_reason is None


@pytest.mark.anyio
async def test_list_shows_this_sessions_tasks_running_first() -> None:
    async with tool_services() as (services, _):
        finished = await start_background(services, "true")
        await finished.wait()
        running = await start_background(services, "sleep 100")
        monitor = await call(monitor_shell, services, task_id=running.id)
        await start_background(services, "sleep 100", session="other")

        listed = await call(list_tasks, services)

    ids = [t["task_id"] for t in listed["tasks"]]
    assert ids == [monitor["monitor_id"], running.id, finished.id]
    states = [t["state"] for t in listed["tasks"]]
    assert states == ["running", "running", "completed"]
    assert listed["tasks"][1]["description"] == "sleep 100"


@pytest.mark.anyio
async def test_an_empty_list() -> None:
    async with tool_services() as (services, _):
        assert await call(list_tasks, services) == {"tasks": []}


@pytest.mark.anyio
@pytest.mark.parametrize("tool", [task_status, cancel_task], ids=lambda t: t.name)
async def test_unknown_or_foreign_task_ids_list_the_known_ones(tool: Tool) -> None:
    async with tool_services() as (services, _):
        mine = await start_background(services, "sleep 100")
        theirs = await start_background(services, "sleep 100", session="other")
        ctx = ToolContext("main", "call_2", tool.name, services)

        with pytest.raises(ToolError, match=f"no task 'task_nope'.*Known task ids: {mine.id}"):
            await tool.run({"task_id": "task_nope"}, ctx)
        with pytest.raises(ToolError, match=f"no task '{theirs.id}'"):
            await tool.run({"task_id": theirs.id}, ctx)
    assert theirs.state == "cancelled"  # by the test's cleanup, not by the call


@pytest.mark.anyio
async def test_finished_tasks_are_released_yet_task_status_still_answers(tmp_path: Path) -> None:
    async def answer(handle: TaskHandle) -> ToolResult:
        handle.add_output(f"working on {handle.description}")
        return ToolResult(content=f"answer {handle.description}")

    events = Events()
    async with await Store.open(tmp_path / "w.db") as store, anyio.create_task_group() as tg:
        tasks = TaskManager(tg, events.emit, on_change=store.save_task_nowait, keep_finished=2)
        services = Services(tasks=tasks, emit=events.emit, store=store)
        started = [
            tasks.start(
                session="main", tool="lookup", run=answer, description=str(i), background=i >= 2
            )
            for i in range(6)  # 2 inline calls, then 4 background tasks
        ]
        await events.until(lambda: len(events.seen) == 4)  # the background results
        for handle in started:
            await handle.wait()
        await wait_all_tasks_blocked()  # every task settled
        ids = [handle.id for handle in started]
        released = [weakref.ref(handle) for handle in started[:4]]
        del started, handle
        gc.collect()
        await store.flush()

        assert [ref() for ref in released] == [None] * 4
        assert not tasks.has_unsettled()
        assert [t.id for t in tasks.list("main")] == ids[4:]
        just_finished = await call(task_status, services, task_id=ids[5])
        long_finished = await call(task_status, services, task_id=ids[2])
        cancelled = await call(cancel_task, services, task_id=ids[2])

    assert just_finished["result"] == "answer 5"
    assert just_finished["last_output"] == ["working on 5"]
    assert long_finished["state"] == "completed"
    assert long_finished["result"] == "answer 2"
    assert long_finished["last_output"] == [] and "no longer kept" in long_finished["note"]
    assert cancelled["status"] == "already_finished"


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        (task_status, {}, "task_id"),
        (task_status, {"task_id": "task_1", "lines": -1}, "lines"),
        (cancel_task, {"task_id": "task_1", "reason": ""}, "reason"),
        (list_tasks, {"session": "other"}, "session"),
    ],
)
def test_bad_arguments_name_the_field(tool: Tool, arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolError, match=f"field `{field}`"):
        tool.validate(arguments)


@pytest.mark.parametrize("task_tool", TASK_TOOLS, ids=lambda t: t.name)
def test_descriptions_follow_the_standard(task_tool: Tool) -> None:
    spec = task_tool.spec
    assert 1 <= len(spec.examples) <= 3
    for example in spec.examples:
        task_tool.validate(example)
    for name, prop in spec.input_schema["properties"].items():
        assert "e.g." in prop["description"], name
    assert "Cost" in spec.description
    assert "Result" in spec.description


def test_annotations_are_honest() -> None:
    assert task_status.spec.annotations.read_only
    assert list_tasks.spec.annotations.read_only
    assert cancel_task.spec.annotations.destructive
    assert not cancel_task.spec.annotations.read_only


@pytest.mark.anyio
async def test_a_task_group_cancelled_under_running_tasks_records_them_stopped() -> None:
    """The runtime's stop cancels its task group: each task is settled as cancelled with
    RUNTIME_STOPPED, a background one through `on_stopped` (an inline one is not stored), and
    a task cancelled on its own keeps its own reason and goes through `on_change`."""

    async def forever(handle: TaskHandle) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    events = Events()
    changed: list[TaskRecord] = []
    stopped: list[TaskRecord] = []
    async with anyio.create_task_group() as tg:
        tasks = TaskManager(tg, events.emit, on_change=changed.append, on_stopped=stopped.append)
        background = tasks.start(session="main", tool="watch", run=forever, background=True)
        inline = tasks.start(session="main", tool="think", run=forever)
        cancelled = tasks.start(session="main", tool="poll", run=forever, background=True)
        await wait_all_tasks_blocked()
        cancelled.cancel("the user asked")
        await cancelled.wait()
        tg.cancel_scope.cancel()

    assert [(r.id, r.state, r.cancel_reason) for r in stopped] == [
        (background.id, "cancelled", RUNTIME_STOPPED)
    ]
    assert (changed[-1].id, changed[-1].state, changed[-1].cancel_reason) == (
        cancelled.id,
        "cancelled",
        "the user asked",
    )
    assert inline.done and inline.state == "cancelled" and inline.cancel_reason == RUNTIME_STOPPED
    assert inline.result is not None and RUNTIME_STOPPED in inline.result.content
    assert not tasks.has_unsettled()
    assert events.seen == []  # no result event for a stopped task


@pytest.mark.anyio
@pytest.mark.parametrize(("state", "reason"), [("cancelled", RUNTIME_STOPPED), ("lost", None)])
async def test_task_status_of_a_task_an_earlier_run_stopped_says_so(
    tmp_path: Path, state: TaskState, reason: str | None
) -> None:
    record = TaskRecord(
        id="task_0ld0ld00",
        session="main",
        tool="run_shell",
        call_id="call_1",
        description="pytest",
        state=state,
        background=True,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        ended_at=datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
        cancel_reason=reason,
    )
    events = Events()
    async with await Store.open(tmp_path / "w.db") as store, anyio.create_task_group() as tg:
        await store.save_task(record)
        services = Services(tasks=TaskManager(tg, events.emit), emit=events.emit, store=store)
        status = await call(task_status, services, task_id=record.id)
    assert status["state"] == state
    assert "earlier run of the runtime stopped" in status["note"]
    assert status.get("cancel_reason") == reason
