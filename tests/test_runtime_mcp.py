"""The runtime as an MCP client of wakeful's own perception server, over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wakeful.events import user_input
from wakeful.mcp.config import MCPServerConfig
from wakeful.messages import ToolMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio


async def test_an_agent_reads_a_file_through_the_perception_server(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("“quoted”\r\nsecond line\n", encoding="utf-8")
    server = MCPServerConfig(
        name="files",
        command=[
            sys.executable,
            "-m",
            "wakeful.cli.mcp",
            "serve",
            "perception",
            "--root",
            str(tmp_path),
        ],
    )
    model = ScriptedModel([use(call("read_file", path="notes.txt")), say("read it")])
    async with Runtime(model=model, with_timers=False, mcp_servers=[server]) as rt:
        assert {"read_file", "grep_file", "find_file", "list_dir"} <= set(rt.registry.names)
        await rt.submit(user_input("what is in notes.txt?"))
        await rt.wait_idle()
        offered = {t.name for t in model.requests[0].tools}
        assert "read_file" in offered and "reply_to_user" in offered
        [result] = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
        assert result.status == "ok"
        assert "“quoted”\r" in result.content and "second line" in result.content


async def test_a_poisoned_tool_is_held_back_and_a_call_to_it_says_why(tmp_path: Path) -> None:
    import sys

    from wakeful.events import user_input
    from wakeful.mcp.pins import ToolPins
    from wakeful.messages import ToolMessage
    from wakeful.models import ScriptedModel, call, say, use
    from wakeful.runtime import Runtime

    script = Path(__file__).parent / "mcp_servers" / "poisoned.py"
    server = MCPServerConfig(name="calc", command=[sys.executable, str(script)])
    model = ScriptedModel([use(call("add", a=1, b=2), call("multiply", a=2, b=3)), say("")])
    lock = tmp_path / "wakeful.lock.json"
    runtime = Runtime(
        model=model,
        with_timers=False,
        mcp_servers=[server],
        mcp_pins=ToolPins.load(lock),
    )
    async with runtime as rt:
        await rt.submit(user_input("add and multiply"))
        await rt.wait_idle()
        added, multiplied = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
        offered = {t.name for t in model.requests[0].tools}
    assert "add" not in offered and "multiply" in offered
    assert added.status == "error"
    assert "wakeful mcp approve calc add" in added.content
    assert multiplied.content.strip() == "6"
    assert lock.exists()  # the benign tool was pinned on first use


async def test_the_runtime_offers_its_workdir_as_roots_and_its_model_for_sampling(
    tmp_path: Path,
) -> None:
    from collections.abc import Sequence

    from wakeful.messages import Message
    from wakeful.models import FunctionModel, Turn
    from wakeful.models.base import ToolDefinition

    script = Path(__file__).parent / "mcp_servers" / "asks_client.py"
    server = MCPServerConfig(
        name="asks", command=[sys.executable, str(script)], allow_sampling=True
    )

    def turn(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        if not tools:
            return "sampled by the runtime's model"  # the server's sampling request
        if not any(isinstance(m, ToolMessage) for m in messages):
            return use(call("where"), call("summarize", text="a text"))
        return say("done")

    model = FunctionModel(turn)
    async with Runtime(
        model=model, with_timers=False, mcp_servers=[server], workdir=tmp_path
    ) as rt:
        await rt.submit(user_input("where are you, and summarize a text"))
        await rt.wait_idle()
        results = {
            m.content for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        }
        assert results == {tmp_path.as_uri(), "sampled by the runtime's model"}
        assert rt.mcp is not None
        [record] = rt.mcp.sampling_records()
        assert (record.tool, record.outcome) == ("summarize", "answered")
