"""`shell_exec`: a bash command in the sandbox, checked by the command policy first.

Each call is checked by :class:`wakeful.safety.commands.CommandPolicy` (deny refuses it, ask
needs an approved call), then runs under :class:`wakeful.safety.sandbox.Sandbox` in the workspace,
inline or as a background task. Its whole output is saved to `.wakeful/outputs/<call>.txt` while
it is read; the result shows the first and last lines of long output and names that file.
`shell_history` lists a session's earlier commands (kept in memory, the last 500 per session).
"""

from __future__ import annotations

import re
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import Field

from ...errors import ToolError
from ...mcp.bridge import served_over_mcp
from ...safety.commands import CommandPolicy, PolicySettings
from ...safety.paths import confine, display_path
from ...safety.sandbox import Sandbox, SandboxSettings
from ...safety.sandbox.rlimits import MB
from ...services import Services, settings_of, state_of
from ...tools.process import OutputCapture, OutputFile, ProcessOutcome, run_to_end
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ...tools.tasks import TaskHandle
from .background import start_over_mcp
from .long_output import KEEP_LINES, MAX_CHARS, MAX_LINES, excerpt
from .run_shell import (
    BACKGROUND_TIMEOUT_SECONDS,
    INLINE_TIMEOUT_SECONDS,
    describe_command,
    limit_notes,
    start_in_background,
)

MAX_TIMEOUT_SECONDS = 3600.0
OUTPUTS_DIR = Path(".wakeful") / "outputs"
HISTORY_PER_SESSION = 500
MAX_HISTORY_PAGE = 100
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


@tool(
    root_paths=("cwd",),
    annotations=ToolAnnotations(destructive=True, open_world=True),
    examples=(
        {"command": "pytest -q tests/"},
        {"command": "make build", "cwd": "frontend", "timeout_seconds": 600},
        {"command": "python train.py", "background": True},
    ),
)
async def shell_exec(
    ctx: ToolContext,
    command: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100_000,
            description="The command line, run by `bash -c` in the sandbox, e.g. "
            "'ls -la src && wc -l src/*.py'.",
        ),
    ],
    timeout_seconds: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_TIMEOUT_SECONDS,
            description="Stop the command after this many seconds (at most 3600). Leave it out "
            "for 120 inline or 3600 in the background, e.g. 600.",
        ),
    ] = None,
    cwd: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The directory to run in, relative to the workspace root and inside "
            "it; '.' is the root, e.g. 'frontend'.",
        ),
    ] = ".",
    background: Annotated[
        bool,
        Field(
            description="False waits for the command and returns its output; True returns a "
            "task id at once: the result arrives later as an event in the runtime, or is "
            "fetched with task_result over MCP, e.g. true.",
        ),
    ] = False,
) -> Any:
    """Run a bash command in the sandbox, in the workspace, and return its exit code and output.

    Use it to build, test, search files or run programs and scripts (python is the runtime's own
    Python, with its packages). By default the call waits (up to timeout_seconds, 120 by
    default). For anything that may take more than a minute, or keeps running, pass
    background=True: the call returns a task id at once. In the wakeful runtime the result
    arrives later as a tool.result event (follow it with task_status or cancel_task); served
    over MCP, this server's task_result fetches it (also from a later connection: it is stored),
    task_status shows its progress and cancel_task stops it. shell_history lists this session's
    earlier commands.

    The sandbox: only the workspace is writable; the system is read-only; /tmp and HOME are
    private and emptied after each call; there is no network unless the deployment allows it;
    CPU time, memory, processes and file size are limited; no process outlives the call. It
    cannot read input (stdin is empty) or answer prompts: pass flags such as `-y`. The command
    policy checks each command first: some are refused, some need a person's approval.

    Result, inline: "Exit code 0. Output:" and the output (stdout and stderr merged). Output
    over 200 lines or 10,000 characters keeps the first and last 50 lines with "[… N lines
    omitted; full output saved to .wakeful/outputs/<id>.txt; read it with read_file]" between.
    A non-zero exit, a timeout or a refusal is an error result that says so. structuredContent
    has exit_code, timed_out, duration_seconds, output_lines, saved_output and sandbox.
    Result with background=True: {"task_id": "task_1a2b3c4d", "status": "running", "next": …}
    (over MCP the id is longer and unguessable: "bg_" and 32 hex digits).

    Cost: inline, as long as the command runs plus about 10 ms for the sandbox; in the
    background, a few milliseconds. Inline results are at most about 10,000 characters.
    """
    _check_command(command)
    root = Path(await anyio.Path(_workspace_root(ctx)).resolve())
    workdir = await _working_directory(root, cwd)
    refusal = _policy_refusal(ctx, command, workdir)
    if refusal is not None:
        return refusal
    # Built in a thread: the first sandbox of a process probes bubblewrap (a subprocess).
    sandbox = await anyio.to_thread.run_sync(
        Sandbox, settings_of(ctx.services, SandboxSettings), root
    )
    history = session_history(ctx.services, ctx.session)
    shown_cwd = display_path(workdir, root)
    stem = _file_stem(ctx.call_id)

    async def execute(handle: TaskHandle | None, limit: float) -> ToolResult:
        started = time.monotonic()
        entry = history.add(command, shown_cwd, background)
        try:
            result = await _run(sandbox, handle, command, workdir, limit, root, stem)
        except BaseException:
            entry.finish(None, time.monotonic() - started, "cancelled or failed to start")
            raise
        entry.finish(
            result.structured.get("exit_code"),
            time.monotonic() - started,
            "timed out" if result.structured.get("timed_out") else "",
        )
        return result

    if not background:
        return await execute(ctx.task, timeout_seconds or INLINE_TIMEOUT_SECONDS)

    timeout = timeout_seconds or BACKGROUND_TIMEOUT_SECONDS

    async def run_in_background(handle: TaskHandle) -> ToolResult:
        return await execute(handle, timeout)

    if served_over_mcp(ctx.services):
        # No session receives events over MCP: the result is stored, for task_result.
        return await start_over_mcp(ctx, run_in_background, describe_command(command), timeout)
    return start_in_background(
        ctx, run_in_background, command, timeout, "task_status or cancel_task"
    )


