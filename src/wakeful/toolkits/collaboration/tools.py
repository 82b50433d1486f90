"""Every collaboration tool with a person: what the runtime offers when `[tools.collaboration]`
is configured (and what a collaboration MCP server serves)."""

from __future__ import annotations

from ...tools.spec import Tool
from .human import HUMAN_TOOLS
from .notify import NOTIFY_TOOLS

__all__ = ["COLLABORATION_TOOLS"]

COLLABORATION_TOOLS: tuple[Tool, ...] = (*HUMAN_TOOLS, *NOTIFY_TOOLS)
