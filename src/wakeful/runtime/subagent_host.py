"""The runtime's side of subagents: what a child session is built from (its model, tools and
prompt), and what the subagent manager asks of the runtime (see
:class:`~wakeful.subagents.manager.SubagentHost`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..core.records import SubagentRecord
from ..events import Event
from ..messages import AssistantMessage, Message
from ..subagents.definitions import AgentDefinition
from ..subagents.prompt import child_system_prompt
from ..subagents.tools import CHILD_TOOLS, PARENT_TOOLS
from ..tools.registry import ToolRegistry

if TYPE_CHECKING:
    from ..activity import ActivitySignal
    from ..agent.session import AgentSession, SessionConfig
    from ..tools.tasks import TaskManager

__all__ = ["USER_FACING_TOOLS", "RuntimeSubagentHost", "child_config", "child_registry"]

# What only the top-level agent may use: a child never talks to the user (the chapter's
# boundary), never adds channels.
USER_FACING_TOOLS = frozenset(
    {
        "reply_to_user",
        "send_card_to_user",
        "send_user_notification",
        "list_user_messages",
        "connect_channel",
        "disconnect_channel",
    }
)


def child_registry(
    definition: AgentDefinition, record: SubagentRecord, parent: ToolRegistry, max_depth: int
) -> ToolRegistry:
    """The child's tools: those its agent allows among the runtime's (all but the user-facing
    ones when it names none), the parent tools while it may still have children, and the
    child's own (return_result, ask_parent, send_progress)."""
    allowed = definition.tools
    base = [
        t
        for t in parent
        if t.name not in USER_FACING_TOOLS
        and t.name not in {p.name for p in PARENT_TOOLS}
        and (allowed is None or t.name in allowed)
    ]
    spawn = list(PARENT_TOOLS) if record.depth < max_depth else []
    return ToolRegistry([*base, *spawn, *CHILD_TOOLS])


def child_config(
    config: SessionConfig, definition: AgentDefinition, record: SubagentRecord
) -> SessionConfig:
    """The runtime's session settings with the child's system prompt."""
    return replace(config, system_prompt=child_system_prompt(definition, record))


@dataclass
class RuntimeSubagentHost:
    """:class:`~wakeful.subagents.manager.SubagentHost` over a running runtime's parts."""

    deliver_event: Callable[[Event], Awaitable[object]]
    sessions: Mapping[str, AgentSession]
    tasks: TaskManager
    settled: ActivitySignal

    async def deliver(self, event: Event) -> None:
        await self.deliver_event(event)

    def tokens_of(self, session: str) -> int:
        found = self.sessions.get(session)
        if found is None:
            return 0
        usage = found.usage
        return usage.input_tokens + usage.output_tokens

    def is_idle(self, session: str) -> bool:
        found = self.sessions.get(session)
        return found is not None and found.idle and not self.tasks.has_unsettled(session)

    def last_text(self, session: str) -> str:
        found = self.sessions.get(session)
        if found is None:
            return ""
        for message in reversed(found.trajectory.messages):
            if isinstance(message, AssistantMessage) and message.content:
                return message.content
        return ""

    def messages(self, session: str) -> Sequence[Message]:
        found = self.sessions.get(session)
        return list(found.trajectory.messages) if found is not None else []

    def wait_settled(self) -> Awaitable[None]:
        return self.settled.wait()

    def changed(self) -> None:
        self.settled.notify()
