"""Running one turn's tool calls: in order, reads together, each result recorded as it comes.

Every call runs as a task of the session (so it can go on in the background when interrupted)
through the session's tool pipeline (:mod:`wakeful.tools.pipeline`). A run of read-only calls
goes concurrently (:func:`~wakeful.tools.pipeline.concurrent_run`); a background tool answers at
once with its task id. Rules 2 and 3 of the trajectory are kept here: a result is recorded when
its call finishes, and a call an interrupt catches still running gets a placeholder (it goes on
in the background) or, on a stop, a cancellation result; a call an interrupt catches before it
started is answered as not run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

import anyio

from ..core.executor import ToolExecutor
from ..messages import Message, ToolCall, ToolMessage
from ..services import Services
from ..tools.pipeline import concurrent_run
from ..tools.shaping import shape
from ..tools.spec import ToolContext, ToolResult
from ..tools.tasks import TaskHandle
from .batch import Note
from .interruption import Interruption
from .router import Decision, Strategy
from .session_config import SessionConfig
from .side_question import result_message

Record = Callable[[Message], Awaitable[Message]]


def describe_call(call: ToolCall, limit: int = 80) -> str:
    """A short human description of a call, e.g. the shell command it runs."""
    try:
        args = json.loads(call.arguments)
    except json.JSONDecodeError:
        args = None
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        text: str = args["command"]
    else:
        text = call.arguments
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CallScheduler:
    """Runs the calls of a session's turns through its tool pipeline."""

    def __init__(
        self,
        session: str,
        *,
        tools: ToolExecutor,
        services: Services,
        config: SessionConfig,
        interruption: Interruption,
        record: Record,
        task_summary: Callable[[], str],
    ) -> None:
        self.session = session
        self.tools = tools
        self.services = services
        self.config = config
        self.interruption = interruption
        self._record = record
        self._task_summary = task_summary

    async def run_turn(self, calls: Sequence[ToolCall], refused: dict[str, str]) -> None:
        """Run a turn's calls in order; `refused` (call id → error) are answered, never run."""
        index = 0
        while index < len(calls):
            call = calls[index]
            error = refused.pop(call.id, None)
            decision = self.interruption.decision
            tool = self.tools.tool_for(call)
            if error is not None:
                await self._record(
                    ToolMessage(tool_call_id=call.id, name=call.name, content=error, status="error")
                )
                index += 1
            elif decision is not None:
                await self._record(not_started_result(call, decision))
                index += 1
            elif tool is not None and tool.spec.run_mode == "background":
                await self._record(self._start_background(call))
                index += 1
            else:
                end = concurrent_run(calls, index, self.tools, answered=refused)
                await self._run_inline(calls[index:end])
                index = end

    def cancel_background(self, reason: str) -> Note | None:
        """Cancel the session's background tasks (a stop); the note that tells the model."""
        running = self.services.tasks.running(self.session)
        for handle in running:
            handle.cancel(reason)
        if not running:
            return None
        names = ", ".join(f"{h.id} ({h.tool} {h.description!r})" for h in running)
        return Note(f"Cancelled background tasks because of the stop: {names}.")

    def cancel_inline(self, reason: str) -> None:
        """Cancel the calls of the turn still running (the session's loop ended in a fault)."""
        for handle in self.services.tasks.list(self.session, background_only=False):
            if not handle.background and not handle.done:
                handle.cancel(reason)

    def _runner(self, call: ToolCall) -> Callable[[TaskHandle], Awaitable[ToolResult]]:
        async def run(handle: TaskHandle) -> ToolResult:
            ctx = ToolContext(self.session, call.id, call.name, self.services, task=handle)
            return await self.tools.execute(call, ctx)

        return run

    def _start_background(self, call: ToolCall) -> ToolMessage:
        handle = self.services.tasks.start(
            session=self.session,
            tool=call.name,
            call_id=call.id,
            description=describe_call(call),
            run=self._runner(call),
            background=True,
        )
        content = json.dumps(
            {
                "task_id": handle.id,
                "status": "running",
                "note": "The result will arrive as a separate event; use task_status to check.",
            }
        )
        return ToolMessage(tool_call_id=call.id, name=call.name, content=content)

    async def _run_inline(self, group: Sequence[ToolCall]) -> None:
        """Run calls together, recording each result as it finishes (rule 2); on an
        interrupt, answer the unfinished ones with a placeholder or a cancellation (rule 3)."""
        handles = [
            (
                call,
                self.services.tasks.start(
                    session=self.session,
                    tool=call.name,
                    call_id=call.id,
                    description=describe_call(call),
                    run=self._runner(call),
                ),
            )
            for call in group
        ]
        answered: set[str] = set()

        async def record_when_done(call: ToolCall, handle: TaskHandle) -> None:
            result = await handle.wait()
            message = await self._finished_result(call, result)
            answered.add(call.id)  # no await between this and the append below
            await self._record(message)

        with self.interruption.step():
            async with anyio.create_task_group() as tg:
                for call, handle in handles:
                    tg.start_soon(record_when_done, call, handle)
        for call, handle in handles:
            if call.id in answered:
                continue
            if handle.done:  # it finished just as the interrupt arrived
                assert handle.result is not None
                await self._record(await self._finished_result(call, handle.result))
                continue
            decision = self.interruption.decision or Decision(Strategy.CANCEL, stop=True)
            if decision.stop:
                await self._record(await self._cancel_inline(handle, call, decision))
            else:
                handle.detach()  # rule 3: it goes on in the background
                await self._record(placeholder_result(call, handle))

    async def _cancel_inline(
        self, handle: TaskHandle, call: ToolCall, decision: Decision
    ) -> ToolMessage:
        handle.cancel(decision.reason or "interrupted")
        with anyio.move_on_after(self.config.cancel_grace_seconds, shield=True):
            await handle.wait()
        tail = handle.last_lines(5)
        output = ("\nOutput before the cancellation:\n" + "\n".join(tail)) if tail else ""
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=(
                f"Cancelled after {handle.runtime_seconds:.1f}s because "
                f"{decision.reason or 'of an interrupt'} (task {handle.id}); it did not "
                f"finish.{output}"
            ),
            status="cancelled",
        )

    async def _finished_result(self, call: ToolCall, result: ToolResult) -> ToolMessage:
        """The message of a finished inline call, compressed for the task when it is long and a
        compressor is configured (the text then says so, or says why it was cut instead)."""
        message = result_message(call, result)
        compressor = self.config.compressor
        limit = self.config.compress_over_chars
        if compressor is None or result.is_error or len(result.content) <= limit:
            return message
        shaped = await shape(
            result.content,
            limit,
            how_to_get_more=(
                f"the full result is not kept: call {call.name} again with offset/limit or a "
                "narrower query to read them"
            ),
            query=self._task_summary(),
            compressor=compressor,
        )
        return message.model_copy(update={"content": shaped.text})


def placeholder_result(call: ToolCall, handle: TaskHandle) -> ToolMessage:
    """Rule 3: the answer of a call that goes on in the background after an interrupt."""
    return ToolMessage(
        tool_call_id=call.id,
        name=call.name,
        content=(
            f"Still running in the background as task {handle.id}; its result will arrive "
            "as a separate event. Handle the new events first, and do not assume any result "
            f"of this call until that event arrives (task_status('{handle.id}') shows "
            "progress)."
        ),
        status="placeholder",
    )


def not_started_result(call: ToolCall, decision: Decision) -> ToolMessage:
    """The answer of a call an interrupt caught before it started."""
    return ToolMessage(
        tool_call_id=call.id,
        name=call.name,
        content=(
            f"Not run: an interrupt arrived before this call started ({decision.reason}). "
            "Call it again if it is still needed."
        ),
        status="cancelled",
    )
