"""The tools an agent uses to follow its tasks: `task_status`, `cancel_task`, `list_tasks`.

A session sees its own tasks only: its background tasks (finished ones included) and whatever
else of it is still running (output monitors, calls still in progress), never the call that is
asking. A background task finished long ago is no longer held in memory; `task_status` and
`cancel_task` then answer from its record in the store (its result, without its output lines).
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from pydantic import Field

from ..errors import ToolError
from ..tools.spec import Tool, ToolAnnotations, ToolContext, tool
from ..tools.tasks import RUNTIME_STOPPED, TaskHandle, TaskRecord

# How long cancel_task waits for a task to stop (its process group gets SIGTERM, a grace of a
# few seconds, then SIGKILL) before it answers "cancelling".
CANCEL_WAIT_SECONDS = 10.0

_TASK_ID = Field(
    min_length=1,
    description="The id a background call or monitor_shell returned, e.g. 'task_1a2b3c4d'.",
)


def session_tasks(ctx: ToolContext) -> list[TaskHandle]:
    """The tasks this session can see, running first, then the most recent first."""
    visible = [
        t
        for t in ctx.services.tasks.list(ctx.session, background_only=False)
        if t is not ctx.task and (t.background or not t.done)
    ]
    visible.sort(key=lambda t: t.started_monotonic, reverse=True)
    visible.sort(key=lambda t: t.done)
    return visible


def find_task(ctx: ToolContext, task_id: str) -> TaskHandle:
    """The session's task with this id, or a ToolError that lists the ids it knows."""
    handle = ctx.services.tasks.get(task_id)
    if handle is not None and handle.session == ctx.session and handle is not ctx.task:
        return handle
    raise _unknown_task(ctx, task_id)


async def find_task_or_record(ctx: ToolContext, task_id: str) -> TaskHandle | TaskRecord:
    """The session's task with this id, or, once released from memory, its stored record."""
    try:
        return find_task(ctx, task_id)
    except ToolError:
        store = ctx.services.store
        if store is None:
            raise
        for record in await store.tasks(ctx.session):
            if record.id == task_id and record.state != "running":
                return record
        raise


def _unknown_task(ctx: ToolContext, task_id: str) -> ToolError:
    known = ", ".join(t.id for t in session_tasks(ctx)) or "(none)"
    return ToolError(
        f"There is no task {task_id!r} in this session. Known task ids: {known}. Use one of "
        "these, or call list_tasks to see them with their states."
    )


def record_status(record: TaskRecord) -> dict[str, Any]:
    """What `task_status` shows of a finished task known only from the store."""
    ended = record.ended_at
    note = "This task finished a while ago; its output lines are no longer kept."
    if record.state == "lost" or record.cancel_reason == RUNTIME_STOPPED:
        note = (
            "This task ended when an earlier run of the runtime stopped; its output lines were "
            "not kept and its result is unknown."
        )
    out: dict[str, Any] = {
        "task_id": record.id,
        "tool": record.tool,
        "description": record.description,
        "state": record.state,
        "percent": record.percent,
        "runtime_seconds": (
            round((ended - record.started_at).total_seconds(), 2) if ended else None
        ),
        "last_output": [],
        "note": note,
    }
    if record.cancel_reason:
        out["cancel_reason"] = record.cancel_reason
    if record.result is not None:
        out["result"] = record.result
    return out


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=({"task_id": "task_1a2b3c4d"}, {"task_id": "task_1a2b3c4d", "lines": 50}),
)
async def task_status(
    ctx: ToolContext,
    task_id: Annotated[str, _TASK_ID],
    lines: Annotated[
        int,
        Field(ge=0, le=200, description="How many of the last output lines to show, e.g. 20."),
    ] = 10,
) -> dict[str, Any]:
    """Show where a task stands: its state, progress and latest output.

    Use it to check on a background command or other task without waiting for its result. It
    does not wait for the task and cannot show output older than the last 200 lines. Result:
    {"task_id": "task_1a2b3c4d", "tool": "run_shell", "description": "npm run build",
    "state": "running", "percent": 40.0, "runtime_seconds": 12.5, "last_output": ["…"]};
    state is running, completed, failed, cancelled or lost; percent is null when the output never
    showed one; a finished task also has "result", a cancelled one "cancel_reason"; one that
    finished long ago has its result but no output lines (a "note" says so).
    Cost: instant; a few hundred characters, plus the output lines asked for (at most 8 KB
    each) and, once finished, the task's result.
    """
    found = await find_task_or_record(ctx, task_id)
    return found.status(lines) if isinstance(found, TaskHandle) else record_status(found)


