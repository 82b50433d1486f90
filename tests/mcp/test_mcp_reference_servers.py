"""MCPToolset against the reference MCP servers that show third-party behaviour our own test
servers only imitate. ./scripts/test installs each from its registry before the tests run
(cached between runs); a test skips, with the reason, where its server is not installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from tool_services import tool_services
from wakeful.events import SYSTEM_ALERT
from wakeful.mcp.client import MCPToolset
from wakeful.mcp.config import MCPServerConfig

EVERYTHING = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"  # pinned: its tool list is what the test checks
# Installed by ./scripts/test (as CI runs it) before the tests: tests reach no registry.
_REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("WAKEFUL_TEST_CACHE", _REPO / ".cache" / "test-deps"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def everything_server() -> list[str]:
    """The command that starts server-everything over stdio, as ./scripts/test installed it."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is needed to run the reference server server-everything")
    prefix = CACHE / f"server-everything-{EVERYTHING_VERSION}"
    entry = prefix / "node_modules" / EVERYTHING / "dist" / "index.js"
    if not entry.exists():
        pytest.skip(
            f"{EVERYTHING}@{EVERYTHING_VERSION} is not installed in {prefix}; ./scripts/test "
            "installs it with npm"
        )
    return [node, str(entry), "stdio"]


@pytest.mark.anyio
async def test_server_everything_task_only_tool_is_left_out_and_reported(
    everything_server: list[str],
) -> None:
    config = MCPServerConfig(name="everything", command=everything_server)
    async with (
        tool_services() as (_, events),
        MCPToolset([config], emit=events.emit) as toolset,
    ):
        # It registers its task-only tool after the handshake and announces it with a
        # list-changed notification, so wait for the listing that has it.
        with anyio.fail_after(20):
            while "simulate-research-query" not in toolset.server("everything").tools:
                await toolset.changed.wait()
        names = {t.name for t in toolset.tools()}
        assert "echo" in names
        assert "simulate-research-query" not in names
        assert toolset.server("everything").task_only == ("simulate-research-query",)
        texts = [e.text for e in events.of_kind(SYSTEM_ALERT)]
        assert len([t for t in texts if "simulate-research-query" in t]) == 1


@pytest.mark.anyio
async def test_server_everything_elicitation_is_answered_by_the_user(
    everything_server: list[str],
) -> None:
    """Its elicitation tool (shown only to clients that declare elicitation) asks for a form of
    every kind MCP allows; the user's typed answer reaches it, defaults filled in."""
    import re

    from wakeful.safety.approvals import Approvals
    from wakeful.services import Outbox
    from wakeful.tools.spec import ToolContext, ToolResult

    outbox = Outbox()
    approvals = Approvals(outbox)
    asked = anyio.Event()
    questions: list[str] = []

    async def receive(message: dict[str, object]) -> None:
        questions.append(str(message["text"]))
        asked.set()

    outbox.listeners.append(receive)
    config = MCPServerConfig(name="everything", command=everything_server)
    async with MCPToolset([config], approvals=approvals) as toolset:
        with anyio.fail_after(20):
            while "trigger-elicitation-request" not in toolset.server("everything").tools:
                await toolset.changed.wait()
        [tool] = [t for t in toolset.tools() if t.name == "trigger-elicitation-request"]
        results: list[ToolResult] = []
        async with tool_services() as (services, _):
            ctx = ToolContext("main", "call_1", tool.name, services)

            async def run() -> None:
                results.append(await tool.run({}, ctx))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                with anyio.fail_after(20):
                    await asked.wait()
                [question] = questions
                found = re.search(
                    r"Input requested \[([0-9a-f]+)\] by MCP server 'everything'", question
                )
                assert found is not None, question
                assert "name: Your full, legal name (text, required)" in question
                assert "email: Your email address" in question
                assert "one of: hero-1 (Superman), hero-2 (Green Lantern)" in question
                request_id = found.group(1)
                bad = approvals.answer_input(request_id, "name=Ada integer=500")
                assert not bad.accepted
                assert "integer must be a whole number from 1 to 100; 500 is not." in bad.text
                reply = approvals.answer_input(
                    request_id,
                    'name="Ada Lovelace" check=yes email=ada@example.com integer=7 '
                    "untitledMultipleSelectEnum=Guitar,Piano titledSingleSelectEnum='Wonder Woman'"
                    " legacyTitledEnum=Dogs",
                )
                assert reply.accepted, reply.text
    [result] = results
    assert not result.is_error, result.content
    assert "User provided the requested information" in result.content
    assert "- Name: Ada Lovelace" in result.content
    assert "- Agreed to terms: true" in result.content
    assert "- Favorite Integer: 7" in result.content
    assert '"titledSingleSelectEnum": "hero-3"' in result.content
    assert '"legacyTitledEnum": "pet-2"' in result.content
    assert '"untitledMultipleSelectEnum": [\n' in result.content
    assert '"firstLine": "It was a dark and stormy night."' in result.content  # a default
