"""MCP servers that wakeful runs: the bridge that serves our tools, and the servers built on it."""

from __future__ import annotations

from .bridge import build_server, describe_for_mcp, mcp_tool

__all__ = ["build_server", "describe_for_mcp", "mcp_tool"]
