"""Background commands over MCP: started by `shell_exec`, followed with this server's own tools.

In the runtime a background result arrives as a `tool.result` event; an MCP connection has no
session to send it to. So over MCP each background run gets a long random task id (the only key
to it: a client of another connection needs the id to see it), its record and result are saved in
the server's store when it starts and when it ends, and `task_status`, `task_result` and
`cancel_task` follow it. A client that reconnects (another connection, a new process) fetches a
finished result by its id. A run still going when its connection closes is cancelled with it
(over stdio the server process ends with the connection), and its record says so.

Why tools and not the MCP tasks extension: this SDK (mcp 2.3) has the extension's types and a
generic way to add methods, but no task support on the low-level server (the 1.x
`experimental.enable_tasks` is gone), and few clients speak it; three plain tools work with
every client, and a model can call them itself.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import Field

from ...errors import StoreError, ToolError
from ...services import Services, state_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ...tools.tasks import TaskHandle, TaskRecord, TaskState

if TYPE_CHECKING:
    from ...core.runtime_store import RuntimeStore

log = logging.getLogger(__name__)

TASK_ID_PREFIX = "bg_"
_TASK_ID = re.compile(r"bg_[0-9a-f]{32}")
# How long cancel_task waits for a run to stop (SIGTERM, a short grace, then SIGKILL).
CANCEL_WAIT_SECONDS = 10.0
# The longest task_result may wait: under the 60 s default timeout of common MCP clients.
MAX_WAIT_SECONDS = 50.0

_TASK_ID_FIELD = Field(
    min_length=1,
    max_length=100,
    description="The task_id a shell_exec call with background=true returned, e.g. "
    "'bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f'.",
)


def new_background_id() -> str:
    """A task id no other client can guess (128 random bits)."""
    return TASK_ID_PREFIX + secrets.token_hex(16)


@dataclass
class BackgroundRuns:
    """This connection's background runs, by their public task id (kept in the services' state)."""

    by_id: dict[str, TaskHandle] = field(default_factory=dict)


async def start_over_mcp(
    ctx: ToolContext,
    run: Callable[[TaskHandle], Awaitable[ToolResult]],
    description: str,
    timeout: float,  # noqa: ASYNC109 - reported in the answer, not applied here
) -> dict[str, Any]:
    """Start `run` as a background task of this connection, its record saved in the store."""
    task_id = new_background_id()
    store = ctx.services.store
    started = TaskRecord(
        id=task_id,
        session=ctx.session,
        tool=ctx.tool_name,
        call_id=ctx.call_id,
        description=description,
        state="running",
        background=True,
        started_at=datetime.now(UTC),
    )
    if store is not None:
        try:
            await store.save_task(started)
        except StoreError as exc:
            raise ToolError(
                f"The background run was not started: its record could not be saved in this "
                f"server's store ({exc}), so its result could not be kept. Run the command inline "
                "(background=false), or fix the store and try again."
            ) from exc

    async def run_and_save(handle: TaskHandle) -> ToolResult:
        try:
            result = await run(handle)
        except anyio.get_cancelled_exc_class():
            # Cancelled by cancel_task, or by the connection closing: record it, then go on.
            reason = handle.cancel_reason or "the run was cancelled"
            text = f"Task {task_id} ({ctx.tool_name}) was cancelled: {reason}."
            with anyio.CancelScope(shield=True):
                await _save_end(store, _ended(started, handle, "cancelled", text))
            raise
        except Exception as exc:
            # The task manager turns a bug into a failed result; the record says the same.
            text = f"{ctx.tool_name} failed with {type(exc).__name__}: {exc}"
            await _save_end(store, _ended(started, handle, "failed", text))
            raise
        state: TaskState = "failed" if result.is_error else "completed"
        await _save_end(store, _ended(started, handle, state, result.content))
        return result

    handle = ctx.services.tasks.start(
        session=ctx.session,
        tool=ctx.tool_name,
        run=run_and_save,
        call_id=ctx.call_id,
        description=description,
        background=True,
    )
    state_of(ctx.services, BackgroundRuns).by_id[task_id] = handle
    kept = (
        "is saved in this server's store, so a later connection can fetch it with the id"
        if store is not None
        else "is kept only in this connection's memory (this server has no store)"
    )
    return {
        "task_id": task_id,
        "status": "running",
        "timeout_seconds": timeout,
        "next": "Fetch the result with task_result (wait_seconds up to 50 waits for it), check "
        "on it with task_status, stop it with cancel_task, each with this task_id. The result "
        f"{kept}; the run itself stops if this connection closes first.",
    }


async def _save_end(store: RuntimeStore | None, record: TaskRecord) -> None:
    """Save how a run ended; a store failure is logged, the run's result is kept in memory."""
    if store is None:
        return
    try:
        await store.save_task(record)
    except StoreError:
        log.warning("the end of background task %s could not be stored", record.id, exc_info=True)