@tool(
    annotations=ToolAnnotations(destructive=True, idempotent=True),
    examples=(
        {"task_id": "task_1a2b3c4d"},
        {"task_id": "task_1a2b3c4d", "reason": "the user asked for a different build"},
    ),
)
async def cancel_task(
    ctx: ToolContext,
    task_id: Annotated[str, _TASK_ID],
    reason: Annotated[
        str,
        Field(
            min_length=1,
            description="Why it is cancelled, kept with the task, e.g. 'wrong branch'.",
        ),
    ] = "cancelled by the agent",
) -> dict[str, Any]:
    """Stop a running task now, with every process it started.

    Use it for a background command that is no longer needed, hangs, or was started by
    mistake, or to stop a monitor_shell monitor. It cannot undo what the task already did.
    The task's whole process group gets SIGTERM, then SIGKILL after a short grace. A cancelled
    background task sends no tool.result event; this call's result is the confirmation.
    Result: {"task_id": "task_1a2b3c4d", "status": "cancelled", "cancel_reason": "wrong
    branch"}; a task that had already finished is left as it is: "status": "already_finished"
    with its "state". Cost: usually well under a second; at most 10 seconds, after which the
    status is "cancelling"; the result is under 300 characters.
    """
    handle = await find_task_or_record(ctx, task_id)
    if isinstance(handle, TaskRecord) or handle.done:
        return {
            "task_id": handle.id,
            "status": "already_finished",
            "state": handle.state,
            "message": f"Task {handle.id} had already finished ({handle.state}); nothing was "
            "cancelled. Call task_status for its result.",
        }
    handle.cancel(reason)
    with anyio.move_on_after(CANCEL_WAIT_SECONDS):
        await handle.wait()
    if not handle.done:
        return {
            "task_id": handle.id,
            "status": "cancelling",
            "cancel_reason": handle.cancel_reason,
            "message": f"Task {handle.id} is still stopping; call task_status to check again.",
        }
    return {"task_id": handle.id, "status": handle.state, "cancel_reason": handle.cancel_reason}


@tool(annotations=ToolAnnotations(read_only=True, idempotent=True), examples=({},))
async def list_tasks(ctx: ToolContext) -> dict[str, Any]:
    """List this session's tasks: background commands, monitors, calls still running.

    Use it to find a task id or to see what is still running. It cannot see other sessions'
    tasks and does not show output (call task_status for that). Result: {"tasks": [{"task_id":
    "task_1a2b3c4d", "tool": "run_shell", "description": "npm run build", "state": "running",
    "percent": 40.0, "runtime_seconds": 12.5, "background": true}]}, running tasks first, then
    the most recent first. Cost: instant; about 200 characters per task.
    """
    return {
        "tasks": [
            {
                "task_id": t.id,
                "tool": t.tool,
                "description": t.description,
                "state": t.state,
                "percent": t.percent,
                "runtime_seconds": round(t.runtime_seconds, 2),
                "background": t.background,
            }
            for t in session_tasks(ctx)
        ]
    }


TASK_TOOLS: tuple[Tool, ...] = (task_status, cancel_task, list_tasks)
"""The tools to follow, stop and list tasks."""
