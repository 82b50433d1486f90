"""The long-lived Python processes behind `code_interpreter`: one per session, and who stops them.

Lifecycle. An :class:`InterpreterPool` owns the child processes of one runtime or MCP
connection. It lives in the services' state (:func:`wakeful.services.state_of`), created on the
first call, and is closed with the rest of that state when the runtime or connection ends
(:func:`wakeful.services.close_state`), which stops every interpreter. Should an owner not close
it, its children still stop on their own: the driver exits as soon as the pipe to it closes (when
this process ends), it exits after `idle_seconds` without a call, and under bubblewrap
`--die-with-parent` takes the whole sandbox down with this process.
There is no reaper task, so nothing runs in the background between calls.

Each interpreter is started in its own process group (its own PID namespace under bubblewrap)
and stopped as a whole: closing the pipe, then SIGTERM and SIGKILL to the group. A call that
times out or is cancelled stops its interpreter, because what the child is doing is unknown.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE
from types import TracebackType
from typing import Any, Literal, Protocol

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ...errors import ToolError
from ...safety.sandbox import PreparedCommand
from ...services import Services, state_of
from ...tools.process import stop_process_group
from ...tools.reaper import reaper, start_reaper
from . import interpreter_driver
from .interpreter_driver import IDLE_EXIT_STATUS
from .settings import InterpreterSettings

START_SECONDS = 60.0  # importing nothing, the driver is ready in ~50 ms; a cold sandbox is slower
MAX_REPLY_BYTES = 64 * 1024 * 1024
_STDERR_SHOWN_BYTES = 2000


class Launcher(Protocol):
    """Turns an argv into the command that runs it (under a sandbox); kept open while it lives."""

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> AbstractAsyncContextManager[PreparedCommand]: ...


@dataclass
class CellReply:
    """What the driver answered for one cell (see :mod:`.interpreter_driver`)."""

    cell: int
    stdout: str
    stderr: str
    value: str | None
    error: dict[str, str] | None
    plots: list[str]
    plot_errors: list[str]
    seconds: float


@dataclass
class Outcome:
    """How one call ended: a reply, or the interpreter stopped (and why), plus what came before.

    `previous_loss` says why this session's variables were lost before the call ran, when they
    were (the interpreter had been shut down for being idle, or had died); None when the call
    ran in the interpreter of the previous call or in the session's first one.
    """

    kind: Literal["reply", "timed_out", "died"]
    cell: int
    fresh: bool
    reply: CellReply | None = None
    death: str | None = None
    previous_loss: str | None = None


@dataclass
class LiveInterpreter:
    """One child process, its pipes, and the sandbox context it was launched in."""

    process: Process
    replies: BufferedByteReceiveStream
    stack: AsyncExitStack
    pid: int
    cells: int = 0
    last_used: float = field(default_factory=time.monotonic)

    async def run(
        self, code: str, *, time_limit: float, plot_dir: str, plot_stem: str, max_output_bytes: int
    ) -> Outcome:
        """Run one cell; a timeout or cancellation stops the interpreter before it returns."""
        self.cells += 1
        request = {
            "code": code,
            "cell": self.cells,
            "plot_dir": plot_dir,
            "plot_stem": plot_stem,
            "max_output_bytes": max_output_bytes,
        }
        finished = False
        try:
            with anyio.move_on_after(time_limit):
                outcome = await self._exchange(request)
                finished = True
                return outcome
            return Outcome("timed_out", self.cells, fresh=self.cells == 1)
        finally:
            self.last_used = time.monotonic()
            if not finished:
                with anyio.CancelScope(shield=True):
                    await self.stop()

    async def _exchange(self, request: dict[str, Any]) -> Outcome:
        assert self.process.stdin is not None
        fresh = self.cells == 1
        try:
            await self.process.stdin.send(json.dumps(request).encode() + b"\n")
            line = await self.replies.receive_until(b"\n", MAX_REPLY_BYTES)
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.EndOfStream,
            anyio.IncompleteRead,
        ) as exc:
            await self.stop()
            return Outcome("died", self.cells, fresh=fresh, death=_death(self.process, exc))
        except anyio.DelimiterNotFound as exc:
            await self.stop()
            death = f"its reply was over {MAX_REPLY_BYTES:,} bytes, so it was stopped ({exc})"
            return Outcome("died", self.cells, fresh=fresh, death=death)
        fields = json.loads(line)
        return Outcome("reply", self.cells, fresh=fresh, reply=CellReply(**fields))

    def exit_status(self) -> int | None:
        return self.process.returncode

    async def stop(self) -> None:
        """Close the pipe (the driver exits), then stop the whole process group and reap it."""
        with anyio.CancelScope(shield=True):
            if self.process.stdin is not None:
                await self.process.stdin.aclose()
            with anyio.move_on_after(0.5):
                await self.process.wait()
            await stop_process_group(self.process)
            await self.process.aclose()
            await self.stack.aclose()


def _death(process: Process, exc: BaseException | None = None) -> str:
    code = process.returncode
    if code is None:
        return f"its pipe broke ({type(exc).__name__ if exc else 'closed'})"
    if code < 0:
        return f"it was killed by signal {_signal_name(-code)}{_signal_hint(-code)}"
    if code == IDLE_EXIT_STATUS:
        return "it had been idle too long and shut itself down"
    if code > 128 and _signal_name(code - 128) != str(code - 128):
        # bubblewrap's init reports a child killed by a signal as 128 + the signal's number.
        number = code - 128
        return f"it was killed by signal {_signal_name(number)}{_signal_hint(number)}"
    return f"it exited with status {code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _signal_hint(number: int) -> str:
    if number == signal.SIGXCPU:
        return " (its CPU-time budget was used up)"
    if number == signal.SIGKILL:
        return " (perhaps out of memory or CPU time)"
    if number == signal.SIGSEGV:
        return " (a segmentation fault)"
    return ""


class InterpreterPool:
    """The live interpreters of one runtime or server, one per session.

    Calls of one session run one at a time; sessions are independent. Leaving the pool (or
    :meth:`aclose`) stops every interpreter.
    """

    def __init__(self) -> None:
        self._live: dict[str, LiveInterpreter] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._closed = False

    async def __aenter__(self) -> InterpreterPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def sessions(self) -> list[str]:
        """The sessions with a running interpreter."""
        return [s for s, live in self._live.items() if live.exit_status() is None]

    def pid_of(self, session: str) -> int | None:
        """The pid of the session's interpreter process (the sandbox's, under bubblewrap)."""
        live = self._live.get(session)
        return live.pid if live is not None and live.exit_status() is None else None

    async def run(
        self,
        session: str,
        code: str,
        *,
        launch: Launcher,
        workdir: Path,
        settings: InterpreterSettings,
        time_limit: float,
        plot_dir: str,
        plot_stem: str,
    ) -> Outcome:
        """Run `code` in the session's interpreter, starting one if it has none (or it died)."""
        if self._closed:
            raise ToolError(
                "The interpreters of this server have been shut down, so no code can run. "
                "Restart the server or runtime."
            )
        lock = self._locks.setdefault(session, anyio.Lock())
        async with lock:
            live = self._live.get(session)
            previous_loss = None
            if live is not None and live.exit_status() is not None:
                previous_loss = _death(live.process)
                await live.stop()
                del self._live[session]
                live = None
            if live is None:
                live = await _start(launch, workdir, settings)
                self._live[session] = live
            outcome = await live.run(
                code,
                time_limit=time_limit,
                plot_dir=plot_dir,
                plot_stem=plot_stem,
                max_output_bytes=settings.max_output_bytes,
            )
            if outcome.kind != "reply":
                self._live.pop(session, None)
            outcome.previous_loss = previous_loss
            return outcome

    async def reset(self, session: str) -> bool:
        """Stop the session's interpreter; True if one was running."""
        lock = self._locks.setdefault(session, anyio.Lock())
        async with lock:
            live = self._live.pop(session, None)
            if live is None:
                return False
            running = live.exit_status() is None
            await live.stop()
            return running

    async def aclose(self) -> None:
        """Stop every interpreter; later calls are refused."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            while self._live:
                _, live = self._live.popitem()
                await live.stop()


def register_pool(services: Services, pool: InterpreterPool) -> None:
    """Make `pool` the one the interpreter tools of `services` use."""
    services.state[InterpreterPool] = pool


def pool_of(services: Services) -> InterpreterPool:
    """The services' pool; one is created and registered on first use (see the module doc)."""
    return state_of(services, InterpreterPool)


