"""The tool executor: what runs a model's tool call, and what a layer around it must offer.

Every concern on the tool-call path (discovery's `call_tool`, the safety gate, the result cache)
is a wrapper with this interface around the executor below it, as pydantic-ai's wrapper toolsets
are; sessions, side sessions and the MCP bridge all hold the same assembled stack
(`wakeful.tools.pipeline.assemble_pipeline`) and call nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from anyio.abc import TaskGroup

from ..messages import Message, ToolCall
from ..tools.spec import Tool, ToolContext, ToolResult

RecentMessages = Callable[[], Sequence[Message]]
"""The conversation that led to a call, for a layer that judges it (the safety reviewer)."""


class ToolExecutor(Protocol):
    """Runs tool calls; a wrapper holds another executor and adds one concern."""

    def tool_for(self, call: ToolCall) -> Tool | None:
        """The tool `call` would run (a `call_tool` call names another), or None if none."""
        ...

    def begin(self, session: str, call: ToolCall, tg: TaskGroup | None) -> None:
        """The model has just emitted `call` and may still be streaming: start what can start
        early (the sidecar's check), in `tg` where it takes a while."""
        ...

    def discard(self, session: str) -> None:
        """The session's turn was thrown away: what `begin` started will never be used."""
        ...

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run (or refuse) the call; always a result, and cancellation propagates."""
        ...


class CallChecks(Protocol):
    """Layers that judge a call before it runs (the safety gate), as a wrapper."""

    def guard(self, inner: ToolExecutor, recent: RecentMessages) -> ToolExecutor:
        """`inner` behind these checks; `recent` is the conversation the calls come from."""
        ...
