"""`run_shell`: a shell command, awaited inline or started as a background task.

Inline, the command runs in the task the session already runs this call in, so `task_status`
sees its output live and an interrupt that detaches the call keeps the command running. With
`background=True` it gets a task of its own and the result arrives later as a `tool.result`
event. Either way the command's whole process group is stopped when the task ends
(see :mod:`wakeful.tools.process`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import Field

from ...errors import ToolError
from ...tools.process import DEFAULT_TIMEOUT_HINT, run_process
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ...tools.tasks import TaskHandle
from ..triggers.shell_monitor import monitor_shell

if TYPE_CHECKING:
    from ...safety.sandbox import SandboxSettings

INLINE_TIMEOUT_SECONDS = 120.0
# A background run is meant to outlive a turn, but a forgotten `tail -f` should not run forever:
# one hour covers long builds and test suites; ask for more explicitly.
BACKGROUND_TIMEOUT_SECONDS = 3600.0
MAX_TIMEOUT_SECONDS = 86400.0
_DESCRIPTION_CHARS = 100

_BACKGROUND_TIMEOUT_HINT = (
    "If the command needs longer, start it again with a larger timeout_seconds "
    f"(at most {MAX_TIMEOUT_SECONDS:g})."
)


@tool(
    annotations=ToolAnnotations(destructive=True, open_world=True),
    examples=(
        {"command": "pytest -q tests/"},
        {"command": "npm run build", "background": True},
        {"command": "grep -rn 'TODO' src | head -20", "cwd": "/work/project"},
    ),
)
async def run_shell(
    ctx: ToolContext,
    command: Annotated[
        str,
        Field(
            min_length=1,
            description="The command line, run by `bash -c`, e.g. 'sleep 5; echo done'.",
        ),
    ],
    background: Annotated[
        bool,
        Field(
            description="False waits for the command and returns its output; True returns a "
            "task id at once and delivers the result later as an event, e.g. true.",
        ),
    ] = False,
    timeout_seconds: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_TIMEOUT_SECONDS,
            description="Stop the command after this many seconds. Leave it out for 120 inline "
            "or 3600 in the background, e.g. 600.",
        ),
    ] = None,
    cwd: Annotated[
        str | None,
        Field(
            min_length=1,
            description="The directory to run in, absolute or relative to the workspace; leave "
            "it out for the workspace itself, e.g. 'frontend'.",
        ),
    ] = None,
) -> Any:
    """Run a bash command on this machine and return its exit code and output.

    Use it to build, test, search files or run programs. By default the call waits for the
    command (at most timeout_seconds, 120 by default) and returns its result. For anything that
    may take more than a minute, or that keeps running (a server, a watcher), pass
    background=True: the call returns at once and the result arrives later as a tool.result
    event; follow the task with task_status, monitor_shell or cancel_task.

    It cannot read input (stdin is empty) or answer prompts: pass flags such as `-y`. Processes a
    command leaves running in the background (`cmd &`) are stopped when it exits; run a server in
    the foreground with background=True instead. The command runs in a sandbox (bubblewrap;
    `[safety.sandbox]` sets it up): only the workspace is writable (its .git and the runtime's
    state stay read-only, so commit outside), no network unless granted, no privileges, limits
    on CPU, memory, processes and disk, and nothing it starts outlives it. Where bubblewrap is
    missing, or the deployment turned the sandbox off, every result ends with a "NOT A SANDBOX"
    note.

    Result, inline: "Exit code 0. Output:" and the output (stdout and stderr merged); long
    output keeps the first and last 50 lines with "[… N lines omitted …]" between. A non-zero
    exit or a timeout is an error result that says so. Result with background=True:
    {"task_id": "task_1a2b3c4d", "status": "running", "timeout_seconds": 3600, "next": "…"}.

    Cost: inline, as long as the command runs; in the background, a few milliseconds. Inline
    results are as long as the output, up to 100 lines of at most 2,000 characters each; the
    background result is about 250 characters.
    """
    workdir = await _working_directory(ctx, cwd)
    if not background:
        timeout = timeout_seconds or INLINE_TIMEOUT_SECONDS
        return await _run(ctx, ctx.task, command, workdir, timeout, DEFAULT_TIMEOUT_HINT)

    timeout = timeout_seconds or BACKGROUND_TIMEOUT_SECONDS

    async def run_in_background(handle: TaskHandle) -> ToolResult:
        return await _run(ctx, handle, command, workdir, timeout, _BACKGROUND_TIMEOUT_HINT)

    return start_in_background(
        ctx, run_in_background, command, timeout, "task_status, monitor_shell or cancel_task"
    )


def start_in_background(
    ctx: ToolContext,
    run: Callable[[TaskHandle], Awaitable[ToolResult]],
    command: str,
    timeout: float,
    follow_with: str,
) -> dict[str, Any]:
    """Start a shell command's run as a background task of the call's session; the answer the
    model gets at once (`follow_with` names the tools that follow the task)."""
    handle = ctx.services.tasks.start(
        session=ctx.session,
        tool=ctx.tool_name,
        run=run,
        call_id=ctx.call_id,
        description=describe_command(command),
        background=True,
    )
    return {
        "task_id": handle.id,
        "status": "running",
        "timeout_seconds": timeout,
        "next": "The result will arrive as a tool.result event. Meanwhile use "
        f"{follow_with} with this task_id.",
    }


async def _run(
    ctx: ToolContext,
    handle: TaskHandle | None,
    command: str,
    workdir: Path | None,
    timeout: float,  # noqa: ASYNC109 - reported in the result, not raised
    hint: str,
) -> ToolResult:
    """Run the command in the sandbox: the services' settings, or the defaults when they have
    none (secure by default: bubblewrap wherever it works). Only explicit settings with
    `backend="none"` run it unconfined, and the result says so."""
    from ...safety.sandbox import Sandbox, SandboxSettings

    configured = ctx.services.settings.get(SandboxSettings)
    settings = configured if isinstance(configured, SandboxSettings) else SandboxSettings()
    root = ctx.services.workdir or Path.cwd()
    sandbox = await anyio.to_thread.run_sync(Sandbox, settings, root)  # probes bwrap once
    async with sandbox.prepare(["bash", "-c", command], cwd=workdir or root) as prepared:
        result = await run_process(
            handle,
            argv=prepared.argv,
            cwd=prepared.cwd,
            env=prepared.env,
            timeout=timeout,
            timeout_hint=hint,
        )
    hit = prepared.limits_hit()
    notes = limit_notes(hit, settings)
    if sandbox.backend == "none":
        notes.append(f"[Sandbox: {sandbox.describe()}]")
    if not notes:
        return result
    content = "\n".join([result.content, *notes])
    # Past the disk quota is a failure even when the command ended by itself just as it
    # passed it (faster than a measurement): the next command will be stopped at once.
    failed = result.is_error or "disk quota" in hit
    return ToolResult(content, is_error=failed, structured=result.structured)


def limit_notes(limits_hit: list[str], settings: SandboxSettings) -> list[str]:
    """One line for each sandbox limit a command ran into, for its result."""
    notes = []
    if "processes" in limits_hit:
        notes.append(
            f"[Note: the command reached the sandbox's limit of {settings.max_processes} "
            "processes; forks beyond it failed.]"
        )
    if "memory" in limits_hit:
        notes.append(
            f"[Note: the command reached the sandbox's memory limit of {settings.memory_mb} MB.]"
        )
    if "disk quota" in limits_hit:
        notes.append(
            f"[Note: the workspace grew past its disk quota of {settings.disk_quota_mb} MB "
            "([safety.sandbox] disk_quota_mb): the command was stopped, or ended just as it "
            "passed it. Delete files it no longer needs (build outputs, downloads): until then "
            "every command is stopped at once.]"
        )
    return notes


async def _working_directory(ctx: ToolContext, cwd: str | None) -> Path | None:
    base = ctx.services.workdir
    if cwd is None:
        return base
    path = _resolve(cwd, base)
    if not await anyio.Path(path).is_dir():
        where = f"the workspace {str(base)!r}" if base is not None else "the runtime's directory"
        raise ToolError(
            f"The working directory {cwd!r} does not exist or is not a directory. Give an "
            f"existing directory, or leave cwd out to run in {where}."
        )
    return path


def _resolve(cwd: str, base: Path | None) -> Path:
    path = Path(cwd).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path


def describe_command(command: str) -> str:
    """A command on one line, cut to fit a task list."""
    line = " ".join(command.split())
    if len(line) <= _DESCRIPTION_CHARS:
        return line
    return line[: _DESCRIPTION_CHARS - 1] + "…"


SHELL_TOOLS: tuple[Tool, ...] = (run_shell, monitor_shell)
"""`run_shell` and `monitor_shell`, the tools an agent needs to run commands."""
