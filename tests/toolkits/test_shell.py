"""The run_shell tool, inline and in the background, with real subprocesses."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.events import TOOL_RESULT
from wakeful.services import Services
from wakeful.toolkits.execution.run_shell import SHELL_TOOLS, run_shell
from wakeful.tools.spec import Tool, ToolContext, ToolResult
from wakeful.tools.tasks import TaskHandle


def context(services: Services, task: TaskHandle | None = None) -> ToolContext:
    return ToolContext("main", "call_1", "run_shell", services, task)


@pytest.mark.anyio
async def test_inline_returns_exit_code_and_output() -> None:
    async with tool_services() as (services, _):
        result = await run_shell.run({"command": "echo hello; echo oops >&2"}, context(services))

    assert not result.is_error
    assert result.content == "Exit code 0. Output:\nhello\noops"


@pytest.mark.anyio
async def test_inline_failure_is_an_error_result() -> None:
    async with tool_services() as (services, _):
        result = await run_shell.run({"command": "ls /no/such/dir"}, context(services))

    assert result.is_error
    assert "exit code 2" in result.content
    assert "No such file or directory" in result.content


@pytest.mark.anyio
async def test_inline_runs_in_the_calls_task_so_its_output_is_visible() -> None:
    async with tool_services() as (services, _):

        async def session_call(handle: TaskHandle) -> ToolResult:
            arguments = {"command": "echo 'step 1 of 3: 33%'"}
            result: ToolResult = await run_shell.run(arguments, context(services, handle))
            return result

        handle = services.tasks.start(session="main", tool="run_shell", run=session_call)
        await handle.wait()

    assert list(handle.output) == ["step 1 of 3: 33%"]
    assert handle.percent == 33.0


@pytest.mark.anyio
async def test_inline_timeout_suggests_background() -> None:
    async with tool_services() as (services, _):
        started = time.monotonic()
        result = await run_shell.run(
            {"command": "sleep 30", "timeout_seconds": 0.3}, context(services)
        )

    assert time.monotonic() - started < 3
    assert result.is_error
    assert "timed out after 0.3 s" in result.content
    assert "background=True" in result.content


@pytest.mark.anyio
async def test_background_returns_at_once_and_the_result_arrives_as_an_event() -> None:
    async with tool_services() as (services, events):
        started = time.monotonic()
        result = await run_shell.run(
            {"command": "sleep 0.3; echo built", "background": True}, context(services)
        )
        returned_after = time.monotonic() - started
        answer = json.loads(result.content)
        done = await events.first(lambda e: e.kind == TOOL_RESULT)

    assert returned_after < 0.2
    assert answer["status"] == "running"
    assert answer["timeout_seconds"] == 3600
    assert done.context["task_id"] == answer["task_id"]
    assert done.context["state"] == "completed"
    assert done.context["call_id"] == "call_1"
    assert done.content == "Exit code 0. Output:\nbuilt"
    handle = services.tasks.get(answer["task_id"])
    assert handle is not None
    assert handle.description == "sleep 0.3; echo built"


@pytest.mark.anyio
async def test_background_failure_arrives_as_failed() -> None:
    async with tool_services() as (services, events):
        await run_shell.run({"command": "exit 4", "background": True}, context(services))
        done = await events.first(lambda e: e.kind == TOOL_RESULT)

    assert done.context["state"] == "failed"
    assert "exit code 4" in done.text


@pytest.mark.anyio
async def test_cwd_is_relative_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "frontend").mkdir()
    async with tool_services(workdir=tmp_path) as (services, _):
        here = await run_shell.run({"command": "pwd"}, context(services))
        there = await run_shell.run({"command": "pwd", "cwd": "frontend"}, context(services))

    assert here.content.endswith(str(tmp_path))
    assert there.content.endswith(str(tmp_path / "frontend"))


@pytest.mark.anyio
async def test_missing_cwd_is_a_tool_error_that_says_what_to_do(tmp_path: Path) -> None:
    async with tool_services(workdir=tmp_path) as (services, _):
        with pytest.raises(ToolError, match=r"'nowhere' does not exist.*leave cwd out"):
            await run_shell.run({"command": "pwd", "cwd": "nowhere"}, context(services))


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "command"),
        ({"command": ""}, "command"),
        ({"command": "ls", "timeout_seconds": 0}, "timeout_seconds"),
        ({"command": "ls", "timeout_seconds": 10**9}, "timeout_seconds"),
        ({"command": "ls", "background": "later"}, "background"),
        ({"cmd": "ls"}, "cmd"),
    ],
)
def test_bad_arguments_name_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolError, match=f"field `{field}`"):
        run_shell.validate(arguments)


@pytest.mark.parametrize("shell_tool", SHELL_TOOLS, ids=lambda t: t.name)
def test_descriptions_follow_the_standard(shell_tool: Tool) -> None:
    spec = shell_tool.spec
    assert 1 <= len(spec.examples) <= 3
    for example in spec.examples:
        shell_tool.validate(example)
    for name, prop in spec.input_schema["properties"].items():
        assert "e.g." in prop["description"], name
    assert "Cost" in spec.description
    assert "Result" in spec.description


def test_run_shell_annotations_are_honest() -> None:
    annotations = run_shell.spec.annotations
    assert annotations.destructive
    assert annotations.open_world
    assert not annotations.read_only
    assert "NOT A SANDBOX" in run_shell.spec.description  # it says when it is unconfined
