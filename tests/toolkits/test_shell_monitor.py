"""Shell output monitors over real background commands: batching, filtering, ending."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.events import SHELL_OUTPUT, TOOL_RESULT
from wakeful.services import Services
from wakeful.toolkits.execution.run_shell import run_shell
from wakeful.toolkits.tasks import cancel_task
from wakeful.toolkits.triggers.shell_monitor import monitor_output, monitor_shell
from wakeful.tools.spec import Tool, ToolContext
from wakeful.tools.tasks import TaskHandle


async def call(tool: Tool, services: Services, **arguments: Any) -> dict[str, Any]:
    result = await tool.run(arguments, ToolContext("main", "call_1", tool.name, services))
    assert not result.is_error, result.content
    value: dict[str, Any] = json.loads(result.content)
    return value


async def start_background(services: Services, command: str) -> TaskHandle:
    answer = await call(run_shell, services, command=command, background=True)
    handle = services.tasks.get(answer["task_id"])
    assert handle is not None
    return handle


@pytest.mark.anyio
async def test_lines_close_together_arrive_as_one_event() -> None:
    async with tool_services() as (services, events):
        watched = await start_background(
            services, "for i in 1 2 3; do echo line $i; sleep 0.1; done; sleep 100"
        )
        answer = await call(monitor_shell, services, task_id=watched.id)
        await events.until(lambda: bool(events.of_kind(SHELL_OUTPUT)))
        await anyio.sleep(0.2)  # room for a wrongly split second event to show up

    assert answer["status"] == "monitoring"
    assert answer["task_id"] == watched.id
    [event] = events.of_kind(SHELL_OUTPUT)
    assert event.content == "line 1\nline 2\nline 3"
    assert event.source.type == "tool"
    assert event.source.id == watched.id
    assert event.session == "main"
    assert event.context == {
        "task_id": watched.id,
        "pattern": None,
        "lines": 3,
        "monitor_id": answer["monitor_id"],
    }


async def emitted_batches(
    command: str, *, window: float = 0.5, max_wait: float = 5.0, max_lines: int = 200
) -> list[str]:
    """Run `command` in a task and return the batches monitor_output makes of its output."""
    async with tool_services() as (services, events):
        watched = await start_background(services, command)
        with watched.subscribe() as lines:
            await monitor_output(
                lines,
                events.emit,
                task_id=watched.id,
                session="main",
                window=window,
                max_wait=max_wait,
                max_lines=max_lines,
            )
    return [e.text for e in events.of_kind(SHELL_OUTPUT)]


@pytest.mark.anyio
async def test_lines_further_apart_than_the_window_arrive_separately() -> None:
    batches = await emitted_batches("echo a; echo b; sleep 0.5; echo c", window=0.2)

    assert batches == ["a\nb", "c"]


@pytest.mark.anyio
async def test_a_steady_stream_is_still_delivered_every_max_wait() -> None:
    batches = await emitted_batches(
        "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.1; done", window=0.3, max_wait=0.35
    )

    assert len(batches) >= 2
    assert "\n".join(batches).split() == [str(i) for i in range(1, 9)]


@pytest.mark.anyio
async def test_a_batch_holds_at_most_max_lines() -> None:
    batches = await emitted_batches("seq 1 5", max_lines=2)

    assert batches == ["1\n2", "3\n4", "5"]


@pytest.mark.anyio
async def test_a_pattern_keeps_only_matching_lines() -> None:
    async with tool_services() as (services, events):
        watched = await start_background(
            services, "sleep 0.1; echo ok; echo 'ERROR one'; echo fine; echo 'ERROR two'"
        )
        await call(monitor_shell, services, task_id=watched.id, pattern="^ERROR")
        await events.until(lambda: bool(events.of_kind(TOOL_RESULT)))

    [event] = events.of_kind(SHELL_OUTPUT)
    assert event.content == "ERROR one\nERROR two"
    assert event.context["pattern"] == "^ERROR"
    assert event.context["lines"] == 2


@pytest.mark.anyio
async def test_the_monitor_ends_with_the_task_and_reports_no_result_of_its_own() -> None:
    async with tool_services() as (services, events):
        watched = await start_background(services, "sleep 0.1; echo hello")
        answer = await call(monitor_shell, services, task_id=watched.id)
        monitor = services.tasks.get(answer["monitor_id"])
        assert monitor is not None
        with anyio.fail_after(5):
            result = await monitor.wait()

    assert monitor.state == "completed"
    assert result.content == (
        f"Stopped monitoring {watched.id}: the task ended (completed) after 1 shell.output events."
    )
    [tool_result] = events.of_kind(TOOL_RESULT)
    assert tool_result.context["task_id"] == watched.id


@pytest.mark.anyio
async def test_a_cancelled_monitor_stops_while_the_task_goes_on() -> None:
    async with tool_services() as (services, events):
        watched = await start_background(services, "sleep 0.3; echo later; sleep 100")
        answer = await call(monitor_shell, services, task_id=watched.id)

        cancelled = await call(cancel_task, services, task_id=answer["monitor_id"])
        with anyio.fail_after(5):
            while True:
                if watched.output_line_count:
                    break
                await anyio.sleep(0.02)
        await anyio.sleep(0.1)  # room for a stray event to show up
        assert not watched.done

    assert cancelled["status"] == "cancelled"
    assert events.of_kind(SHELL_OUTPUT) == []


@pytest.mark.anyio
async def test_unknown_task_lists_the_known_ones() -> None:
    async with tool_services() as (services, _):
        watched = await start_background(services, "sleep 100")
        with pytest.raises(ToolError, match=f"no task 'task_nope'.*Known task ids: {watched.id}"):
            await call(monitor_shell, services, task_id="task_nope")


@pytest.mark.anyio
async def test_an_invalid_pattern_is_named() -> None:
    async with tool_services() as (services, _):
        watched = await start_background(services, "sleep 100")
        with pytest.raises(ToolError, match=re.escape("The pattern 'ERROR(' is not a valid")):
            await call(monitor_shell, services, task_id=watched.id, pattern="ERROR(")


@pytest.mark.anyio
async def test_a_finished_task_cannot_be_monitored() -> None:
    async with tool_services() as (services, _):
        watched = await start_background(services, "true")
        await watched.wait()
        with pytest.raises(ToolError, match=r"already finished.*task_status"):
            await call(monitor_shell, services, task_id=watched.id)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({}, "task_id"), ({"task_id": "task_1", "pattern": ""}, "pattern"), ({"id": "x"}, "id")],
)
def test_bad_arguments_name_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolError, match=f"field `{field}`"):
        monitor_shell.validate(arguments)
