"""MCPToolset against real MCP servers: stdio subprocesses, in-memory and Streamable HTTP."""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from pydantic import ValidationError

from loopback_http import serving
from mcp_servers.needs_input import AUTHORIZE_MESSAGE, AUTHORIZE_URL, BOOKING_QUESTION
from mcp_servers.needs_input import build_server as build_needs_input
from mcp_servers.toolbox import PNG_BYTES, build_server
from process_probes import live_processes_matching
from tool_services import Events, tool_services
from wakeful.errors import ConfigError
from wakeful.events import SYSTEM_ALERT, TOOL_PROGRESS
from wakeful.mcp.client import MCPToolset
from wakeful.mcp.config import MCPServerConfig
from wakeful.mcp.results import tool_result_from_mcp
from wakeful.services import Services
from wakeful.tools.spec import ToolContext, ToolResult

SERVERS = Path(__file__).parent.parent / "mcp_servers"


def stdio_config(
    name: str = "toolbox", script: str = "toolbox.py", *, record: Path | None = None, **options: Any
) -> MCPServerConfig:
    env = {"WAKEFUL_MCP_RECORD": str(record)} if record is not None else {}
    options.setdefault("restart_initial_delay_seconds", 0.1)
    return MCPServerConfig(
        name=name, command=[sys.executable, str(SERVERS / script)], env=env, **options
    )


async def call(toolset: MCPToolset, services: Services, name: str, **arguments: Any) -> ToolResult:
    tool = {t.name: t for t in toolset.tools()}[name]
    return await tool.run(arguments, ToolContext("main", "call_1", name, services))


