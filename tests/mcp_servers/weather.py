"""A second MCP server for the client tests; its `echo` collides with the toolbox's."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")


@server.tool()
async def echo(text: str) -> str:
    """Return the text, shouted."""
    return text.upper()


@server.tool()
async def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"Sunny in {city}."


if __name__ == "__main__":
    server.run("stdio")
