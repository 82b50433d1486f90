"""Discovery's `call_tool(name, arguments)` read as the call it stands for.

With discovery on, the model calls a tool it found with `call_tool`; every layer below this one
(the gate, the cache, the tool) sees the inner call, under the same call id, so it is judged,
cached and run exactly as if the model had called the tool by its own name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from anyio.abc import TaskGroup

from ...core.executor import ToolExecutor
from ...messages import ToolCall
from ..spec import Tool, ToolContext, ToolResult
from .base import WrapperExecutor

CALL_TOOL = "call_tool"


def unwrap_call(call: ToolCall) -> ToolCall:
    """The call a `call_tool` call stands for (same id); any other call, or a malformed
    call_tool (left for its own validation to explain), unchanged."""
    if call.name != CALL_TOOL:
        return call
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return call
    if not isinstance(arguments, dict):
        return call
    name, inner = arguments.get("name"), arguments.get("arguments", {})
    if not isinstance(name, str) or not name or name == CALL_TOOL or not isinstance(inner, dict):
        return call
    return ToolCall(id=call.id, name=name, arguments=json.dumps(inner, ensure_ascii=False))


class CallToolUnwrapping(WrapperExecutor):
    """Passes on the inner call of a `call_tool` call (other calls as they are).

    With `discovery` on, a name no layer below knows (and `held_back` does not explain) is
    answered here, before any check, with the way to find a tool: the list of every name the
    runtime has would not help a model that sees only its core tools.
    """

    def __init__(
        self,
        wrapped: ToolExecutor,
        *,
        discovery: bool = False,
        held_back: Callable[[str], bool] = lambda name: False,
    ) -> None:
        super().__init__(wrapped)
        self.discovery = discovery
        self.held_back = held_back

    def tool_for(self, call: ToolCall) -> Tool | None:
        return self.wrapped.tool_for(unwrap_call(call))

    def begin(self, session: str, call: ToolCall, tg: TaskGroup | None) -> None:
        self.wrapped.begin(session, unwrap_call(call), tg)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        inner = unwrap_call(call)
        if inner is not call:
            ctx = replace(ctx, tool_name=inner.name)
        if (
            self.discovery
            and self.wrapped.tool_for(inner) is None
            and not self.held_back(inner.name)
        ):
            return ToolResult.error(
                f"There is no tool named {inner.name!r}. Find one for the need with "
                "discover_tools, then call it by the name it gives."
            )
        return await self.wrapped.execute(inner, ctx)