async def until(toolset: MCPToolset, done: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not done():
            await toolset.changed.wait()


def recorded(record: Path) -> str:
    return record.read_text() if record.exists() else ""


def alerts(events: Events) -> list[str]:
    return [e.text for e in events.of_kind(SYSTEM_ALERT)]


@pytest.mark.anyio
async def test_stdio_tools_are_listed_and_results_map_without_loss() -> None:
    async with (
        tool_services() as (services, _),
        MCPToolset([stdio_config(), stdio_config("trusted", trusted=True)]) as toolset,
    ):
        assert toolset.server("toolbox").state == "ready"
        echo = await call(toolset, services, "toolbox.echo", text="hello")
        assert (echo.content, echo.is_error) == ("hello", False)

        added = await call(toolset, services, "toolbox.add", a=2, b=3)
        assert added.content == "5"
        assert added.structured == {"structured_content": {"result": 5}}

        image = await call(toolset, services, "toolbox.image")
        assert image.content == f"[image: image/png, {len(PNG_BYTES)} bytes]"
        [kept] = image.structured["images"]
        assert kept["mime_type"] == "image/png"
        assert kept["data"]  # base64, exactly as the server sent it

        failed = await call(toolset, services, "toolbox.fail", reason="it must")
        assert failed.is_error
        assert "fail failed because it must" in failed.content

        # Hints of an untrusted server are ignored; a trusted server's are believed.
        tools = {t.name: t for t in toolset.tools()}
        untrusted = tools["toolbox.slow_with_progress"].spec.annotations
        assert (untrusted.read_only, untrusted.destructive) == (False, True)
        assert tools["trusted.slow_with_progress"].spec.annotations.read_only


@pytest.mark.anyio
async def test_colliding_names_are_namespaced_and_reported() -> None:
    async with (
        tool_services() as (services, events),
        MCPToolset(
            [stdio_config(), stdio_config("weather", "weather.py")],
            emit=events.emit,
            reserved_names=["add"],
        ) as toolset,
    ):
        names = {t.name for t in toolset.tools()}
        assert {"toolbox.echo", "weather.echo", "toolbox.add", "forecast", "image"} <= names
        assert "echo" not in names
        assert toolset.collisions == {"echo": ["toolbox", "weather"], "add": ["toolbox"]}
        text = " ".join(alerts(events))
        assert "'toolbox.echo', 'weather.echo'" in text
        assert "the runtime itself" in text
        assert (await call(toolset, services, "weather.echo", text="hi")).content == "HI"
        assert (await call(toolset, services, "forecast", city="Oslo")).content == "Sunny in Oslo."


@pytest.mark.anyio
async def test_progress_extends_the_timeout_and_silence_ends_the_call(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    config = stdio_config(record=record, call_timeout_seconds=0.3, max_call_seconds=0.8)
    async with tool_services() as (services, events), MCPToolset([config]) as toolset:
        tool = {t.name: t for t in toolset.tools()}["slow_with_progress"]

        async def run(handle: Any) -> ToolResult:
            ctx = ToolContext("main", "call_1", tool.name, services, task=handle)
            return await tool.run({"steps": 4, "delay": 0.15}, ctx)

        # 0.6 s in all, twice the timeout, with progress every 0.15 s: it succeeds.
        handle = services.tasks.start(session="main", tool=tool.name, run=run, background=True)
        result = await handle.wait()
        assert (result.content, result.is_error) == ("finished 4 steps", False)
        assert handle.percent == 75.0
        assert handle.progress_message == "step 4 of 4"
        [progress] = events.of_kind(TOOL_PROGRESS)[:1]
        assert progress.context["task_id"] == handle.id

        silent = await call(toolset, services, "hang", label="silent")
        assert silent.is_error
        assert "sent neither a result nor progress for 0.3 s" in silent.content
        endless = await call(toolset, services, "slow_with_progress", steps=100, delay=0.1)
        assert endless.is_error
        assert "max_call_seconds = 0.8" in endless.content
        assert toolset.server("toolbox").state == "ready"
    assert "cancelled silent" in record.read_text()


@pytest.mark.anyio
async def test_cancelling_a_call_sends_the_protocol_cancellation(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    async with (
        tool_services() as (services, _),
        MCPToolset([stdio_config(record=record)]) as toolset,
    ):
        tool = {t.name: t for t in toolset.tools()}["hang"]

        async def run(handle: Any) -> ToolResult:
            ctx = ToolContext("main", "call_1", "hang", services, task=handle)
            return await tool.run({"label": "by the user"}, ctx)

        handle = services.tasks.start(session="main", tool="hang", run=run)
        await anyio.sleep(0.3)
        handle.cancel("the user changed their mind")
        result = await handle.wait()
        assert handle.state == "cancelled", result.content
        with anyio.fail_after(5):
            # The record is written by the server process: there is nothing to wait on but it.
            while "cancelled by the user" not in recorded(record):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        # The connection is still fine.
        assert (await call(toolset, services, "echo", text="still here")).content == "still here"


@pytest.mark.anyio
async def test_a_crashed_server_is_reported_restarted_and_its_tools_come_back(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.txt"
    config = stdio_config(record=record, restart_initial_delay_seconds=0.5)
    async with (
        tool_services() as (services, events),
        MCPToolset([config], emit=events.emit) as toolset,
    ):
        crashed = await call(toolset, services, "crash")
        assert crashed.is_error
        assert "closed the connection during the call to crash" in crashed.content

        await until(toolset, lambda: toolset.server("toolbox").state == "unavailable")
        down = await call(toolset, services, "echo", text="anyone?")
        assert down.is_error
        assert "MCP server 'toolbox' is down" in down.content
        [alert] = alerts(events)
        assert "MCP server 'toolbox' stopped working: its connection closed" in alert
        assert "restarted in 0.5 s" in alert
        assert "Its tools (echo, add," in alert

        await until(toolset, lambda: toolset.server("toolbox").state == "ready")
        assert toolset.server("toolbox").restarts == 1
        assert "is available again after a restart" in alerts(events)[-1]
        assert (await call(toolset, services, "echo", text="back")).content == "back"
    assert record.read_text().count("started") == 2


@pytest.mark.anyio
async def test_a_server_that_stops_answering_is_detected_and_restarted() -> None:
    config = stdio_config(call_timeout_seconds=0.5, health_check_timeout_seconds=0.5)
    async with (
        tool_services() as (services, events),
        MCPToolset([config], emit=events.emit) as toolset,
    ):
        frozen = await call(toolset, services, "freeze", seconds=1.5)
        assert "timed out" in frozen.content
        # The timeout triggers a health check at once, which gets no answer either.
        await until(toolset, lambda: toolset.server("toolbox").state == "unavailable")
        assert "stopped answering" in toolset.server("toolbox").detail
        await until(toolset, lambda: toolset.server("toolbox").state == "ready")
        assert (await call(toolset, services, "echo", text="thawed")).content == "thawed"
        assert "stopped answering" in alerts(events)[0]


@pytest.mark.anyio
async def test_no_server_process_outlives_the_toolset_even_when_cancelled() -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    config = MCPServerConfig(
        name="toolbox", command=[sys.executable, str(SERVERS / "toolbox.py"), marker]
    )
    async with MCPToolset([config]):
        assert len(live_processes_matching(marker)) == 1
    assert live_processes_matching(marker) == []

    with anyio.CancelScope() as scope:
        async with MCPToolset([config]):
            assert len(live_processes_matching(marker)) == 1
            scope.cancel()
            await anyio.sleep(5)
    assert scope.cancelled_caught
    assert live_processes_matching(marker) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "x", "command": ["a"], "url": "http://h/mcp"}, "has both of command and url"),
        ({"name": "x"}, "has neither of command and url"),
        ({"name": "", "command": ["a"]}, "MCP server name '' is invalid"),
        ({"name": "a.b", "command": ["a"]}, "MCP server name 'a.b' is invalid"),
        ({"name": "x", "url": "localhost:8000"}, "is not an HTTP endpoint"),
        ({"name": "x", "command": []}, "command is empty"),
        ({"name": "x", "command": ["a"], "headers": {"A": "b"}}, "apply only to a url"),
        ({"name": "x", "url": "http://h/mcp", "env": {"A": "b"}}, "apply only to a command"),
        ({"name": "x", "command": ["a"], "max_call_seconds": 5}, "max_call_seconds (5)"),
    ],
)
def test_bad_configurations_are_explained(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MCPServerConfig.model_validate(fields)


def test_two_servers_with_one_name_are_refused() -> None:
    with pytest.raises(ConfigError, match="Two MCP servers are named 'toolbox'"):
        MCPToolset([stdio_config(), stdio_config()])


@pytest.mark.anyio
async def test_a_missing_program_is_reported_and_the_other_servers_work() -> None:
    missing = MCPServerConfig(name="ghost", command=["wakeful-no-such-mcp-server", "--stdio"])
    async with (
        tool_services() as (services, events),
        MCPToolset([missing, stdio_config()], emit=events.emit) as toolset,
    ):
        ghost = toolset.server("ghost")
        assert ghost.state == "failed"
        assert "'wakeful-no-such-mcp-server' was not found" in ghost.detail
        [alert] = alerts(events)
        assert alert.startswith("MCP server 'ghost' cannot be started")
        assert "fix `command`" in alert
        assert (await call(toolset, services, "echo", text="ok")).content == "ok"


@pytest.mark.anyio
async def test_in_memory_server_and_tool_list_changes() -> None:
    async with (
        tool_services() as (services, _),
        MCPToolset([], in_process={"memory": build_server()}) as toolset,
    ):
        assert (await call(toolset, services, "echo", text="in memory")).content == "in memory"
        assert "extra" not in {t.name for t in toolset.tools()}
        await call(toolset, services, "add_extra_tool")
        await until(toolset, lambda: "extra" in {t.name for t in toolset.tools()})
        assert (await call(toolset, services, "extra")).content == "extra!"


@pytest.mark.anyio
async def test_stdio_tool_list_changes_are_followed() -> None:
    async with tool_services() as (services, _), MCPToolset([stdio_config()]) as toolset:
        await call(toolset, services, "add_extra_tool")
        await until(toolset, lambda: "extra" in {t.name for t in toolset.tools()})
        assert (await call(toolset, services, "extra")).content == "extra!"


@pytest.mark.anyio
async def test_task_only_tools_are_not_offered_and_the_operator_is_told_once() -> None:
    async with (
        tool_services() as (services, events),
        MCPToolset([stdio_config("tasks", "task_only.py")], emit=events.emit) as toolset,
    ):
        # `summarize` may run as a task (optional): a plain call works, so it is offered.
        assert {t.name for t in toolset.tools()} == {"echo", "summarize"}
        status = toolset.server("tasks")
        assert status.tools == ("echo", "render_video", "summarize")
        assert (status.disabled, status.task_only) == (("render_video",), ("render_video",))
        [disabled] = toolset.disabled()
        assert (disabled.server, disabled.tool, disabled.kind) == (
            "tasks",
            "render_video",
            "unsupported",
        )
        assert "runs only as an MCP task" in disabled.reason
        assert "approve" not in disabled.reason
        [alert] = alerts(events)
        assert "'tasks'" in alert and "render_video" in alert
        assert 'taskSupport "required"' in alert
        # Listing again (a health check, a list change) does not repeat it.
        await toolset.rebuild()
        assert len(alerts(events)) == 1
        assert (
            await call(toolset, services, "summarize", text="a long text")
        ).content == "a long tex"


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "in-memory"])
async def test_a_tool_that_needs_a_person_gets_advice_instead_of_a_retry(transport: str) -> None:
    configs = [stdio_config("needs_input", "needs_input.py")] if transport == "stdio" else []
    in_process = {"needs_input": build_needs_input()} if transport == "in-memory" else None
    async with (
        tool_services() as (services, _),
        MCPToolset(configs, in_process=in_process) as toolset,
    ):
        booking = await call(toolset, services, "book_table", restaurant="Chez Nous")
        assert booking.is_error
        assert "needs input from a person" in booking.content
        assert "cannot collect" in booking.content
        assert repr(BOOKING_QUESTION) in booking.content
        assert "date" in booking.content  # the field the server asked for
        assert "call again" not in booking.content
        assert "Do not call book_table again" in booking.content

        calendar = await call(toolset, services, "read_calendar", day="2026-12-02")
        assert calendar.is_error
        assert repr(AUTHORIZE_MESSAGE) in calendar.content
        assert AUTHORIZE_URL in calendar.content
        assert "calendar.example" in calendar.content
        assert "call again" not in calendar.content
        assert calendar.structured == {
            "input_required": [{"kind": "url", "message": AUTHORIZE_MESSAGE, "url": AUTHORIZE_URL}]
        }
        # A server that only asks to be polled (its state, no questions) is polled.
        polled = await call(toolset, services, "slow_report")
        assert (polled.content, polled.is_error) == ("ready after 2 polls", False)
        assert toolset.server("needs_input").state == "ready"


