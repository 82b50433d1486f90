"""Background tasks: tool work whose start and completion are decoupled.

Every tool call runs as a :class:`TaskHandle` owned by the runtime's task group. An inline call is
awaited by its session; a background call (or an inline call the session detached when an event
interrupted it, rule 3) reports its completion as a `tool.result` event instead. Tasks keep their
last output lines and a progress figure for `task_status`, and can be cancelled as a whole.
Once settled, a task is released: only the most recently finished tasks stay in memory
(`FINISHED_TASKS_KEPT`); the store keeps the record of every background task. A task still
running when the runtime stops cleanly is cancelled with it (its processes stopped by the
runner's cleanup) and recorded as cancelled with `RUNTIME_STOPPED` as its reason.
"""

from __future__ import annotations

import builtins
import logging
import math
import re
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..activity import ActivitySignal
from ..core.records import TaskRecord as TaskRecord
from ..core.records import TaskState as TaskState
from ..core.session_writes import SessionWrites, shared_writes
from ..events import TOOL_PROGRESS, TOOL_RESULT, Event, Source
from ..messages import image_attachments
from .result import ToolResult

log = logging.getLogger(__name__)

Emit = Callable[[Event], Awaitable[object]]
TaskRunner = Callable[["TaskHandle"], Awaitable[ToolResult]]

_PERCENT = re.compile(r"(\d{1,3}(?:\.\d+)?)\s*%")
OUTPUT_LINES_KEPT = 200
# Finished tasks kept in memory (output lines included) for task_status and list_tasks; older
# background ones are answered from the store's task records, without their output.
FINISHED_TASKS_KEPT = 256
# The cancel reason of a task that was still running when the runtime stopped cleanly.
RUNTIME_STOPPED = "the runtime was stopped"


def new_task_id() -> str:
    return "task_" + uuid.uuid4().hex[:8]


@dataclass(eq=False)
class TaskHandle:
    """A running or finished task. Created by :meth:`TaskManager.start`."""

    id: str
    session: str
    tool: str
    call_id: str
    description: str
    background: bool
    manager: TaskManager
    state: TaskState = "running"
    percent: float | None = None
    progress_message: str = ""
    result: ToolResult | None = None
    cancel_reason: str | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started_monotonic: float = field(default_factory=time.monotonic)
    ended_at: datetime | None = None
    ended_monotonic: float | None = None
    output: deque[str] = field(default_factory=lambda: deque(maxlen=OUTPUT_LINES_KEPT))
    output_line_count: int = 0
    # How long the task is expected to run, in seconds: past it, the system channel reports it
    # once (`system.process_timeout`) and the task runs on. None: the channel's default applies.
    deadline_seconds: float | None = None
    # The process groups its commands run in (each group's leader pid), while they run: what
    # the system channel measures for a runaway task. See :meth:`watch_process_group`.
    process_groups: set[int] = field(default_factory=set)
    _done: anyio.Event = field(default_factory=anyio.Event)
    _scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    _subscribers: list[MemoryObjectSendStream[str]] = field(default_factory=list)
    _last_progress_event: float = -math.inf

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def cancelled_by_scope(self) -> bool:
        """Whether :meth:`cancel` stopped the work (its cancel scope caught the cancellation)."""
        return self._scope.cancelled_caught

    async def run_cancellable(self, run: TaskRunner) -> ToolResult | None:
        """Run the task's work inside its own cancel scope, so that :meth:`cancel` stops it:
        its result, an error result for an exception it raised, or None once cancelled."""
        with self._scope:
            try:
                return await run(self)
            except Exception as exc:
                log.exception("task %s (%s) raised", self.id, self.tool)
                return ToolResult.error(f"{self.tool} failed with {type(exc).__name__}: {exc}")
        return None

    def finish(self, result: ToolResult) -> None:
        """Record the result and end time, end the output streams and wake whoever waits."""
        self.result = result
        self.ended_at = datetime.now(UTC)
        self.ended_monotonic = time.monotonic()
        for stream in self._subscribers:
            stream.close()
        self._subscribers.clear()
        self._done.set()

    @property
    def runtime_seconds(self) -> float:
        end = self.ended_monotonic if self.ended_monotonic is not None else time.monotonic()
        return end - self.started_monotonic

    async def wait(self) -> ToolResult:
        await self._done.wait()
        assert self.result is not None
        return self.result

    def detach(self) -> None:
        """Stop waiting for this task inline: its result will arrive as a tool.result event."""
        if not self.background:
            self.background = True
            self.manager.changed(self)

    def cancel(self, reason: str) -> None:
        """Cancel the task; its process group (if any) is killed by the runner's cleanup."""
        if not self.done and self.cancel_reason is None:
            self.cancel_reason = reason
            self._scope.cancel()

    async def report_progress(self, percent: float | None, message: str = "") -> None:
        """Record progress; a background task also reports it as a tool.progress event, at most
        once per `TaskManager.progress_interval` seconds."""
        if percent is not None and math.isfinite(percent):
            self.percent = max(0.0, min(100.0, percent))
        if message:
            self.progress_message = message
        manager = self.manager
        now = time.monotonic()
        if (
            self.background
            and manager.progress_interval is not None
            and now - self._last_progress_event >= manager.progress_interval
        ):
            self._last_progress_event = now
            await manager.emit(
                Event(
                    kind=TOOL_PROGRESS,
                    source=Source(type="tool", id=self.id),
                    content=message or f"{self.percent:.0f}%",
                    context={"task_id": self.id, "tool": self.tool, "percent": self.percent},
                    session=self.session,
                )
            )

    def add_output(self, line: str) -> None:
        """Record one line of output; a trailing 'NN%' in it updates the progress figure."""
        self.output.append(line)
        self.output_line_count += 1
        matches = _PERCENT.findall(line)
        if matches:
            value = float(matches[-1])
            if value <= 100:
                self.percent = value
        for stream in list(self._subscribers):
            try:
                stream.send_nowait(line)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                # The subscriber went away; close our end too (an unclosed stream warns).
                self._subscribers.remove(stream)
                stream.close()

    def subscribe(self) -> MemoryObjectReceiveStream[str]:
        """A stream of this task's output lines from now on; it ends when the task ends."""
        send, receive = anyio.create_memory_object_stream[str](max_buffer_size=math.inf)
        if self.done:
            send.close()
        else:
            self._subscribers.append(send)
        return receive

    def watch_process_group(self, pgid: int) -> None:
        """Note that a command of this task runs as process group `pgid`, so its CPU time and
        memory count as the task's; :meth:`forget_process_group` when it has stopped."""
        self.process_groups.add(pgid)

    def forget_process_group(self, pgid: int) -> None:
        self.process_groups.discard(pgid)

    def last_lines(self, n: int = 20) -> list[str]:
        return list(self.output)[-n:]

    def record(self) -> TaskRecord:
        return TaskRecord(
            id=self.id,
            session=self.session,
            tool=self.tool,
            call_id=self.call_id,
            description=self.description,
            state=self.state,
            background=self.background,
            started_at=self.started_at,
            ended_at=self.ended_at,
            percent=self.percent,
            result=self.result.content if self.result else None,
            cancel_reason=self.cancel_reason,
        )

    def status(self, lines: int = 10) -> dict[str, Any]:
        """What `task_status` shows."""
        out: dict[str, Any] = {
            "task_id": self.id,
            "tool": self.tool,
            "description": self.description,
            "state": self.state,
            "percent": self.percent,
            "runtime_seconds": round(self.runtime_seconds, 2),
            "last_output": self.last_lines(lines),
        }
        if self.progress_message:
            out["progress_message"] = self.progress_message
        if self.cancel_reason:
            out["cancel_reason"] = self.cancel_reason
        if self.done and self.result is not None:
            out["result"] = self.result.content
        return out