def _ended(started: TaskRecord, handle: TaskHandle, state: TaskState, result: str) -> TaskRecord:
    return replace(
        started,
        state=state,
        ended_at=datetime.now(UTC),
        percent=handle.percent,
        result=result,
        cancel_reason=handle.cancel_reason if state == "cancelled" else None,
    )


async def find_background(services: Services, task_id: str) -> TaskHandle | TaskRecord:
    """This connection's live run with this id, else its stored record, else a ToolError."""
    task_id = task_id.strip()
    if not _TASK_ID.fullmatch(task_id):
        raise ToolError(
            f"{task_id!r} is not a background task id of this server: ids are 'bg_' and 32 hex "
            "digits, e.g. 'bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f', as shell_exec with "
            "background=true returned it. Pass the whole id."
        )
    handle = state_of(services, BackgroundRuns).by_id.get(task_id)
    if handle is not None:
        return handle
    if services.store is not None:
        for record in await services.store.tasks():
            if record.id == task_id:
                return record
    where = "this server's store" if services.store is not None else "this connection"
    raise ToolError(
        f"There is no background task {task_id!r} in {where}. Check that the id is the one "
        "shell_exec returned, on this same server (the same root); a server without a store "
        "forgets the runs of closed connections."
    )


def _runtime_seconds(found: TaskHandle | TaskRecord) -> float | None:
    if isinstance(found, TaskHandle):
        return round(found.runtime_seconds, 2)
    if found.ended_at is None:
        return None
    return round((found.ended_at - found.started_at).total_seconds(), 2)


def _running_elsewhere(found: TaskHandle | TaskRecord) -> bool:
    """A stored record still marked running: its run belongs to another connection."""
    return isinstance(found, TaskRecord) and found.state == "running"


OTHER_CONNECTION_NOTE = (
    "It runs on another connection of this server, which alone holds its output lines; or that "
    "server process stopped without recording its end."
)


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"task_id": "bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f"},
        {"task_id": "bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f", "lines": 50},
    ),
)
async def task_status(
    ctx: ToolContext,
    task_id: Annotated[str, _TASK_ID_FIELD],
    lines: Annotated[
        int,
        Field(ge=0, le=200, description="How many of the last output lines to show, e.g. 20."),
    ] = 10,
) -> dict[str, Any]:
    """Show where a background shell_exec run stands: its state, progress and latest output.

    Use it to check on a command started with shell_exec background=true without waiting for
    it; task_result returns the full result. It does not wait, cannot show output older than
    the last 200 lines, and shows output lines only to the connection that started the run
    (a later connection sees the state and, once finished, the result).

    Result: {"task_id": "bg_…", "tool": "shell_exec", "description": "npm run build", "state":
    "running", "percent": 40.0, "runtime_seconds": 12.5, "last_output": ["…"]}; state is
    running, completed, failed or cancelled; a finished run also has "result", a cancelled one
    "cancel_reason"; a run of another connection has a "note" instead of output lines.

    Cost: instant (a store read for another connection's run); a few hundred characters plus
    the output lines asked for and, once finished, the result (up to about 10,000 characters).
    """
    found = await find_background(ctx.services, task_id)
    task_id = task_id.strip()
    if isinstance(found, TaskHandle):
        status = found.status(lines)
        status["task_id"] = task_id
        return status
    status = {
        "task_id": task_id,
        "tool": found.tool,
        "description": found.description,
        "state": found.state,
        "percent": found.percent,
        "runtime_seconds": _runtime_seconds(found),
        "last_output": [],
    }
    if _running_elsewhere(found):
        status["note"] = OTHER_CONNECTION_NOTE
    if found.cancel_reason:
        status["cancel_reason"] = found.cancel_reason
    if found.result is not None:
        status["result"] = found.result
    return status


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"task_id": "bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f"},
        {"task_id": "bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f", "wait_seconds": 30},
    ),
)
async def task_result(
    ctx: ToolContext,
    task_id: Annotated[str, _TASK_ID_FIELD],
    wait_seconds: Annotated[
        float,
        Field(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description="Wait up to this many seconds (at most 50) for a running task to "
            "finish; 0 answers at once, e.g. 30.",
        ),
    ] = 0,
) -> ToolResult:
    """Return the result of a background shell_exec run, once it has finished.

    Use it after shell_exec with background=true, in this connection or a later one (the
    result is kept in this server's store). It cannot wait more than 50 seconds a call (call
    it again), and cannot wait for a run of another connection, only report it.

    Result: a finished run's result exactly as an inline shell_exec would give it ("Exit code
    0. Output: …", an error result if the command failed or was cancelled); structuredContent
    has task_id, state and, while this connection holds the run, shell_exec's own fields
    (exit_code, timed_out, …). A run still going answers "Task … is still running" with its
    latest output lines (not an error): call again later.

    Cost: instant, or up to wait_seconds; the result is at most about 10,000 characters.
    """
    found = await find_background(ctx.services, task_id)
    task_id = task_id.strip()
    if isinstance(found, TaskHandle):
        if not found.done and wait_seconds > 0:
            with anyio.move_on_after(wait_seconds):
                await found.wait()
        if found.done and found.result is not None:
            result = found.result
            fields = result.structured if isinstance(result.structured, dict) else {}
            structured = {"task_id": task_id, "state": found.state, **fields}
            return ToolResult(result.content, is_error=result.is_error, structured=structured)
        last = found.last_lines(10)
        shown = "\n".join(last) if last else "(no output yet)"
        return ToolResult(
            f"Task {task_id} is still running ({found.runtime_seconds:.0f} s so far). Latest "
            f"output:\n{shown}\nCall task_result again later (wait_seconds up to 50 waits), or "
            "cancel_task to stop it.",
            structured={"task_id": task_id, "state": "running", "last_output": last},
        )
    if _running_elsewhere(found) or found.result is None:
        return ToolResult(
            f"Task {task_id} has no result yet. {OTHER_CONNECTION_NOTE} Call task_result again "
            "later.",
            structured={"task_id": task_id, "state": found.state},
        )
    return ToolResult(
        found.result,
        is_error=found.state != "completed",
        structured={"task_id": task_id, "state": found.state},
    )