# --- checks before running ---------------------------------------------------------------------


def _check_command(command: str) -> None:
    if "\x00" in command:
        raise ToolError(
            "The command contains a NUL byte, which bash cannot receive in a command line. "
            "Remove it; to write such bytes, use printf '\\0' inside the command."
        )
    if not command.strip():
        raise ToolError(
            "The command is empty (only whitespace). Give the command line to run, e.g. 'ls -la'."
        )


def _workspace_root(ctx: ToolContext) -> Path:
    root = ctx.services.workdir
    if root is None:
        raise ToolError(
            "shell_exec has no workspace to run in: no working directory is configured. Start "
            "the server with --root DIR (or give the runtime a workdir)."
        )
    return root


async def _working_directory(root: Path, cwd: str) -> Path:
    path = await anyio.to_thread.run_sync(confine, root, cwd)
    if not await anyio.Path(path).is_dir():
        raise ToolError(
            f"The working directory {cwd!r} is a file, not a directory. Give a directory under "
            "the workspace, or leave cwd out to run in the workspace root."
        )
    return path


def _policy_refusal(ctx: ToolContext, command: str, workdir: Path) -> ToolResult | None:
    settings = settings_of(ctx.services, PolicySettings)
    if settings.workspace is None:  # the workspace is the one the command runs in
        settings = settings.model_copy(update={"workspace": _workspace_root(ctx)})
    policy = CommandPolicy(settings)
    decision = policy.check(command, cwd=workdir)
    reasons = "; ".join(decision.reasons) or "no reason given"
    if decision.decision == "deny":
        raise ToolError(
            f"The command policy refuses this command: {reasons}. It was not run. Do it "
            "another way, or ask the user to change the policy if it is needed."
        )
    if decision.decision == "ask" and not ctx.approved:
        return ToolResult(
            f"This command needs a person's approval before it runs: {reasons}. It was not "
            "run. The runtime asks the user automatically when it runs the call (through MCP, "
            "the client must confirm the call); if approval is refused, do it another way.",
            is_error=True,
            structured={"decision": "ask", "reasons": list(decision.reasons), "ran": False},
        )
    return None


# --- running and the result ---------------------------------------------------------------------