@asynccontextmanager
async def http_server() -> AsyncIterator[str]:
    """The toolbox served over Streamable HTTP on a free port of 127.0.0.1."""
    async with serving(build_server().streamable_http_app(), lifespan="on") as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.anyio
async def test_streamable_http_server() -> None:
    async with (
        http_server() as url,
        tool_services() as (services, _),
        MCPToolset([MCPServerConfig(name="remote", url=url)]) as toolset,
    ):
        assert toolset.server("remote").state == "ready"
        assert (await call(toolset, services, "echo", text="over http")).content == "over http"
        progress = await call(toolset, services, "slow_with_progress", steps=2, delay=0.05)
        assert progress.content == "finished 2 steps"


def test_every_kind_of_content_is_kept_and_described() -> None:
    blob = base64.b64encode(b"x" * 3000).decode()
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="Here you are."),
            mcp_types.AudioContent(type="audio", data=blob, mime_type="audio/wav"),
            mcp_types.ResourceLink(type="resource_link", name="report", uri="file:///r.pdf"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(
                    uri="file:///notes.txt", mime_type="text/plain", text="the notes"
                ),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(
                    uri="file:///data.bin", mime_type="application/octet-stream", blob=blob
                ),
            ),
        ],
        structured_content={"ok": True},
    )
    mapped = tool_result_from_mcp(result)
    assert mapped.content.splitlines() == [
        "Here you are.",
        "[audio: audio/wav, 3 KB]",
        "[resource link: report <file:///r.pdf>]",
        "[resource file:///notes.txt (text/plain)]",
        "the notes",
        "[resource: file:///data.bin, application/octet-stream, 3 KB]",
    ]
    assert mapped.structured["audio"] == [{"mime_type": "audio/wav", "data": blob}]
    assert mapped.structured["resources"][0]["data"] == blob
    assert mapped.structured["resource_links"][0]["uri"] == "file:///r.pdf"
    assert mapped.structured["structured_content"] == {"ok": True}

    only_structured = tool_result_from_mcp(
        mcp_types.CallToolResult(content=[], structured_content={"n": 1})
    )
    assert (only_structured.content, only_structured.structured) == (
        '{"n": 1}',
        {"structured_content": {"n": 1}},
    )
    empty_error = tool_result_from_mcp(mcp_types.CallToolResult(content=[], is_error=True))
    assert empty_error.is_error
    assert "without a message" in empty_error.content
