"""Running a shell command as one process group that is always stopped as a whole.

`run_process` starts `bash -c command` in a new session (its own process group), streams its
merged stdout and stderr into a task's output line by line, and enforces a timeout. Whatever way
the run ends (exit, timeout, cancellation), the whole group is stopped (SIGTERM, a short grace,
then SIGKILL) and the shell is reaped under a shielded cancel scope, so no process is left behind
unless it left the group on purpose (`setsid`); the sandbox (:mod:`wakeful.safety.sandbox`)
closes that gap: give `run_process` the sandboxed `argv` instead of a `command`.

Processes the command leaves running in the background (`server &`) are stopped when the shell
exits: a long-running process belongs in the foreground of a background run.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import DEVNULL, PIPE, STDOUT
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.file import FileWriteStream

from ..errors import ToolError, UserError
from .reaper import reaper, start_reaper
from .result import ToolResult

if TYPE_CHECKING:
    from .tasks import TaskHandle

log = logging.getLogger(__name__)

HEAD_LINES = 50
TAIL_LINES = 50
MAX_LINE_BYTES = 8192  # a longer line (or a stream with no newline) is split into pieces
MAX_LINE_CHARS_SHOWN = 2000
KILL_GRACE_SECONDS = 2.0
OUTPUT_DRAIN_SECONDS = 0.5  # after the shell exits, how long leftovers may hold the output open
_POLL_SECONDS = 0.02
_NEWLINE = re.compile(rb"\r\n|\r|\n")
DEFAULT_TIMEOUT_HINT = (
    "If the command needs longer, run it with background=True (its result then arrives later "
    "as an event) or give a larger timeout_seconds."
)


async def run_process(
    handle: TaskHandle | None,
    command: str | None = None,
    *,
    argv: Sequence[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - a timeout is reported in the result, not raised
    kill_grace: float = KILL_GRACE_SECONDS,
    timeout_hint: str = DEFAULT_TIMEOUT_HINT,
) -> ToolResult:
    """Run `bash -c command` (or `argv` as given) in its own process group; return its result.

    Pass exactly one of `command` and `argv`; `argv` is for commands already wrapped, e.g. by
    :meth:`wakeful.safety.sandbox.Sandbox.prepare`. Output lines go to `handle.add_output` as
    they arrive (so `task_status` and monitors see them live); the result keeps the first and
    last 50 lines. A non-zero exit or a timeout is an error result. Cancellation stops the whole
    process group before it propagates. Raises ToolError when the command cannot be started.
    """
    outcome = await run_to_end(
        handle,
        _argv_of(command, argv),
        cwd=cwd,
        env=env,
        timeout=timeout,
        kill_grace=kill_grace,
    )
    if outcome.timed_out:
        return _timeout_result(outcome.capture, timeout, timeout_hint)
    assert outcome.returncode is not None
    return _exit_result(outcome.returncode, outcome.capture, outcome.leftovers_stopped)


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """How a process run ended, and its captured output; `returncode` is None after a timeout."""

    returncode: int | None
    timed_out: bool
    leftovers_stopped: bool
    capture: OutputCapture


async def run_to_end(
    handle: TaskHandle | None,
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - a timeout is reported in the outcome
    kill_grace: float = KILL_GRACE_SECONDS,
    capture: OutputCapture | None = None,
) -> ProcessOutcome:
    """Run `argv` in a new process group until it ends, times out or is cancelled.

    The lower half of :func:`run_process`, for tools that shape their own result (and may pass
    an :class:`OutputCapture` that keeps more lines or saves the whole output to a file).
    """
    capture = capture if capture is not None else OutputCapture(handle)
    await start_reaper()
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=DEVNULL,
            stdout=PIPE,
            stderr=STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(
            f"The command could not be started: {exc}. Check that the working directory "
            f"{str(cwd or os.getcwd())!r} exists and that {_program(argv)} is installed on the "
            "PATH."
        ) from exc
    leftovers_stopped = False
    timed_out = False
    # If the runtime dies before this call ends, the reaper stops the group (see .reaper).
    reaper.watch_group(process.pid)
    if handle is not None:  # for the system channel's runaway-task check
        handle.watch_process_group(process.pid)
    try:
        with anyio.move_on_after(timeout) as deadline:
            leftovers_stopped = await _run_to_exit(process, capture, kill_grace)
        timed_out = deadline.cancelled_caught
    finally:
        with anyio.CancelScope(shield=True):
            if await stop_process_group(process, kill_grace):
                leftovers_stopped = True
            reaper.forget_group(process.pid)
            if handle is not None:
                handle.forget_process_group(process.pid)
            await process.aclose()
            if capture.saved is not None:
                await capture.saved.aclose()
    capture.finish()
    return ProcessOutcome(
        returncode=None if timed_out else process.returncode,
        timed_out=timed_out,
        leftovers_stopped=leftovers_stopped,
        capture=capture,
    )


def _program(argv: Sequence[str]) -> str:
    return "bash" if argv[0] == "bash" else repr(argv[0])


def _argv_of(command: str | None, argv: Sequence[str] | None) -> list[str]:
    if (command is None) == (argv is None):
        raise UserError("run_process needs exactly one of `command` (a bash line) and `argv`.")
    if argv is not None:
        if not argv:
            raise UserError("run_process got an empty `argv`; give the program and arguments.")
        return list(argv)
    assert command is not None
    return ["bash", "-c", command]


async def _run_to_exit(process: Process, capture: OutputCapture, kill_grace: float) -> bool:
    """Read output until the shell has exited and the output is closed; True if leftovers ran."""
    assert process.stdout is not None
    leftovers_stopped = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture.read, process.stdout)
        await process.wait()
        # Background processes the shell started may still hold the output open; give them a
        # moment to finish writing, then stop them rather than wait for them forever.
        with anyio.move_on_after(OUTPUT_DRAIN_SECONDS):
            await capture.closed.wait()
        if not capture.closed.is_set():
            leftovers_stopped = await stop_process_group(process, kill_grace)
            with anyio.move_on_after(OUTPUT_DRAIN_SECONDS):
                await capture.closed.wait()
        # A process that left the group (setsid) can keep the pipe open; stop reading it.
        tg.cancel_scope.cancel()
    return leftovers_stopped


async def stop_process_group(process: Process, grace: float = KILL_GRACE_SECONDS) -> bool:
    """Stop every process in `process`'s group and reap `process`; True if any was running.

    Sends SIGTERM, waits up to `grace` seconds for the group to go, then sends SIGKILL. Call it
    from a shielded cancel scope: it must finish even when the caller was cancelled.
    """
    pgid = process.pid  # the leader of a new session: its pid is the group id
    # An unreaped shell is still a member, so the group is alive without scanning /proc (which
    # costs tens of milliseconds on a machine with a thousand processes).
    if process.returncode is None:
        alive = True
    else:
        alive = await _group_is_alive(pgid)
    if not alive:
        await process.wait()
        return False
    _signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(grace):
        if process.returncode is None:
            await process.wait()  # event-driven; usually the whole group goes with the shell
        await _wait_for_group_exit(pgid)
    if await _group_is_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
        # SIGKILL cannot be ignored; wait (briefly) until the kernel has taken them all.
        with anyio.move_on_after(1.0):
            await _wait_for_group_exit(pgid)
    await process.wait()
    return True


async def _wait_for_group_exit(pgid: int) -> None:
    # Polling: the kernel offers no event for "a process group became empty".
    while True:
        if not await _group_is_alive(pgid):
            return
        await anyio.sleep(_POLL_SECONDS)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass  # the group is already gone
    except PermissionError:
        # killpg fails with EPERM only if it could signal no member (all changed user).
        log.warning("could not send %s to process group %d: permission denied", signum.name, pgid)


async def _group_is_alive(pgid: int) -> bool:
    return await anyio.to_thread.run_sync(group_has_live_members, pgid)


def group_has_live_members(pgid: int) -> bool:
    """Whether a process group still has a member that is not a zombie.

    `killpg(pgid, 0)` alone also counts zombies, and where PID 1 does not reap orphans (many
    containers) an orphaned zombie stays in the group for good; on Linux, /proc tells them apart.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_bytes()
            except OSError:
                continue  # the process ended while we looked
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            fields = stat[stat.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False


@dataclass
class OutputFile:
    """Where the whole output of a command is saved as it is read, up to `limit_bytes`.

    Open it with :meth:`create` before the command starts, so the command cannot swap the path
    for a symlink first; what passes the limit is dropped and counted, so a command that prints
    forever cannot fill the disk.
    """

    path: Path
    limit_bytes: int
    written: int = 0
    dropped: int = 0
    _stream: FileWriteStream | None = None

    @classmethod
    async def create(cls, path: Path, limit_bytes: int) -> OutputFile:
        """Create (or empty) the file at `path`, refusing to follow a symlink there."""

        def open_file() -> BinaryIO:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.fdopen(os.open(path, flags, 0o644), "wb")

        saved = cls(path, limit_bytes)
        saved._stream = FileWriteStream(await anyio.to_thread.run_sync(open_file))
        return saved

    @property
    def complete(self) -> bool:
        return self.dropped == 0

    async def write(self, data: bytes) -> None:
        room = self.limit_bytes - self.written
        kept = data[: max(room, 0)]
        self.dropped += len(data) - len(kept)
        if kept and self._stream is not None:
            await self._stream.send(kept)
            self.written += len(kept)

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()
            self._stream = None


@dataclass
class OutputCapture:
    """Splits a byte stream into lines, feeds them to a task, and keeps a head and a tail.

    `head_lines` and `tail_lines` say how many lines are kept (50 each by default); `saved`, if
    given, receives every byte as it is read.
    """

    handle: TaskHandle | None
    head_lines: int = HEAD_LINES
    tail_lines: int = TAIL_LINES
    saved: OutputFile | None = None
    head: list[str] = field(default_factory=list)
    tail: deque[str] = field(default_factory=deque)
    line_count: int = 0
    undecodable: bool = False
    closed: anyio.Event = field(default_factory=anyio.Event)
    _pending: bytes = b""

    def __post_init__(self) -> None:
        self.tail = deque(self.tail, maxlen=self.tail_lines)

    async def read(self, stream: ByteReceiveStream) -> None:
        """Consume `stream` to its end; `closed` is set when it ends."""
        async for chunk in stream:
            if self.saved is not None:
                await self.saved.write(chunk)
            before = self.handle.percent if self.handle is not None else None
            self.feed(chunk)
            if self.handle is not None and self.handle.percent != before:
                await self.handle.report_progress(self.handle.percent)
        self.closed.set()

    def feed(self, data: bytes) -> None:
        buffer = self._pending + data
        start = 0
        for match in _NEWLINE.finditer(buffer):
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # maybe the first half of "\r\n": wait for the next chunk
            self._add(buffer[start : match.start()])
            start = match.end()
        buffer = buffer[start:]
        while len(buffer) > MAX_LINE_BYTES:
            cut = MAX_LINE_BYTES
            while cut > 0 and buffer[cut] & 0xC0 == 0x80:  # don't split a UTF-8 character
                cut -= 1
            cut = cut or MAX_LINE_BYTES
            self._add(buffer[:cut])
            buffer = buffer[cut:]
        self._pending = buffer

    def finish(self) -> None:
        """Take the last line, which may lack a newline."""
        if self._pending:
            self._add(self._pending.rstrip(b"\r"))
            self._pending = b""

    def _add(self, raw: bytes) -> None:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", errors="replace")
            self.undecodable = True
        self.line_count += 1
        if len(self.head) < self.head_lines:
            self.head.append(line)
        else:
            self.tail.append(line)
        if self.handle is not None:
            self.handle.add_output(line)

    @property
    def omitted(self) -> int:
        return self.line_count - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The output as shown to the model, cut visibly in the middle when long."""
        lines = [_shorten(line) for line in self.head]
        if self.omitted:
            lines.append(f"[… {self.omitted} lines omitted …]")
        lines.extend(_shorten(line) for line in self.tail)
        return "\n".join(lines)

    def summary(self) -> dict[str, Any]:
        return {
            "output_lines": self.line_count,
            "omitted_lines": self.omitted,
            "undecodable_output": self.undecodable,
        }


def _shorten(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS_SHOWN:
        return line
    extra = len(line) - MAX_LINE_CHARS_SHOWN
    return f"{line[:MAX_LINE_CHARS_SHOWN]}[… {extra} characters omitted …]"


def _with_output(header: str, capture: OutputCapture) -> str:
    text = capture.text()
    body = f"{header} Output:\n{text}" if text else f"{header} No output."
    if capture.undecodable:
        body += "\n[Note: the output was not valid UTF-8; undecodable bytes are shown as �.]"
    return body


def _exit_result(code: int, capture: OutputCapture, leftovers_stopped: bool) -> ToolResult:
    if code == 0:
        header = "Exit code 0."
    elif code < 0:
        header = f"Command was killed by signal {_signal_name(-code)} (exit code {code})."
    else:
        header = f"Command failed with exit code {code}."
    content = _with_output(header, capture)
    if leftovers_stopped:
        content += (
            "\n[Note: processes the command left running in the background were stopped when it "
            "exited. To keep a server running, run it in the foreground with background=True.]"
        )
    structured = {
        "exit_code": code,
        "timed_out": False,
        "leftovers_stopped": leftovers_stopped,
        **capture.summary(),
    }
    return ToolResult(content, is_error=code != 0, structured=structured)


def _timeout_result(capture: OutputCapture, timeout: float | None, hint: str) -> ToolResult:
    header = (
        f"Command timed out after {timeout:g} s and was stopped (its whole process group was "
        f"killed). {hint}"
    )
    structured = {"exit_code": None, "timed_out": True, **capture.summary()}
    return ToolResult(_with_output(header, capture), is_error=True, structured=structured)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)
