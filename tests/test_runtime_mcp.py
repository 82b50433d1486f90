"""The runtime as an MCP client of wakeful's own perception server, over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wakeful.events import user_input
from wakeful.messages import ToolMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime
from wakeful.tools.mcp_config import MCPServerConfig

pytestmark = pytest.mark.anyio


async def test_an_agent_reads_a_file_through_the_perception_server(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("“quoted”\r\nsecond line\n", encoding="utf-8")
    server = MCPServerConfig(
        name="files",
        command=[
            sys.executable,
            "-m",
            "wakeful.cli_mcp",
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
