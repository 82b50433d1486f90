"""A server that reports the environment it was started with, to test credential scoping."""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("env_probe")


@server.tool()
async def environment() -> str:
    """The server process's environment variables, as a JSON object."""
    return json.dumps(dict(os.environ))


if __name__ == "__main__":
    server.run("stdio")
