"""An MCP server with a task-only tool (`execution.taskSupport: "required"`) next to normal ones,
as 2025-11-25 servers list them. A task-only tool cannot be called with a plain tools/call: the
server answers -32601, as such servers do. Hand-written with the low-level server, since
`MCPServer` cannot declare a tool's execution."""

from __future__ import annotations

from typing import Any

import mcp_types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

TOOLS = [
    mcp_types.Tool(name="echo", description="Return the text unchanged.", input_schema=_TEXT),
    mcp_types.Tool(
        name="render_video",
        description="Render a video; runs only as a task.",
        input_schema=_TEXT,
        execution=mcp_types.ToolExecution(task_support="required"),
    ),
    mcp_types.Tool(
        name="summarize",
        description="Summarize the text; may run as a task.",
        input_schema=_TEXT,
        execution=mcp_types.ToolExecution(task_support="optional"),
    ),
]


async def list_tools(
    _ctx: Any, _params: mcp_types.PaginatedRequestParams | None
) -> mcp_types.ListToolsResult:
    return mcp_types.ListToolsResult(tools=TOOLS)


async def call_tool(_ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    if params.name == "render_video":
        raise MCPError(mcp_types.METHOD_NOT_FOUND, "Tool render_video requires task augmentation")
    if params.name == "summarize":
        text = text[:10]
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])


server = Server("task_only", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    # Served in the 2025-11-25 era (the initialize handshake only): the 2026-07-28 wire has no
    # `execution` field, so a server that lists task-only tools speaks the older protocol.
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        await serve_loop(
            server,
            read,
            write,
            lifespan_state=state,
            init_options=server.create_initialization_options(),
        )


if __name__ == "__main__":
    import anyio

    anyio.run(main)