class TaskManager:
    """Starts, tracks and cancels tasks inside the runtime's task group."""

    def __init__(
        self,
        task_group: TaskGroup,
        emit: Emit,
        *,
        on_change: Callable[[TaskRecord], None] | None = None,
        on_stopped: Callable[[TaskRecord], None] | None = None,
        progress_interval: float | None = 2.0,
        keep_finished: int = FINISHED_TASKS_KEPT,
    ) -> None:
        self._tg = task_group
        self.emit = emit
        self._on_change = on_change
        # Called instead of `on_change` with the record of a background task that the runtime's
        # stop cut off (state "cancelled", reason `RUNTIME_STOPPED` unless it was already being
        # cancelled for another), so the runtime can store it together with the note its
        # session reads at the next start.
        self._on_stopped = on_stopped
        # Seconds between two tool.progress events of one task; None sends none.
        self.progress_interval = progress_interval
        # Tasks not yet settled (running, or ended with their result event still being
        # submitted), and how many of them each session has: what the idle checks look at.
        self._tasks: dict[str, TaskHandle] = {}
        self._unsettled_by_session: dict[str, int] = {}
        # The most recently finished tasks, oldest first; older ones are released.
        self._finished: OrderedDict[str, TaskHandle] = OrderedDict()
        self.keep_finished = keep_finished
        # Notified whenever a task ends, for whoever waits on tasks to settle.
        self.settled = ActivitySignal()
        # Where a session's task records go instead of `on_change` (see
        # wakeful.core.session_writes): as one worker of several, the view fenced by the
        # session's lease, which refuses them once the session moved.
        self.session_writes: SessionWrites = shared_writes

    def start(
        self,
        *,
        session: str,
        tool: str,
        run: TaskRunner,
        call_id: str = "",
        description: str = "",
        background: bool = False,
        deadline_seconds: float | None = None,
    ) -> TaskHandle:
        """Start `run` as a task; `deadline_seconds` is how long it is expected to take (see
        `TaskHandle.deadline_seconds`): a soft deadline that is reported, never enforced."""
        handle = TaskHandle(
            id=new_task_id(),
            session=session,
            tool=tool,
            call_id=call_id,
            description=description,
            background=background,
            manager=self,
            deadline_seconds=deadline_seconds,
        )
        self._tasks[handle.id] = handle
        self._unsettled_by_session[session] = self._unsettled_by_session.get(session, 0) + 1
        self.changed(handle)
        self._tg.start_soon(self._run, handle, run, name=f"wakeful task {handle.id}")
        return handle

    def changed(self, handle: TaskHandle) -> None:
        # Only background work is stored: an inline call lives and dies with its model turn.
        if not handle.background:
            return
        fenced = self.session_writes(handle.session)
        if fenced is not None:
            fenced.task_records.save_nowait(handle.record())
        elif self._on_change is not None:
            self._on_change(handle.record())

    async def _run(self, handle: TaskHandle, run: TaskRunner) -> None:
        try:
            result = await handle.run_cancellable(run)
        except anyio.get_cancelled_exc_class():
            # The task's own scope absorbs its own cancel: this one comes from the task group,
            # which is cancelled when the runtime stops. The runner's cleanup (shielded) has
            # stopped its processes by now; record the task before the cancellation goes on.
            self._stopped(handle)
            raise
        if result is None or handle.cancelled_by_scope:
            handle.state = "cancelled"
            reason = handle.cancel_reason or "cancelled"
            result = ToolResult.error(f"Task {handle.id} ({handle.tool}) was cancelled: {reason}.")
        else:
            handle.state = "failed" if result.is_error else "completed"
        handle.finish(result)
        self.changed(handle)
        if handle.background and handle.state != "cancelled":
            context: dict[str, Any] = {
                "task_id": handle.id,
                "tool": handle.tool,
                "call_id": handle.call_id,
                "state": handle.state,
                "runtime_seconds": round(handle.runtime_seconds, 2),
            }
            # The images travel with the event (the shape of `structured["images"]`), so the
            # session can attach them to the user message that carries the result.
            images = image_attachments(result.structured)
            if images:
                context["images"] = [
                    {"mime_type": image.mime_type, "data": image.data} for image in images
                ]
            await self.emit(
                Event(
                    kind=TOOL_RESULT,
                    source=Source(type="tool", id=handle.id),
                    content=result.content,
                    context=context,
                    session=handle.session,
                )
            )
        self._release(handle)
        self.settled.notify()  # after the result event, so waiters see it pending

    def _stopped(self, handle: TaskHandle) -> None:
        """Settle a task cut off by the runtime's stop: cancelled, with `RUNTIME_STOPPED` as
        its reason (unless it was already being cancelled for another), no result event."""
        handle.state = "cancelled"
        if handle.cancel_reason is None:
            handle.cancel_reason = RUNTIME_STOPPED
        reason = handle.cancel_reason
        handle.finish(
            ToolResult.error(f"Task {handle.id} ({handle.tool}) was cancelled: {reason}.")
        )
        if handle.background and self._on_stopped is not None:
            self._on_stopped(handle.record())
        else:
            self.changed(handle)
        self._release(handle)
        self.settled.notify()

    def _release(self, handle: TaskHandle) -> None:
        """Move a settled task to the recently finished ones, releasing the oldest of those."""
        del self._tasks[handle.id]
        left = self._unsettled_by_session[handle.session] - 1
        if left:
            self._unsettled_by_session[handle.session] = left
        else:
            del self._unsettled_by_session[handle.session]
        if self.keep_finished > 0:
            self._finished[handle.id] = handle
            while len(self._finished) > self.keep_finished:
                self._finished.popitem(last=False)

    def get(self, task_id: str) -> TaskHandle | None:
        """A task not yet settled, or one of the recently finished ones."""
        return self._tasks.get(task_id) or self._finished.get(task_id)

    def list(self, session: str | None = None, *, background_only: bool = True) -> list[TaskHandle]:
        """Unsettled tasks, then the recently finished ones (see `keep_finished`)."""
        return [
            t
            for tasks in (self._tasks, self._finished)
            for t in tasks.values()
            if (session is None or t.session == session) and (t.background or not background_only)
        ]

    # `builtins.list`: inside this class, a bare `list` names the method above.
    def running(self, session: str | None = None) -> builtins.list[TaskHandle]:
        return [
            t
            for t in self._tasks.values()
            if (session is None or t.session == session) and t.background and not t.done
        ]

    def unsettled(self) -> builtins.list[TaskHandle]:
        """Tasks still running, or ended with a result event not yet handed to a session."""
        return [*self._tasks.values()]

    def has_unsettled(self, session: str | None = None) -> bool:
        """Whether `unsettled()` (of one session) is non-empty, without building the list."""
        return bool(self._tasks) if session is None else session in self._unsettled_by_session

    def cancel_all(self, reason: str) -> None:
        for handle in self._tasks.values():
            handle.cancel(reason)
