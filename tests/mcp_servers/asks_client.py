"""An MCP server whose tools ask the client for its roots and for a run of its model (sampling),
through the SDK's resolvers: embedded in input-required results on the 2026-07-28 protocol, as
server-to-client requests on older ones. `--legacy` serves the older protocol only (the
initialize handshake)."""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import ListRoots, Resolve, Sample
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

SYSTEM_PROMPT = "Answer in five words."


def ask_roots() -> ListRoots:
    return ListRoots()


def ask_summary(text: str) -> Sample:
    message = mcp_types.SamplingMessage(
        role="user", content=mcp_types.TextContent(type="text", text=f"Summarize: {text}")
    )
    return Sample([message], max_tokens=64, system_prompt=SYSTEM_PROMPT)


def ask_about_image() -> Sample:
    image = mcp_types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")
    return Sample([mcp_types.SamplingMessage(role="user", content=image)], max_tokens=64)


def build_server() -> MCPServer:
    server = MCPServer("asks_client")

    @server.tool()
    async def where(roots: Annotated[mcp_types.ListRootsResult, Resolve(ask_roots)]) -> str:
        """The directories the client lets this server work in."""
        return " ".join(str(root.uri) for root in roots.roots) or "no roots"

    @server.tool()
    async def summarize(
        text: str, summary: Annotated[mcp_types.CreateMessageResult, Resolve(ask_summary)]
    ) -> str:
        """Summarize a text with the client's model."""
        content = summary.content
        return content.text if isinstance(content, mcp_types.TextContent) else content.type

    @server.tool()
    async def describe_image(
        answer: Annotated[mcp_types.CreateMessageResult, Resolve(ask_about_image)],
    ) -> str:
        """Ask the client's model about an image."""
        return str(answer.content)

    @server.tool()
    async def sample_anyway(ctx: Context) -> str | mcp_types.InputRequiredResult:
        """Ask for sampling whatever the client declared (a server that ignores consent);
        2026-07-28 only, where the request rides an input-required result."""
        if ctx.input_responses:
            return "sampled without consent"
        request = mcp_types.CreateMessageRequest(params=ask_summary("anything").params)
        return mcp_types.InputRequiredResult(input_requests={"sample": request})

    @server.tool()
    async def client_capabilities(ctx: Context) -> str:
        """Which client capabilities this call saw declared."""
        capabilities = ctx.client_capabilities
        declared = [
            name
            for name in ("roots", "sampling", "elicitation")
            if capabilities is not None and getattr(capabilities, name) is not None
        ]
        return " ".join(declared) or "none"

    return server


async def serve_legacy(server: MCPServer) -> None:
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(
            lowlevel,
            read,
            write,
            lifespan_state=state,
            init_options=lowlevel.create_initialization_options(),
        )


if __name__ == "__main__":
    if "--legacy" in sys.argv:
        anyio.run(serve_legacy, build_server())
    else:
        build_server().run("stdio")