@tool(
    annotations=ToolAnnotations(destructive=True, idempotent=True),
    examples=(
        {"task_id": "bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f"},
        {"task_id": "bg_5f0c9a1e7d3b4c2a8e6f1d0b9c7a5e3f", "reason": "wrong branch"},
    ),
)
async def cancel_task(
    ctx: ToolContext,
    task_id: Annotated[str, _TASK_ID_FIELD],
    reason: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description="Why it is cancelled, kept with the task, e.g. 'wrong branch'.",
        ),
    ] = "cancelled by the MCP client",
) -> dict[str, Any]:
    """Stop a background shell_exec run now, with every process it started.

    Use it for a background command that is no longer needed, hangs, or was started by mistake.
    It cannot undo what the command already did, and it can stop only runs of this connection
    (a run of a closed connection was already stopped with it). The command's whole process
    group gets SIGTERM, then SIGKILL after a short grace; the task's stored result then says it
    was cancelled.

    Result: {"task_id": "bg_…", "status": "cancelled", "cancel_reason": "wrong branch"}; a run
    that had already finished is left as it is: "status": "already_finished" with its "state".

    Cost: usually well under a second; at most 10 seconds, after which the status is
    "cancelling"; the result is under 400 characters.
    """
    found = await find_background(ctx.services, task_id)
    task_id = task_id.strip()
    if _running_elsewhere(found):
        raise ToolError(
            f"Task {task_id} cannot be cancelled from this connection. {OTHER_CONNECTION_NOTE} "
            "Cancel it from the connection that started it; closing that connection stops it."
        )
    if isinstance(found, TaskRecord) or found.done:
        return {
            "task_id": task_id,
            "status": "already_finished",
            "state": found.state,
            "message": f"Task {task_id} had already finished ({found.state}); nothing was "
            "cancelled. Call task_result for its result.",
        }
    found.cancel(reason)
    with anyio.move_on_after(CANCEL_WAIT_SECONDS):
        await found.wait()
    if not found.done:
        return {
            "task_id": task_id,
            "status": "cancelling",
            "cancel_reason": found.cancel_reason,
            "message": f"Task {task_id} is still stopping; call task_status to check again.",
        }
    return {"task_id": task_id, "status": found.state, "cancel_reason": found.cancel_reason}


BACKGROUND_TOOLS: tuple[Tool, ...] = (task_status, task_result, cancel_task)
"""The execution server's tools to follow background shell_exec runs over MCP."""
