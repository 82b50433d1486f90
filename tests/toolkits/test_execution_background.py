"""Background shell_exec over MCP: stored results, fetched by task id from a later connection,
cancellation that stops the process, and clear errors for bad ids."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from loopback_http import serving
from mcp import Client, StdioServerParameters
from process_probes import live_processes_matching
from wakeful.store.sqlite import Store
from wakeful.toolkits.execution.background import BACKGROUND_TOOLS
from wakeful.toolkits.execution.server import execution_server
from wakeful.toolkits.execution.shell_exec import shell_exec
from wakeful.tools.lint import lint_tool


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def data_of(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    fields: dict[str, Any] | None = result.structured_content
    assert fields is not None, text_of(result)
    return fields


async def start(client: Client, command: str) -> str:
    answer = data_of(await client.call_tool("shell_exec", {"command": command, "background": True}))
    assert answer["status"] == "running"
    # Over MCP the answer names the tools this server really has, not runtime events.
    assert "task_result" in answer["next"] and "tool.result" not in answer["next"]
    task_id = answer["task_id"]
    assert isinstance(task_id, str) and task_id.startswith("bg_") and len(task_id) == 35
    return task_id


async def wait_until_finished(client: Client, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(20):
        while True:
            status = data_of(await client.call_tool("task_status", {"task_id": task_id}))
            if status["state"] != "running":
                return status
            await anyio.sleep(0.05)


async def wait_for_process(marker: str) -> None:
    with anyio.fail_after(10):
        while not live_processes_matching(marker):  # noqa: ASYNC110 - /proc has no event
            await anyio.sleep(0.05)


# A separate client process: starts the execution server over stdio and prints a task's result.
FETCH_IN_A_NEW_PROCESS = """
import sys, anyio
from mcp import Client, StdioServerParameters

async def main(root: str, task_id: str) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "wakeful.cli.mcp", "serve", "execution", "--root", root],
        cwd=root,
    )
    async with Client(server) as client:
        result = await client.call_tool("task_result", {"task_id": task_id})
        print(result.is_error, result.content[0].text)

