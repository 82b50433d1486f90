"""A side question: an independent query answered in a side session while the main task runs.

The router sends a light question that needs nothing from the running task ("what time is it?")
here instead of making it wait. It gets a small trajectory of its own (the system prompt, a
summary of the main task, the question), the read-only tools only, and a few steps; its calls go
through a tool pipeline assembled as the main session's is, with the same safety gate (and audit
log) and result cache. The session records the
question and the answer in its main trajectory afterwards, marked as answered in parallel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from anyio.abc import TaskGroup

from ..core.executor import CallChecks
from ..errors import ModelAPIError
from ..events import Event
from ..messages import Message, SystemMessage, ToolCall, ToolMessage, UserMessage, image_attachments
from ..models.base import Model, ModelRequest
from ..services import Services
from ..tools.cache import ResultCache
from ..tools.pipeline import assemble_pipeline
from ..tools.registry import ToolRegistry
from ..tools.spec import ToolContext, ToolResult
from .session_config import SessionConfig

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
    gate: CallChecks | None,
    cache: ResultCache | None,
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
    tools = assemble_pipeline(side_tools, gate=gate, cache=cache, recent=lambda: messages)
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
                ctx = ToolContext(session, call.id, call.name, services)
                result = await tools.execute(call, ctx)
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


class SideQuestions:
    """A session's side questions in flight, each answered in a side session of its own; the
    session hears of each answer (None: the side session failed) through `done`."""

    def __init__(
        self,
        session: str,
        *,
        model: Model,
        registry: ToolRegistry,
        services: Services,
        gate: CallChecks | None,
        cache: ResultCache | None,
        config: SessionConfig,
        task_summary: Callable[[], str],
        done: Callable[[Event, str | None], None],
    ) -> None:
        self.session = session
        self.model = model
        self.registry = registry
        self.services = services
        self.gate = gate
        self.cache = cache
        self.config = config
        self._task_summary = task_summary
        self._done = done
        self.in_flight = 0

    def ask(self, tg: TaskGroup, event: Event) -> None:
        """Answer `event`'s question in `tg`, now, while the main task goes on."""
        self.in_flight += 1  # counted now, so the session is never idle meanwhile
        tg.start_soon(self._answer, event, name=f"parallel {event.id}")

    async def _answer(self, event: Event) -> None:
        try:
            answer = await answer_side_question(
                event,
                session=self.session,
                model=self.model,
                registry=self.registry,
                services=self.services,
                gate=self.gate,
                cache=self.cache,
                system_prompt=self.config.system_prompt,
                task_summary=self._task_summary(),
                max_steps=self.config.parallel_max_steps,
            )
            if answer is not None:
                await self.services.outbox.send(self.session, answer, parallel=True)
            self._done(event, answer)
        finally:
            self.in_flight -= 1
