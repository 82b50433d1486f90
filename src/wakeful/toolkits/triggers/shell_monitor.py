"""Shell output as a channel: a running task's new output lines, delivered as `shell.output` events.

`monitor_output` reads a task's output subscription and emits the lines (all of them, or those
a regular expression matches) in batches: lines that arrive within `window` seconds of each
other go out as one event, so a burst of output wakes the agent once. The `monitor_shell` tool
runs it as a task of its own, which ends when the watched task ends, can be cancelled with
`cancel_task`, and reports no `tool.result` of its own.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import Field

from ...errors import ToolError
from ...events import SHELL_OUTPUT, Event, Source
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from ...tools.tasks import TaskHandle
from ..tasks import find_task

Emit = Callable[[Event], Awaitable[object]]

BATCH_WINDOW_SECONDS = 0.5
# A steady stream never goes quiet for a whole window; it is still delivered this often.
MAX_BATCH_WAIT_SECONDS = 5.0
MAX_BATCH_LINES = 200


async def monitor_output(
    lines: MemoryObjectReceiveStream[str],
    emit: Emit,
    *,
    task_id: str,
    session: str,
    pattern: re.Pattern[str] | None = None,
    monitor_id: str = "",
    window: float = BATCH_WINDOW_SECONDS,
    max_wait: float = MAX_BATCH_WAIT_SECONDS,
    max_lines: int = MAX_BATCH_LINES,
) -> int:
    """Emit the lines of `lines` that match `pattern` as batched events until it ends.

    A batch is sent when no matching line came for `window` seconds, when it is `max_wait`
    seconds old, when it holds `max_lines` lines, or when the stream ends. Returns the number
    of events sent.
    """

    def wanted(line: str) -> bool:
        return pattern is None or pattern.search(line) is not None

    async def send(batch: list[str]) -> None:
        await emit(
            Event(
                kind=SHELL_OUTPUT,
                source=Source(type="tool", id=task_id),
                content="\n".join(batch),
                context={
                    "task_id": task_id,
                    "pattern": pattern.pattern if pattern is not None else None,
                    "lines": len(batch),
                    "monitor_id": monitor_id,
                },
                session=session,
            )
        )

    events = 0
    ended = False
    while not ended:
        try:
            first = await lines.receive()
        except anyio.EndOfStream:
            break
        if not wanted(first):
            continue
        batch = [first]
        started_at = last_at = anyio.current_time()
        while len(batch) < max_lines:
            remaining = min(last_at + window, started_at + max_wait) - anyio.current_time()
            if remaining <= 0:
                break
            line: str | None = None
            with anyio.move_on_after(remaining):
                try:
                    line = await lines.receive()
                except anyio.EndOfStream:
                    ended = True
            if line is None:
                break  # quiet for a whole window, or the stream ended
            if wanted(line):
                batch.append(line)
                last_at = anyio.current_time()
        await send(batch)
        events += 1
    return events


@tool(
    annotations=ToolAnnotations(read_only=True),
    examples=(
        {"task_id": "task_1a2b3c4d"},
        {"task_id": "task_1a2b3c4d", "pattern": "ERROR|FAILED|Traceback"},
    ),
)
async def monitor_shell(
    ctx: ToolContext,
    task_id: Annotated[
        str,
        Field(
            min_length=1,
            description="The id a background run_shell call returned, e.g. 'task_1a2b3c4d'.",
        ),
    ],
    pattern: Annotated[
        str | None,
        Field(
            min_length=1,
            description="A Python regular expression; only output lines it matches (anywhere "
            "in the line) are delivered. Leave it out for every line, e.g. 'ERROR|listening on'.",
        ),
    ] = None,
) -> dict[str, Any]:
    """Watch a running background task and receive its new output lines as events.

    Use it to react to a long command while it runs (a server saying it is ready, a test
    failing) instead of polling task_status. New lines arrive as shell.output events; lines that
    come within half a second of each other arrive together in one event. It cannot show output
    printed before this call (use task_status for that), and stops by itself when the task
    ends; stop it earlier with cancel_task(monitor_id). Result: {"monitor_id": "task_5e6f7a8b",
    "task_id": "task_1a2b3c4d", "status": "monitoring", "pattern": "ERROR"}. Cost: instant;
    the result is about 100 characters plus the pattern, but each event (up to 200 lines) costs
    you a turn, so use a pattern for chatty commands.
    """
    compiled: re.Pattern[str] | None = None
    if pattern is not None:
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ToolError(
                f"The pattern {pattern!r} is not a valid regular expression: {exc}. Fix it "
                "(escape a literal '(', '[' or '+' with a backslash) or leave pattern out to "
                "receive every line."
            ) from exc
    watched = find_task(ctx, task_id)
    if watched.done:
        raise ToolError(
            f"Task {task_id} has already finished ({watched.state}), so there is no new output "
            f"to monitor. Call task_status with task_id {task_id!r} for its result and last "
            "output."
        )
    # Subscribe now, not when the monitor task first runs, so that no line falls in between.
    lines = watched.subscribe()
    emit = ctx.services.emit

    async def run_monitor(monitor: TaskHandle) -> ToolResult:
        with lines:
            events = await monitor_output(
                lines,
                emit,
                task_id=task_id,
                session=ctx.session,
                pattern=compiled,
                monitor_id=monitor.id,
            )
        return ToolResult(
            f"Stopped monitoring {task_id}: the task ended ({watched.state}) after {events} "
            "shell.output events."
        )

    description = f"monitor output of {task_id}"
    if pattern is not None:
        description += f" matching {pattern!r}"
    try:
        # Not a background task: the monitor ends with the watched task and its end is no news
        # for the model, so the task manager emits no tool.result for it.
        monitor = ctx.services.tasks.start(
            session=ctx.session,
            tool=ctx.tool_name,
            run=run_monitor,
            call_id=ctx.call_id,
            description=description,
            background=False,
        )
    except BaseException:
        lines.close()
        raise
    return {
        "monitor_id": monitor.id,
        "task_id": task_id,
        "status": "monitoring",
        "pattern": pattern,
    }
