"""The execution server as an MCP client sees it: in memory, over stdio and Streamable HTTP, with
the safety gate asking the client's user through elicitation, and every call in the audit log."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext
from typer.testing import CliRunner

from loopback_http import mcp_server_over_http
from mcp import Client, StdioServerParameters
from wakeful.cli import app
from wakeful.cli.mcp import mcp_app
from wakeful.config import SafetyConfig, build_gate
from wakeful.mcp.bridge import BridgeServer
from wakeful.safety.commands import PolicySettings
from wakeful.store.sqlite import Store
from wakeful.toolkits.execution.server import EXECUTION_TOOLS, execution_server

EXPECTED_TOOLS = {
    "write_file",
    "edit_file",
    "shell_exec",
    "shell_history",
    "task_status",
    "task_result",
    "cancel_task",
    "code_interpreter",
    "reset_interpreter",
    "spreadsheet_read",
    "spreadsheet_write",
    "spreadsheet_formula",
    "send_email",
    "search_mail",
    "read_mail",
    "draft_reply",
    "move_mail",
    "archive_mail",
    "flag_mail",
    "create_calendar_event",
    "call_webhook",
    "github_create_pull_request",
}


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def guarded(root: Path) -> BridgeServer:
    safety = SafetyConfig(commands=PolicySettings(workspace=root))
    return execution_server(root, settings=safety.settings(), gate=build_gate(safety))


def answering(approve: bool | None, asked: list[str]) -> Any:
    """An elicitation callback that records the question and answers it (None: dismiss)."""

    async def answer(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        if approve is None:
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content={"approve": approve, "reason": "ok"})

    return answer


@pytest.mark.anyio
async def test_it_lists_every_execution_tool_and_writes_then_runs(tmp_path: Path) -> None:
    async with Client(guarded(tmp_path)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == EXPECTED_TOOLS == {t.name for t in EXECUTION_TOOLS}
        written = await client.call_tool(
            "write_file", {"path": "hello.py", "content": "print(“hi”)\r\n"}
        )
        assert not written.is_error, text_of(written)
        assert (tmp_path / "hello.py").read_bytes() == "print(“hi”)\r\n".encode()
        ran = await client.call_tool("shell_exec", {"command": "cat hello.py"})
        assert not ran.is_error, text_of(ran)
        assert "print(“hi”)" in text_of(ran)


@pytest.mark.anyio
async def test_a_command_needing_approval_is_put_to_the_clients_user(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    asked: list[str] = []
    server = guarded(tmp_path)
    async with Client(server, elicitation_callback=answering(True, asked)) as client:
        result = await client.call_tool("shell_exec", {"command": "rm -rf src"})
    assert not result.is_error, text_of(result)
    assert not (tmp_path / "src").exists()
    (question,) = asked
    assert "Approve shell_exec `rm -rf src`?" in question


@pytest.mark.anyio
async def test_a_declined_or_dismissed_approval_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for answer in (False, None):
        asked: list[str] = []
        async with Client(guarded(tmp_path), elicitation_callback=answering(answer, asked)) as c:
            result = await c.call_tool("shell_exec", {"command": "rm -rf src"})
        assert result.is_error
        assert "The user did not approve this call" in text_of(result)
        assert (tmp_path / "src").is_dir()
        assert len(asked) == 1


@pytest.mark.anyio
async def test_a_client_that_cannot_ask_its_user_gets_a_refusal_that_says_why(
    tmp_path: Path,
) -> None:
    (tmp_path / "src").mkdir()
    async with Client(guarded(tmp_path)) as client:
        result = await client.call_tool("shell_exec", {"command": "rm -rf src"})
        denied = await client.call_tool("shell_exec", {"command": "rm -rf /"})
    assert result.is_error
    assert "cannot ask one (it does not support elicitation)" in text_of(result)
    assert (tmp_path / "src").is_dir()
    assert denied.is_error
    assert "The safety checks refused this call" in text_of(denied)


@pytest.mark.anyio
async def test_every_call_is_in_the_servers_audit_log(tmp_path: Path) -> None:
    async with Client(guarded(tmp_path)) as client:
        await client.call_tool("write_file", {"path": "a.txt", "content": "x"})
        await client.call_tool("shell_exec", {"command": "rm -rf /"})
        await client.call_tool("write_file", {"path": "../escape.txt", "content": "x"})
    store_path = tmp_path / ".wakeful" / "execution.db"
    reader = Store.read_only(store_path)
    try:
        rows = reader.audit_rows()
    finally:
        reader.close()
    assert [(r.tool, r.status) for r in rows] == [
        ("write_file", "ok"),
        ("shell_exec", "denied"),
        ("write_file", "error"),
    ]
    assert rows[1].data["decisions"][0]["decision"] == "deny"
    result = CliRunner().invoke(app, ["audit", "stats", "--store", str(store_path), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)["tools"]
    assert stats["write_file"]["calls"] == 2
    assert stats["shell_exec"]["denied"] == 1


def serve_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "wakeful.cli.mcp", "serve", "execution", "--root", str(root)]


@pytest.mark.anyio
async def test_over_stdio_in_a_subprocess(tmp_path: Path) -> None:
    command, *args = serve_command(tmp_path)
    with anyio.fail_after(30):
        async with Client(StdioServerParameters(command=command, args=args, cwd=tmp_path)) as c:
            assert {t.name for t in (await c.list_tools()).tools} == EXPECTED_TOOLS
            result = await c.call_tool("edit_file", {"path": "missing.txt", "old": "a", "new": "b"})
            assert result.is_error
            written = await c.call_tool("write_file", {"path": "x.json", "content": "{bad"})
            assert "x.json" in text_of(written)
    assert (tmp_path / "x.json").read_text() == "{bad"
    assert written.structured_content is not None
    assert written.structured_content["check"]["diagnostics"], written.structured_content


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    with mcp_server_over_http(serve_command(tmp_path), cwd=tmp_path) as url:
        yield url


@pytest.mark.anyio
async def test_over_streamable_http(http_server: str, tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with Client(http_server) as client:
            result = await client.call_tool("write_file", {"path": "h.txt", "content": "over http"})
            assert not result.is_error, text_of(result)
    assert (tmp_path / "h.txt").read_text() == "over http"


runner = CliRunner()


def test_bad_options_exit_with_a_clear_message(tmp_path: Path) -> None:
    missing = runner.invoke(mcp_app, ["serve", "execution", "--root", str(tmp_path / "no")])
    assert missing.exit_code == 1 and "does not exist" in missing.output
    bad_http = runner.invoke(
        mcp_app, ["serve", "execution", "--root", str(tmp_path), "--http", "nope"]
    )
    assert bad_http.exit_code == 2 and "HOST:PORT" in bad_http.output
    config = tmp_path / "wakeful.toml"
    config.write_text("[safety]\nbreaker_denials = 0\n")
    bad_config = runner.invoke(
        mcp_app, ["serve", "execution", "--root", str(tmp_path), "--config", str(config)]
    )
    assert bad_config.exit_code == 1
    assert "breaker_denials" in bad_config.output


@pytest.mark.anyio
async def test_a_path_outside_the_root_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    # /etc/... is a sensitive path the sidecar would ask about; the tool would refuse it anyway,
    # so nobody is asked, and a client without elicitation hears the real reason.
    asked: list[str] = []
    async with Client(guarded(tmp_path), elicitation_callback=answering(True, asked)) as client:
        written = await client.call_tool(
            "write_file", {"path": "/etc/wakeful-probe", "content": "x"}
        )
        climbed = await client.call_tool(
            "edit_file", {"path": "../../etc/hosts", "old": "a", "new": "b"}
        )
        cwd = await client.call_tool("shell_exec", {"command": "ls", "cwd": "/"})
    assert asked == []
    for result in (written, climbed, cwd):
        assert result.is_error
        assert "leads outside the root" in text_of(result), text_of(result)
        assert "did not approve" not in text_of(result)
    async with Client(guarded(tmp_path)) as no_elicitation:
        refused = await no_elicitation.call_tool(
            "write_file", {"path": "/etc/wakeful-probe", "content": "x"}
        )
    assert "leads outside the root" in text_of(refused)