async def _run(
    sandbox: Sandbox,
    handle: TaskHandle | None,
    command: str,
    workdir: Path,
    timeout: float,  # noqa: ASYNC109 - the timeout is reported in the result
    root: Path,
    stem: str,
) -> ToolResult:
    started = time.monotonic()
    outputs = await anyio.to_thread.run_sync(_outputs_directory, root)
    saved = await OutputFile.create(outputs / f"{stem}.txt", sandbox.settings.file_size_mb * MB)
    capture = OutputCapture(handle, head_lines=MAX_LINES, tail_lines=KEEP_LINES, saved=saved)
    try:
        async with sandbox.prepare(["bash", "-c", command], cwd=workdir) as prepared:
            outcome = await run_to_end(
                handle,
                prepared.argv,
                cwd=prepared.cwd,
                env=prepared.env,
                timeout=timeout,
                capture=capture,
            )
    except BaseException:
        # A cancelled (or failed) call leaves no partial output file behind.
        with anyio.CancelScope(shield=True):
            outputs = await anyio.to_thread.run_sync(_outputs_directory, root)
            await anyio.Path(outputs / saved.path.name).unlink(missing_ok=True)
        raise
    limits_hit = prepared.limits_hit()
    duration = time.monotonic() - started
    text, saved_as = await _shown_output(capture, saved, root, sandbox)
    notes = _notes(outcome, capture, limits_hit, sandbox)
    body = (
        f"{_header(outcome, timeout)} Output:\n{text}"
        if text
        else f"{_header(outcome, timeout)} No output."
    )
    content = "\n".join([body, *notes])
    structured = {
        "exit_code": outcome.returncode,
        "timed_out": outcome.timed_out,
        "duration_seconds": round(duration, 3),
        "output_lines": capture.line_count,
        "saved_output": saved_as,
        "limits_hit": limits_hit,
        "sandbox": sandbox.describe(),
    }
    failed = outcome.returncode != 0 or "disk quota" in limits_hit  # see tools.shell._run
    return ToolResult(content, is_error=failed, structured=structured)


async def _shown_output(
    capture: OutputCapture, saved: OutputFile, root: Path, sandbox: Sandbox
) -> tuple[str, str | None]:
    """The output as shown, and the saved file's path (relative to the root) if it was cut."""
    lines = [*capture.head, *capture.tail]
    chars = sum(len(line) + 1 for line in lines)
    if capture.line_count <= MAX_LINES and chars <= MAX_CHARS:
        # Unlink through the directory checked again: the command may have replaced it.
        outputs = await anyio.to_thread.run_sync(_outputs_directory, root)
        await anyio.Path(outputs / saved.path.name).unlink(missing_ok=True)
        return "\n".join(lines), None
    if saved.written:
        saved_as = display_path(saved.path, root)
        if not saved.complete:
            saved_as += (
                f" (only its first {saved.written:,} bytes: the rest passed the "
                f"{sandbox.settings.file_size_mb} MB file size limit)"
            )
    else:
        saved_as = "nowhere (the output could not be saved)"
    if capture.line_count > MAX_LINES:
        omitted = capture.line_count - 2 * KEEP_LINES
        shown = excerpt(lines[:KEEP_LINES], lines[-KEEP_LINES:], omitted, saved_as=saved_as)
    else:
        shown = excerpt(lines, [], 0, saved_as=saved_as)
    return shown, saved_as


def _outputs_directory(root: Path) -> Path:
    """`.wakeful/outputs` under the root, created, and checked to be a real directory there."""
    try:
        (root / OUTPUTS_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolError(
            f"The directory {OUTPUTS_DIR.as_posix()!r} for saved command output cannot be made "
            f"in the workspace: {exc.strerror or exc}. Remove whatever file or link is in its "
            "way, then run the command again."
        ) from exc
    return confine(root, OUTPUTS_DIR.as_posix())


def _header(outcome: ProcessOutcome, timeout: float) -> str:
    if outcome.timed_out:
        return (
            f"Command timed out after {timeout:g} s and was stopped (every process it started "
            "was killed). If it needs longer, run it with background=True or a larger "
            "timeout_seconds."
        )
    code = outcome.returncode
    assert code is not None
    if code == 0:
        return "Exit code 0."
    if code < 0:
        return f"Command was killed by signal {-code} (exit code {code})."
    return f"Command failed with exit code {code}."


def _notes(
    outcome: ProcessOutcome, capture: OutputCapture, limits_hit: list[str], sandbox: Sandbox
) -> list[str]:
    notes = []
    if capture.undecodable:
        notes.append("[Note: the output was not valid UTF-8; undecodable bytes are shown as �.]")
    if outcome.leftovers_stopped:
        notes.append(
            "[Note: processes the command left running in the background were stopped when it "
            "exited. To keep a server running, run it in the foreground with background=True.]"
        )
    notes += limit_notes(limits_hit, sandbox.settings)
    if sandbox.backend == "none":
        notes.append(f"[Sandbox: {sandbox.describe()}]")
    return notes


def _file_stem(call_id: str) -> str:
    cleaned = _UNSAFE_FILE_CHARS.sub("_", call_id)[:80]
    return cleaned or f"call_{uuid.uuid4().hex[:12]}"


# --- history ----------------------------------------------------------------------------------


@dataclass
class HistoryEntry:
    """One command a session ran, and how it ended (`status` is "running" until it does)."""

    number: int
    command: str
    cwd: str
    background: bool
    exit_code: int | None = None
    duration_seconds: float | None = None
    status: str = "running"

    def finish(self, exit_code: int | None, duration: float, problem: str) -> None:
        self.exit_code = exit_code
        self.duration_seconds = round(duration, 3)
        self.status = problem or "finished"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "command": self.command,
            "cwd": self.cwd,
            "background": self.background,
            "status": self.status,
            "exit_code": self.exit_code,
            "duration_seconds": self.duration_seconds,
        }


