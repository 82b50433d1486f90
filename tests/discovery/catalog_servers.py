"""MCP servers built from a tool catalog, for discovery tests: every tool of the catalog, served by
wakeful's bridge over the in-memory transport, answering each call with what it was called with.

The catalog (`fixtures/servers_125.json`) is the first 16 servers (125 tools) of LiveMCPBench
(icip-cas/LiveMCPBench, Apache-2.0): real MCP servers' names, descriptions and schemas.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from wakeful.mcp.bridge import BridgeServer, build_server
from wakeful.tools.spec import Tool, ToolSpec

FIXTURE = Path(__file__).parent / "fixtures" / "servers_125.json"
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def server_name(name: str) -> str:
    """A catalog server's name as an MCP server config accepts it."""
    return _NOT_A_NAME.sub("-", name).strip("-")[:32] or "server"


def stub_tool(server: str, entry: dict[str, Any]) -> Tool:
    name = _NOT_A_NAME.sub("_", entry["name"])[:64]

    async def answer(**arguments: Any) -> str:
        return f"{server}/{name} called with {json.dumps(arguments, sort_keys=True)}"

    schema = entry.get("inputSchema") or {"type": "object", "properties": {}}
    spec = ToolSpec(name=name, description=entry.get("description") or name, input_schema=schema)
    return Tool(spec=spec, function=answer)


def catalog_servers(path: Path = FIXTURE) -> dict[str, BridgeServer]:
    """One in-process MCP server per catalog server, by its (sanitised) name."""
    catalog = json.loads(path.read_text(encoding="utf-8"))
    servers: dict[str, BridgeServer] = {}
    for entry in catalog["servers"]:
        name = server_name(entry["name"])
        tools = [stub_tool(name, t) for t in entry["tools"]]
        servers[name] = build_server(name, tools, instructions=entry.get("description") or "")
    return servers


def tool_count(path: Path = FIXTURE) -> int:
    catalog = json.loads(path.read_text(encoding="utf-8"))
    return sum(len(s["tools"]) for s in catalog["servers"])