anyio.run(main, *sys.argv[1:])
"""


def stdio_server(root: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "wakeful.cli.mcp", "serve", "execution", "--root", str(root)],
        cwd=root,
    )


@pytest.mark.anyio
async def test_over_stdio_a_new_client_process_fetches_the_result_by_task_id(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with Client(stdio_server(tmp_path)) as first:
            finished = await start(first, "sleep 0.3; echo built-ok")
            left_running = await start(first, "sleep 987681")
            await wait_for_process("sleep 987681")
            assert (await wait_until_finished(first, finished))["state"] == "completed"
        # The first server process ended with its client; the running command with it.
        assert live_processes_matching("sleep 987681") == []
        async with Client(stdio_server(tmp_path)) as second:
            result = await second.call_tool("task_result", {"task_id": finished})
            assert not result.is_error, text_of(result)
            assert "Exit code 0" in text_of(result) and "built-ok" in text_of(result)
            assert data_of(result)["state"] == "completed"
            status = data_of(await second.call_tool("task_status", {"task_id": left_running}))
            assert status["state"] == "cancelled"
            assert "connection closed" in status["cancel_reason"]
            cut = await second.call_tool("task_result", {"task_id": left_running})
            assert cut.is_error and "cancelled" in text_of(cut)
        # A new client process, knowing nothing but the id, fetches the result too.
        fetched = await anyio.run_process(
            [sys.executable, "-c", FETCH_IN_A_NEW_PROCESS, str(tmp_path), finished]
        )
        assert fetched.stdout.decode().startswith("False Exit code 0."), fetched.stdout
        assert "built-ok" in fetched.stdout.decode()


@pytest.mark.anyio
async def test_task_result_waits_for_the_full_result(tmp_path: Path) -> None:
    async with Client(execution_server(tmp_path)) as client:
        task_id = await start(client, "echo one; sleep 1; echo two")
        early = await client.call_tool("task_result", {"task_id": task_id})
        assert not early.is_error, text_of(early)
        assert "still running" in text_of(early) and data_of(early)["state"] == "running"
        with anyio.fail_after(20):
            done = await client.call_tool("task_result", {"task_id": task_id, "wait_seconds": 15})
        fields = data_of(done)
        assert fields["state"] == "completed" and fields["exit_code"] == 0
        assert "one\ntwo" in text_of(done)
        failing = await start(client, "echo nope; exit 3")
        await wait_until_finished(client, failing)
        failed = await client.call_tool("task_result", {"task_id": failing})
        assert failed.is_error and "exit code 3" in text_of(failed)


@pytest.mark.anyio
async def test_another_connection_sees_a_run_only_by_its_id_and_cannot_cancel_it(
    tmp_path: Path,
) -> None:
    server = execution_server(tmp_path)
    async with Client(server) as owner, Client(server) as other:
        task_id = await start(owner, "sleep 987682")
        await wait_for_process("sleep 987682")
        seen = data_of(await other.call_tool("task_status", {"task_id": task_id}))
        assert seen["state"] == "running" and "another connection" in seen["note"]
        refused = await other.call_tool("cancel_task", {"task_id": task_id})
        assert refused.is_error and "another connection" in text_of(refused)
        assert live_processes_matching("sleep 987682")
        stopped = data_of(await owner.call_tool("cancel_task", {"task_id": task_id}))
        assert stopped["status"] == "cancelled"
    assert live_processes_matching("sleep 987682") == []


@pytest.mark.anyio
async def test_cancel_task_over_mcp_stops_the_process(tmp_path: Path) -> None:
    async with Client(execution_server(tmp_path)) as client:
        task_id = await start(client, "echo started; sleep 987683")
        await wait_for_process("sleep 987683")
        cancelled = data_of(
            await client.call_tool("cancel_task", {"task_id": task_id, "reason": "not needed"})
        )
        assert cancelled == {
            "task_id": task_id,
            "status": "cancelled",
            "cancel_reason": "not needed",
        }
        assert live_processes_matching("sleep 987683") == []
        result = await client.call_tool("task_result", {"task_id": task_id})
        assert result.is_error and "not needed" in text_of(result)
        again = data_of(await client.call_tool("cancel_task", {"task_id": task_id}))
        assert again["status"] == "already_finished" and again["state"] == "cancelled"


@pytest.mark.anyio
async def test_bad_task_ids_give_clear_errors(tmp_path: Path) -> None:
    async with Client(execution_server(tmp_path)) as client:
        for tool_name in ("task_status", "task_result", "cancel_task"):
            malformed = await client.call_tool(tool_name, {"task_id": "task_1a2b3c4d"})
            assert malformed.is_error
            assert "32 hex digits" in text_of(malformed) and "Pass the whole id" in text_of(
                malformed
            )
            unknown = await client.call_tool(tool_name, {"task_id": "bg_" + "0" * 32})
            assert unknown.is_error
            assert "There is no background task" in text_of(unknown), text_of(unknown)


@pytest.mark.anyio
async def test_the_store_keeps_each_run_under_its_unguessable_id(tmp_path: Path) -> None:
    async with Client(execution_server(tmp_path)) as client:
        task_id = await start(client, "echo stored")
        await wait_until_finished(client, task_id)
    reader = Store.read_only(tmp_path / ".wakeful" / "execution.db")
    try:
        records = reader.tasks()
    finally:
        reader.close()
    assert [(r.id, r.state, r.tool) for r in records] == [(task_id, "completed", "shell_exec")]
    assert records[0].result is not None and "stored" in records[0].result


def test_the_background_tools_meet_the_description_standard() -> None:
    for checked in (*BACKGROUND_TOOLS, shell_exec):
        assert lint_tool(checked) == [], checked.name


@pytest.mark.anyio
async def test_over_streamable_http_a_new_session_fetches_the_result(tmp_path: Path) -> None:
    app = execution_server(tmp_path).streamable_http_app()
    with anyio.fail_after(60):
        async with serving(app, lifespan="on") as port:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url) as first:
                task_id = await start(first, "echo over-http")
                await wait_until_finished(first, task_id)
            async with Client(url) as second:
                result = await second.call_tool("task_result", {"task_id": task_id})
                assert not result.is_error and "over-http" in text_of(result)