@dataclass
class SessionHistory:
    """A session's last commands, oldest first, bounded; numbers keep counting past the bound."""

    entries: deque[HistoryEntry] = field(default_factory=lambda: deque(maxlen=HISTORY_PER_SESSION))
    count: int = 0

    def add(self, command: str, cwd: str, background: bool) -> HistoryEntry:
        self.count += 1
        entry = HistoryEntry(self.count, command, cwd, background)
        self.entries.append(entry)
        return entry


@dataclass
class ShellHistories:
    """Every session's history, kept with the services (one runtime or server, in memory)."""

    sessions: dict[str, SessionHistory] = field(default_factory=dict)


def session_history(services: Services, session: str) -> SessionHistory:
    holder = state_of(services, ShellHistories)
    assert isinstance(holder, ShellHistories)
    return holder.sessions.setdefault(session, SessionHistory())


@tool(
    annotations=ToolAnnotations(read_only=True),
    examples=({}, {"limit": 5}, {"before": 31, "limit": 20}),
)
async def shell_history(
    ctx: ToolContext,
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_HISTORY_PAGE,
            description=f"Most commands to list (1-{MAX_HISTORY_PAGE}), the newest ones, e.g. 10.",
        ),
    ] = 20,
    before: Annotated[
        int | None,
        Field(
            ge=1,
            description="List commands numbered below this one (for earlier pages; the result "
            "gives the value), e.g. 31.",
        ),
    ] = None,
) -> ToolResult:
    """List the shell commands this session ran with shell_exec, newest last.

    Use it to recall what was already run, how it ended and how long it took, before running it
    again. It does not show output (run the command again, or read the saved output file named in
    its result) and does not list commands of other sessions or from before a restart; only the
    last 500 commands of a session are kept.

    Result: a header such as "Commands 31–50 of 50 shown", then one line per command: its number,
    exit code or status, duration and cwd, then the command. structuredContent holds the same as
    a list of {number, command, cwd, background, status, exit_code, duration_seconds} and
    next_before, the value of before for the previous page (null on the first page).

    Cost: instant; about 100 characters per command, at most 100 commands a call.
    """
    history = session_history(ctx.services, ctx.session)
    entries = [e for e in history.entries if before is None or e.number < before]
    page = entries[-limit:]
    if not page:
        text = "This session has run no shell commands" + (
            f" numbered below {before}." if before is not None else " yet."
        )
        return ToolResult(text, structured={"commands": [], "next_before": None})
    first, last = page[0].number, page[-1].number
    earlier = page[0] is not history.entries[0]
    header = f"Commands {first}–{last} of {history.count} shown"
    if history.count > len(history.entries):
        header += f" (only the last {len(history.entries)} are kept)"
    rows = [_history_row(e) for e in page]
    text = header + "\n" + "\n".join(rows)
    if earlier:
        text += f"\n\nMore: pass before={first} for earlier commands."
    structured = {
        "commands": [e.to_json() for e in page],
        "next_before": first if earlier else None,
    }
    return ToolResult(text, structured=structured)


def _history_row(entry: HistoryEntry) -> str:
    outcome = f"exit {entry.exit_code}" if entry.status == "finished" else entry.status
    took = f"{entry.duration_seconds:.2f} s" if entry.duration_seconds is not None else "-"
    where = f" in {entry.cwd}" if entry.cwd != "." else ""
    mode = " (background)" if entry.background else ""
    return f"{entry.number:>4}. [{outcome}, {took}{where}{mode}] {entry.command}"


SHELL_TOOLS: tuple[Tool, ...] = (shell_exec, shell_history)
"""`shell_exec` and `shell_history`, the execution server's shell tools."""