def driver_argv(settings: InterpreterSettings) -> list[str]:
    """The child's command line: the driver's source through `-c`, so no path of ours is needed."""
    python = str(settings.python) if settings.python is not None else sys.executable
    source = Path(interpreter_driver.__file__).read_text(encoding="utf-8")
    return [python, "-u", "-c", source, repr(settings.idle_seconds)]


def driver_env(workdir: Path) -> dict[str, str]:
    """What the child needs beyond the sandbox's allow-list: matplotlib off-screen, a cache dir."""
    return {
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(workdir / ".wakeful" / "matplotlib"),
        "PYTHONIOENCODING": "utf-8",
    }


async def _start(launch: Launcher, workdir: Path, settings: InterpreterSettings) -> LiveInterpreter:
    stack = AsyncExitStack()
    try:
        await start_reaper()
        command = await stack.enter_async_context(
            launch(driver_argv(settings), cwd=workdir, env=driver_env(workdir))
        )
        process = await anyio.open_process(
            command.argv,
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            cwd=command.cwd,
            env=command.env,
            start_new_session=True,
        )
    except OSError as exc:
        await stack.aclose()
        raise ToolError(
            f"The Python interpreter could not be started: {exc}. Check that "
            f"{driver_argv(settings)[0]!r} exists and the workspace {str(workdir)!r} is a "
            "directory."
        ) from exc
    except BaseException:
        await stack.aclose()
        raise
    # If the runtime dies while the interpreter lives, the reaper stops it (see tools.reaper).
    reaper.watch_group(process.pid)
    stack.callback(reaper.forget_group, process.pid)
    assert process.stdout is not None
    live = LiveInterpreter(process, BufferedByteReceiveStream(process.stdout), stack, process.pid)
    ready: dict[str, Any] | None = None
    try:
        with anyio.move_on_after(START_SECONDS):
            line = await live.replies.receive_until(b"\n", 64 * 1024)
            ready = json.loads(line)
    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
        ready = None
    finally:
        if ready is None:
            with anyio.CancelScope(shield=True):
                problem = await _startup_problem(live)
    if ready is None:
        raise ToolError(
            f"The Python interpreter did not start: {problem}. Check the interpreter settings "
            "(python) and the sandbox settings; run `wakeful doctor` if it has one."
        )
    assert process.stderr is not None
    await process.stderr.aclose()  # the driver now writes its stderr into a file of its own
    return live


async def _startup_problem(live: LiveInterpreter) -> str:
    stderr = live.process.stderr
    text = b""
    if stderr is not None:
        with anyio.move_on_after(1.0):
            async for chunk in stderr:
                text += chunk
                if len(text) > _STDERR_SHOWN_BYTES:
                    break
    await live.stop()
    death = _death(live.process) if live.process.returncode is not None else "it hung"
    said = text.decode("utf-8", errors="replace").strip()[-_STDERR_SHOWN_BYTES:]
    return f"{death}; it said: {said!r}" if said else death
