"""An MCP server for the client tests: one tool per behaviour the client must handle.

Run as a stdio subprocess (`python toolbox.py`), or imported and served in-process or over
Streamable HTTP through `build_server()`. When `WAKEFUL_MCP_RECORD` names a file, the server
appends one line per notable thing it sees (a cancelled call, a start), so tests can check what
reached the far side of the protocol.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ToolAnnotations

# A 1x1 transparent PNG.
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def record(line: str) -> None:
    path = os.environ.get("WAKEFUL_MCP_RECORD")
    if path:
        with Path(path).open("a") as file:
            file.write(line + "\n")


def build_server(name: str = "toolbox") -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers; the sum comes back as structured content."""
        return a + b

    @server.tool()
    async def image() -> Image:
        """Return a 1x1 PNG image."""
        return Image(data=PNG_BYTES, format="png")

    @server.tool()
    async def fail(reason: str = "it was asked to") -> str:
        """Always fail, with the reason as the error message."""
        raise ToolError(f"fail failed because {reason}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow_with_progress(steps: int, delay: float, ctx: Context) -> str:
        """Report progress `steps` times, `delay` seconds apart, then finish."""
        for step in range(steps):
            await ctx.report_progress(step, steps, f"step {step + 1} of {steps}")
            await anyio.sleep(delay)
        return f"finished {steps} steps"

    @server.tool()
    async def hang(label: str = "hang") -> str:
        """Never answer; record the cancellation when the client gives up."""
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            record(f"cancelled {label}")
            raise
        return "unreachable"

    @server.tool()
    async def crash() -> str:
        """Exit the server process in the middle of the call."""
        os._exit(1)

    @server.tool()
    async def freeze(seconds: float) -> str:
        """Block the server's event loop, so it stops answering anything."""
        time.sleep(seconds)  # noqa: ASYNC251 - blocking on purpose: this is the hung server
        return "thawed"

    @server.tool()
    async def add_extra_tool(ctx: Context) -> str:
        """Register the `extra` tool and tell subscribed clients the tool list changed."""

        async def extra() -> str:
            """A tool that appears at runtime."""
            return "extra!"

        server.add_tool(extra, name="extra")
        await ctx.notify_tools_changed()
        return "added"

    return server


if __name__ == "__main__":
    record(f"started {os.getpid()}")
    build_server().run("stdio")
