"""run_process with real bash subprocesses: output, exit codes, timeouts, and group cleanup."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from process_probes import live_group_members
from wakeful.errors import ToolError
from wakeful.events import Event
from wakeful.tools.process import run_process
from wakeful.tools.spec import ToolResult
from wakeful.tools.tasks import TaskHandle, TaskManager

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def pids(handle: TaskHandle, label: str) -> list[int]:
    return [int(line.split()[1]) for line in handle.output if line.startswith(label + " ")]


async def wait_for_lines(handle: TaskHandle, count: int) -> None:
    with anyio.fail_after(5):
        while True:
            if handle.output_line_count >= count:
                return
            await anyio.sleep(0.01)


@asynccontextmanager
async def task_manager() -> AsyncIterator[tuple[TaskManager, list[Event]]]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    async with anyio.create_task_group() as tg:
        manager = TaskManager(tg, emit)
        yield manager, events
        manager.cancel_all("the test is over")


def start(
    manager: TaskManager, command: str, *, timeout: float | None = None, kill_grace: float = 2.0
) -> TaskHandle:
    async def run(handle: TaskHandle) -> ToolResult:
        return await run_process(handle, command, timeout=timeout, kill_grace=kill_grace)

    return manager.start(session="main", tool="run_shell", run=run, background=True)


async def test_captures_stdout_and_stderr_in_order() -> None:
    result = await run_process(None, "echo one; echo two >&2; echo three")

    assert not result.is_error
    assert result.content == "Exit code 0. Output:\none\ntwo\nthree"
    assert result.structured["exit_code"] == 0
    assert result.structured["output_lines"] == 3
    assert "UTF-8" not in result.content


async def test_no_output_says_so() -> None:
    result = await run_process(None, "true")

    assert result.content == "Exit code 0. No output."


async def test_non_zero_exit_is_an_error_with_code_and_output() -> None:
    result = await run_process(None, "echo 'cannot find x' >&2; exit 3")

    assert result.is_error
    assert "exit code 3" in result.content
    assert "cannot find x" in result.content
    assert result.structured["exit_code"] == 3


async def test_lines_go_to_the_task_as_they_arrive_and_carriage_returns_split_them() -> None:
    async with task_manager() as (manager, _):
        handle = start(manager, r"printf 'fetch 10%%\rfetch 20%%\r\nnext\n'; printf 'no newline'")
        result = await handle.wait()

    assert list(handle.output) == ["fetch 10%", "fetch 20%", "next", "no newline"]
    assert handle.percent == 20.0
    assert result.content.endswith("next\nno newline")


async def test_undecodable_bytes_are_replaced_and_noted() -> None:
    result = await run_process(None, r"printf 'caf\xe9\n'")

    assert "caf\N{REPLACEMENT CHARACTER}" in result.content
    assert "not valid UTF-8" in result.content
    assert result.structured["undecodable_output"] is True


async def test_long_output_keeps_first_and_last_fifty_lines() -> None:
    result = await run_process(None, "seq 1 250")

    lines = result.content.splitlines()
    assert lines[1:51] == [str(i) for i in range(1, 51)]
    assert lines[51] == "[… 150 lines omitted …]"
    assert lines[52:] == [str(i) for i in range(201, 251)]
    assert result.structured["omitted_lines"] == 150


async def test_cwd_and_env_are_used(tmp_path: Path) -> None:
    result = await run_process(
        None, 'pwd; echo "$GREETING"', cwd=tmp_path, env={"GREETING": "hello", "PATH": "/bin"}
    )

    assert result.content.splitlines()[1:] == [str(tmp_path), "hello"]


async def test_a_command_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"could not be started.*bash is installed"):
        await run_process(None, "true", env={"PATH": str(tmp_path)})


async def test_timeout_kills_the_whole_group_and_suggests_background() -> None:
    async with task_manager() as (manager, _):
        handle = start(manager, "echo group $$; sleep 100 & echo child $!; wait", timeout=0.5)
        result = await handle.wait()

    assert result.is_error
    assert "timed out after 0.5 s" in result.content
    assert "background=True" in result.content
    assert "group " in result.content  # the output before the timeout is kept
    [pgid] = pids(handle, "group")
    [child] = pids(handle, "child")
    assert not is_running(child)
    assert live_group_members(pgid) == []


async def test_cancel_kills_children_and_grandchildren() -> None:
    command = (
        "echo group $$; "
        "bash -c 'sleep 100 & echo grandchild $!; wait' & "
        "sleep 100 & echo child $!; wait"
    )
    async with task_manager() as (manager, events):
        handle = start(manager, command)
        await wait_for_lines(handle, 3)
        [pgid] = pids(handle, "group")
        assert len(live_group_members(pgid)) >= 4  # bash, bash, sleep, sleep

        handle.cancel("the test cancelled it")
        await handle.wait()

    assert handle.state == "cancelled"
    assert handle.cancel_reason == "the test cancelled it"
    assert not any(is_running(pid) for pid in pids(handle, "child") + pids(handle, "grandchild"))
    assert live_group_members(pgid) == []
    assert events == []  # a cancelled task reports no tool.result


async def test_cancel_kills_a_double_forked_daemon_that_stayed_in_the_group() -> None:
    command = "echo group $$; ( (sleep 100 >/dev/null 2>&1 & echo daemon $!) & ); sleep 100"
    async with task_manager() as (manager, _):
        handle = start(manager, command)
        await wait_for_lines(handle, 2)
        [daemon] = pids(handle, "daemon")
        assert is_running(daemon)

        handle.cancel("stop")
        await handle.wait()

    assert not is_running(daemon)
    assert live_group_members(pids(handle, "group")[0]) == []


async def test_processes_left_behind_by_a_finished_command_are_stopped_and_noted() -> None:
    async with task_manager() as (manager, _):
        handle = start(manager, "echo group $$; (sleep 100 >/dev/null 2>&1 &); echo finished")
        result = await handle.wait()

    assert not result.is_error
    assert "left running in the background were stopped" in result.content
    assert live_group_members(pids(handle, "group")[0]) == []


async def test_a_process_ignoring_sigterm_gets_sigkill_after_the_grace() -> None:
    async with task_manager() as (manager, _):
        handle = start(manager, "trap '' TERM; echo group $$; sleep 100", kill_grace=0.3)
        await wait_for_lines(handle, 1)
        with anyio.fail_after(3):
            handle.cancel("stop")
            await handle.wait()

    assert live_group_members(pids(handle, "group")[0]) == []
