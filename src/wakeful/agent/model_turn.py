"""One model turn of a session: the request, the stream, and what a failed request leads to.

Tool calls are passed to the tool pipeline's `begin` as they stream in, so the sidecar judges a
call while the model is still writing the next one. A turn an interrupt cuts short, or whose
stream fails, is discarded, never recorded (rule 4). A provider's `ModelAPIError` pauses the
session until its next event; any other failure (a bug in an adapter, a stream silent for
`model_stream_idle_seconds`) is retried with exponential backoff `model_fault_retries` times, then
the session pauses and the operator is alerted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import aclosing

import anyio
from anyio.abc import TaskGroup

from ..core.executor import ToolExecutor
from ..errors import ModelAPIError
from ..messages import Message
from ..models.base import Model, ModelRequest, ToolCallPart, ToolDefinition, TurnEnd, Usage
from ..tools.registry import ToolRegistry
from .faults import FaultReporter, StreamIdle, describe_exception, until_idle
from .interruption import Interruption
from .session_config import SessionConfig, SessionObserver
from .turn_repair import safe_call

log = logging.getLogger(__name__)


class ModelTurns:
    """Asks the model for a session's next turn, one request at a time."""

    def __init__(
        self,
        session: str,
        *,
        model: Model,
        registry: ToolRegistry,
        tool_definitions: list[ToolDefinition],
        fixed_tools: bool,
        messages: Callable[[], Sequence[Message]],
        tools: ToolExecutor,
        config: SessionConfig,
        observer: SessionObserver,
        interruption: Interruption,
        reporter: FaultReporter,
        pause: Callable[[], None],
    ) -> None:
        self.session = session
        self.model = model
        self.registry = registry
        # Fixed (with discovery: the core tools) for the session's life, or refreshed when the
        # registry changes (e.g. an MCP server came or went).
        self._tool_definitions = tool_definitions
        self._fixed_tools = fixed_tools
        self._tools_version = registry.version
        self._messages = messages
        self.tools = tools
        self.config = config
        self.observer = observer
        self.interruption = interruption
        self.reporter = reporter
        self._pause = pause  # the session waits for its next event before asking again
        self.requests = 0
        self.usage = Usage()  # tokens of every finished turn (discarded turns report none)
        self._failed_in_a_row = 0  # failed requests in a row, for the backoff

    def reset(self) -> None:
        """The session's loop ended in a fault: the next request starts a fresh backoff."""
        self._failed_in_a_row = 0

    async def next_turn(self, tg: TaskGroup | None) -> TurnEnd | None:
        """Stream one turn. Returns None when it was interrupted (rule 4) or failed."""
        self.requests += 1
        if not self._fixed_tools and self._tools_version != self.registry.version:
            self._tool_definitions = self.registry.definitions()
            self._tools_version = self.registry.version
        request = ModelRequest(messages=list(self._messages()), tools=self._tool_definitions)
        end: TurnEnd | None = None
        failure: Exception | None = None
        with self.interruption.step() as scope:
            try:
                async with (
                    aclosing(self.model.stream(request)) as parts,
                    aclosing(
                        until_idle(parts, self.config.model_stream_idle_seconds)
                    ) as timed_parts,
                ):
                    async for part in timed_parts:
                        if isinstance(part, TurnEnd):
                            end = part
                            continue
                        if isinstance(part, ToolCallPart):
                            part = ToolCallPart(safe_call(part.call))
                            # The sidecar starts now, while the model goes on streaming.
                            self.tools.begin(self.session, part.call, tg)
                        self.observer.on_stream_part(self.session, part)
            except Exception as exc:  # the model edge: a provider's error, or a bug in it
                failure = exc
        if isinstance(failure, ModelAPIError):
            await self._model_failed(failure)
            return None
        if failure is not None:
            reason = (
                str(failure)
                if isinstance(failure, StreamIdle)
                else f"the model raised {describe_exception(failure)}"
            )
            await self._request_faulted(reason, failure)
            return None
        if end is None:
            self.tools.discard(self.session)
            reason = "interrupted by an urgent event" if scope.cancel_called else "no final turn"
            self.observer.on_turn_discarded(self.session, reason)
            return None
        self._failed_in_a_row = 0
        self.usage += end.usage
        return end

    async def _model_failed(self, exc: ModelAPIError) -> None:
        log.info("session %s: model request failed: %s", self.session, exc)
        self.observer.on_turn_discarded(self.session, f"model error: {exc}")
        self._pause()
        await self.reporter.outbox.send(
            self.session,
            f"The model request failed: {exc} Nothing was lost; send a message to retry.",
            urgency="high",
        )

    async def _request_faulted(self, reason: str, exc: BaseException) -> None:
        """A request failed unexpectedly: retry with backoff, then pause and alert."""
        self.tools.discard(self.session)
        self.observer.on_turn_discarded(self.session, f"model fault: {reason}")
        retries = self.config.model_fault_retries
        if self._failed_in_a_row < retries:
            delay = self.config.model_fault_backoff_seconds * 2.0**self._failed_in_a_row
            self._failed_in_a_row += 1
            log.warning(
                "session %s: model request failed (%s); retry %d of %d in %.1f s",
                self.session,
                reason,
                self._failed_in_a_row,
                retries,
                delay,
                exc_info=exc,
            )
            with self.interruption.step():
                await anyio.sleep(delay)
            return  # the session still needs the model: its loop asks again
        attempts = self._failed_in_a_row + 1
        self._failed_in_a_row = 0
        self._pause()
        log.error("session %s: model request failed: %s", self.session, reason, exc_info=exc)
        self.reporter.faults += 1
        await self.reporter.fault(
            f"Session {self.session!r} paused: its model request failed {attempts} time(s) in a "
            f"row; the last time {reason}. Its trajectory is intact and it resumes with its "
            "next event. If this repeats, check the model (adapter, model function or "
            "provider).",
            exc,
        )
        await self.reporter.outbox.send(
            self.session,
            f"The model request failed unexpectedly ({reason}). Nothing was lost; send a "
            "message to retry.",
            urgency="high",
        )
