"""A side question: an independent query answered in a side session while the main task runs.

The router sends a light question that needs nothing from the running task ("what time is it?")
here instead of making it wait. It gets a small trajectory of its own (the system prompt, a
summary of the main task, the question), the read-only tools only, and a few steps; its calls go
through the same safety gate (and audit log) as the main session's. The session records the
question and the answer in its main trajectory afterwards, marked as answered in parallel.
"""

from __future__ import annotations

import logging

from ..errors import ModelAPIError
from ..events import Event
from ..messages import Message, SystemMessage, ToolCall, ToolMessage, UserMessage, image_attachments
from ..models.base import Model, ModelRequest
from ..services import Services
from ..tools.registry import ToolRegistry, execute_call
from ..tools.spec import ToolContext, ToolResult

log = logging.getLogger(__name__)


def result_message(call: ToolCall, result: ToolResult) -> ToolMessage:
    """The trajectory's message for a finished call's result."""
    return ToolMessage(
        tool_call_id=call.id,
        name=call.name,
        content=result.content,
        status="error" if result.is_error else "ok",
        attachments=image_attachments(result.structured),
    )


async def answer_side_question(
    event: Event,
    *,
    session: str,
    model: Model,
    registry: ToolRegistry,
    services: Services,
    system_prompt: str,
    task_summary: str,
    max_steps: int,
) -> str | None:
    """The side session's answer to `event`'s question; None when the model failed (a
    provider's error or a model's bug), and the question should wait for the main loop."""
    side_tools = ToolRegistry(
        t for t in registry if t.spec.annotations.read_only and t.name != "reply_to_user"
    )
    messages: list[Message] = [
        SystemMessage(content=system_prompt),
        UserMessage(
            content=(
                "[Side query, answered in parallel while the main task continues]\n"
                f"Main task so far: {task_summary}\n\n"
                f"The user asks: {event.text}\n"
                "Answer this question only, briefly; do not work on the main task."
            )
        ),
    ]
    try:
        for _ in range(max_steps):
            end = await model.complete(
                ModelRequest(messages=messages, tools=side_tools.definitions())
            )
            messages.append(end.message)
            if not end.message.tool_calls:
                answer = end.message.content.strip()
                return answer or "(The side session did not produce an answer.)"
            for call in end.message.tool_calls:
                result = await _run_side_call(call, side_tools, session, services)
                messages.append(result_message(call, result))
    except Exception as exc:  # a provider's error or a model's bug: the main loop answers
        log.warning(
            "session %s: parallel answer failed, queueing instead: %s",
            session,
            exc,
            exc_info=not isinstance(exc, ModelAPIError),
        )
        return None
    return "(The side session did not produce an answer.)"


async def _run_side_call(
    call: ToolCall, side_tools: ToolRegistry, session: str, services: Services
) -> ToolResult:
    """A side session's call: read-only, but through the same gate (and audit log)."""
    tool = side_tools.get(call.name)
    ctx = ToolContext(session, call.id, call.name, services)
    gate = services.gate
    if gate is None:
        return await execute_call(tool, call, ctx, side_tools)

    async def execute(checked: ToolContext) -> ToolResult:
        return await execute_call(tool, call, checked, side_tools)

    return await gate.run(tool, call, ctx, execute)
