"""The registry of tools a session can call, and the one function that executes a model's call.

`execute_call` is the boundary between model output and code: an unknown name, arguments that
are not JSON, arguments that fail the schema, or a tool that raises all become a tool result
marked as an error, written so the model can correct itself. Nothing a tool does can break the
session loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator

from ..errors import ToolError, UserError
from ..messages import ToolCall
from ..models.base import ToolDefinition
from .spec import Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)


class ToolRegistry:
    """Tools by name, in the order they were added (the order the model sees them). Caching
    read-only results is a layer of the call path (:mod:`wakeful.tools.pipeline`), not the
    registry's."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        # Tools that exist but are held back, with the error a call to them returns (e.g. an
        # MCP tool whose definition changed since it was pinned).
        self.unavailable: dict[str, str] = {}
        # Bumped on every change, so sessions know when to refresh the tool list they send.
        self.version = 0
        for t in tools:
            self.add(t)

    def add(self, tool: Tool, *, replace: bool = False) -> None:
        if tool.name in self._tools and not replace:
            raise UserError(
                f"A tool named {tool.name!r} is already registered. Give one of them another "
                "name, or pass replace=True to swap it."
            )
        self._tools[tool.name] = tool
        self.version += 1

    def remove(self, name: str) -> None:
        """Take a tool away (no error if there is none of that name)."""
        if self._tools.pop(name, None) is not None:
            self.version += 1

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        return [t.spec.definition() for t in self._tools.values()]


def parse_arguments(call: ToolCall) -> dict[str, object]:
    """The call's arguments as a dict, or a ToolError that quotes the bad JSON."""
    text = call.arguments.strip() or "{}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise ToolError(
            f"The arguments of {call.name} are not valid JSON ({exc.msg} at character "
            f"{exc.pos}): {shown}. Send the arguments as one JSON object."
        ) from exc
    if not isinstance(value, dict):
        raise ToolError(
            f"The arguments of {call.name} must be a JSON object, got {type(value).__name__}."
        )
    return value


def unknown_tool_result(name: str, registry: ToolRegistry) -> ToolResult:
    if name in registry.unavailable:
        return ToolResult.error(registry.unavailable[name])
    available = ", ".join(registry.names) or "(none)"
    return ToolResult.error(
        f"Unknown tool {name!r}. Available tools: {available}. Call one of these by its exact name."
    )


async def execute_call(
    tool: Tool | None, call: ToolCall, ctx: ToolContext, registry: ToolRegistry
) -> ToolResult:
    """Run one tool call and always return a result; cancellation propagates untouched."""
    if tool is None:
        return unknown_tool_result(call.name, registry)
    try:
        arguments = parse_arguments(call)
        return await tool.run(arguments, ctx)
    except ToolError as exc:
        return ToolResult.error(str(exc))
    except Exception as exc:
        # The tool boundary: a bug in one tool must reach the model as an error, not end the run.
        log.exception("tool %s raised", call.name)
        return ToolResult.error(
            f"Tool {call.name} failed with {type(exc).__name__}: {exc}. The call may be retried "
            "with other arguments, or another approach taken."
        )
