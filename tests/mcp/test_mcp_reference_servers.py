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
