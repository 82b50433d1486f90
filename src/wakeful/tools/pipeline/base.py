"""The bottom of the tool-call pipeline, and the wrapper every layer above it starts from.

`RegistryExecutor` runs a call with the tool of that name (through `execute_call`, the boundary
where bad arguments and a tool's own failure become results the model reads). `WrapperExecutor`
passes everything to the executor it wraps; a layer overrides only what it adds to.
"""

from __future__ import annotations

from anyio.abc import TaskGroup

from ...core.executor import ToolExecutor
from ...messages import ToolCall
from ..registry import ToolRegistry, execute_call
from ..spec import Tool, ToolContext, ToolResult


class RegistryExecutor:
    """Runs each call with the registry's tool of its name; an unknown name is an error result."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def tool_for(self, call: ToolCall) -> Tool | None:
        return self.registry.get(call.name)

    def begin(self, session: str, call: ToolCall, tg: TaskGroup | None) -> None:
        pass  # nothing runs before the call itself

    def discard(self, session: str) -> None:
        pass

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return await execute_call(self.tool_for(call), call, ctx, self.registry)


class WrapperExecutor:
    """An executor around another, passing every method on; subclasses add one concern."""

    def __init__(self, wrapped: ToolExecutor) -> None:
        self.wrapped = wrapped

    def tool_for(self, call: ToolCall) -> Tool | None:
        return self.wrapped.tool_for(call)

    def begin(self, session: str, call: ToolCall, tg: TaskGroup | None) -> None:
        self.wrapped.begin(session, call, tg)

    def discard(self, session: str) -> None:
        self.wrapped.discard(session)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return await self.wrapped.execute(call, ctx)
