"""Serve wakeful :class:`~wakeful.tools.spec.Tool` objects over MCP.

The server is the SDK's low-level `mcp.server.Server`, not `MCPServer`: `MCPServer` derives each
tool's schema from a Python signature, while our tools already carry a finished JSON schema and
their own validation. The low-level server takes `on_list_tools`/`on_call_tool` handlers, so the
schema goes out exactly as `ToolSpec.input_schema` says and every call goes through the same
`execute_call` the runtime uses: our validation, our error messages, nothing re-validated by the
SDK. `Client(server)`, stdio and Streamable HTTP all accept this server.

Tools that take a context get a real :class:`~wakeful.services.Services`, built per connection in
the server's lifespan around a task group of its own (so inline tasks and progress work). Events
the tools emit have no session to go to and are dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from ..errors import UserError
from ..events import Event
from ..messages import ToolCall
from ..services import Services
from ..tools.registry import ToolRegistry, execute_call
from ..tools.spec import Tool, ToolContext, ToolResult
from ..tools.tasks import TaskManager

log = logging.getLogger(__name__)

BridgeServer = Server[Services]
"""What :func:`build_server` returns: a low-level MCP server whose lifespan state is Services."""


def build_server(
    name: str,
    tools: Sequence[Tool],
    *,
    instructions: str | None = None,
    workdir: Path | None = None,
    version: str = "",
    settings: Sequence[object] = (),
) -> BridgeServer:
    """An MCP server that lists `tools` and runs their calls through wakeful's validation.

    `workdir` becomes `Services.workdir` for the tools' context: the directory file and shell
    tools work in; `settings` become `Services.settings` (by class). Raises UserError if two
    tools share a name.
    """
    try:
        registry = ToolRegistry(tools)
    except UserError as exc:
        raise UserError(f"Cannot build the MCP server {name!r}: {exc}") from exc
    listed = types.ListToolsResult(tools=[mcp_tool(t) for t in registry])

    async def list_tools(
        ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Services], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        call_id = str(ctx.request_id) if ctx.request_id is not None else "mcp"
        call = ToolCall(
            id=call_id,
            name=params.name,
            arguments=json.dumps(params.arguments or {}, ensure_ascii=False),
        )
        tool_ctx = ToolContext(
            session=f"mcp:{name}",
            call_id=call_id,
            tool_name=params.name,
            services=ctx.lifespan_context,
        )
        result = await execute_call(registry.get(params.name), call, tool_ctx, registry)
        return call_tool_result(result)

    @asynccontextmanager
    async def lifespan(_: Server[Services]) -> AsyncIterator[Services]:
        async with anyio.create_task_group() as tg:
            tasks = TaskManager(tg, _drop_event)
            yield Services(
                tasks=tasks,
                emit=_drop_event,
                workdir=workdir,
                settings={type(value): value for value in settings},
            )
            tasks.cancel_all("the MCP connection closed")

    return Server(
        name,
        version=version,
        instructions=instructions,
        lifespan=lifespan,
        get_tool_input_schema=lambda tool_name: _input_schema(registry, tool_name),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def mcp_tool(tool: Tool) -> types.Tool:
    """The MCP description of one tool: schema as is, annotations mapped, examples appended."""
    spec = tool.spec
    hints = spec.annotations
    return types.Tool(
        name=spec.name,
        description=describe_for_mcp(tool),
        input_schema=spec.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
    )


def describe_for_mcp(tool: Tool) -> str:
    """The description with the examples appended, one JSON object of arguments per line.

    MCP tools have no field for examples, and a model reads the description anyway.
    """
    examples = tool.spec.examples
    if not examples:
        return tool.spec.description
    lines = "\n".join(json.dumps(example, ensure_ascii=False) for example in examples)
    return f"{tool.spec.description.rstrip()}\n\nExamples:\n{lines}"


def call_tool_result(result: ToolResult) -> types.CallToolResult:
    """Our result as MCP's: the text as is, structured data as structuredContent.

    MCP wants structuredContent to be an object, so other JSON values go under "result".
    """
    structured: dict[str, Any] | None
    if result.structured is None:
        structured = None
    elif isinstance(result.structured, dict):
        structured = result.structured
    else:
        structured = {"result": result.structured}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.content)],
        structured_content=structured,
        is_error=result.is_error,
    )


def _input_schema(registry: ToolRegistry, tool_name: str) -> dict[str, Any] | None:
    found = registry.get(tool_name)
    return None if found is None else found.spec.input_schema


async def _drop_event(event: Event) -> None:
    # Over MCP there is no session to deliver runtime events to; the client sees the result.
    log.debug("dropped event %s from an MCP tool call", event.kind)
