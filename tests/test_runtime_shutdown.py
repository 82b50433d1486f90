"""What a background task still running when the runtime stops becomes, and what the agent is told
at the next start: a clean stop cancels it (stopped, recorded, reported as stopped), a kill -9
loses it (its processes killed by the reaper, reported as lost)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from process_probes import live_processes_matching
from servers.postgres import RuntimeStoreUnderTest
from wakeful.events import SYSTEM_ALERT, user_input
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.safety.sandbox import SandboxSettings
from wakeful.store.sqlite import Store
from wakeful.tools.tasks import RUNTIME_STOPPED, TaskRecord

pytestmark = pytest.mark.slow

NO_SANDBOX = [SandboxSettings(backend="none")]


def long_command(marker: str) -> str:
    return f"exec -a {marker} sleep 1000"


def start_in_background(command: str) -> FunctionModel:
    """Runs `command` in the background when asked to "start it"; says nothing otherwise."""

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = msgs[-1]
        if isinstance(last, UserMessage) and last.content.endswith("start it"):
            return use(call("run_shell", command=command, background=True))
        return say("")

    return FunctionModel(script)


async def wait_until_running(marker: str) -> None:
    with anyio.fail_after(30):
        while not live_processes_matching(marker):  # noqa: ASYNC110 - an OS process
            await anyio.sleep(0.02)


async def restart_and_read_the_first_request(
    db: Path | RuntimeStoreUnderTest, workdir: Path
) -> list[Message]:
    """Start a runtime on the store (a SQLite file, or a store under test), let it settle, and
    return the first request's messages."""
    where = db.options if isinstance(db, RuntimeStoreUnderTest) else {"store_path": db}
    seen: list[list[Message]] = []

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        seen.append(list(msgs))
        return say("noted")

    async with Runtime(
        model=FunctionModel(script), workdir=workdir, settings=NO_SANDBOX, **where
    ) as rt:
        with anyio.fail_after(10):
            await rt.wait_idle()
    assert len(seen) == 1, seen
    return seen[0]


async def stored_tasks(db: Path | RuntimeStoreUnderTest) -> list[TaskRecord]:
    if isinstance(db, RuntimeStoreUnderTest):
        async with db.open() as store:
            return await store.tasks()
    async with await Store.open(db) as sqlite_store:
        return await sqlite_store.tasks()


def test_a_clean_stop_cancels_a_running_task_and_the_next_start_says_it_was_stopped(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    db = runtime_store
    marker = f"wakeful-stop-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        model = start_in_background(long_command(marker))
        async with Runtime(model=model, workdir=tmp_path, settings=NO_SANDBOX, **db.options) as rt:
            await rt.submit(user_input("start it"))
            await wait_until_running(marker)
            (task,) = rt.tasks.running()

        # The stop stopped its processes and stored it as cancelled, with the reason.
        assert live_processes_matching(marker) == []
        (record,) = await stored_tasks(db)
        assert (record.id, record.state) == (task.id, "cancelled")
        assert record.cancel_reason == RUNTIME_STOPPED
        assert record.ended_at is not None

        request = await restart_and_read_the_first_request(db, tmp_path)
        told = request[-1]
        assert isinstance(told, UserMessage)
        assert f"Task {task.id} (run_shell" in told.content
        assert "was stopped when the runtime shut down" in told.content
        assert "run it again if it is still needed" in told.content.lower()
        assert "lost" not in told.content
        # Told once: the record stays cancelled (not lost), and a second start says nothing.
        (record,) = await stored_tasks(db)
        assert record.state == "cancelled"
        async with Runtime(
            model=ScriptedModel([]), workdir=tmp_path, settings=NO_SANDBOX, **db.options
        ) as rt:
            await rt.wait_idle()
            assert rt.sessions == {}

    anyio.run(scenario)


def test_a_clean_stop_stores_nothing_for_tasks_that_ended(tmp_path: Path) -> None:
    """Only tasks still running are reported at the next start."""
    db = tmp_path / "wakeful.db"

    async def scenario() -> None:
        model = start_in_background("echo done")
        async with Runtime(model=model, store_path=db, workdir=tmp_path, settings=NO_SANDBOX) as rt:
            await rt.submit(user_input("start it"))
            with anyio.fail_after(10):
                await rt.wait_idle()
        (record,) = await stored_tasks(db)
        assert record.state == "completed"
        async with await Store.open(db) as store:
            assert await store.pending_events() == []

    anyio.run(scenario)


RUNTIME = textwrap.dedent(
    """
    import sys
    import anyio
    from wakeful.events import user_input
    from wakeful.models import ScriptedModel, call, say, use
    from wakeful.runtime import Runtime
    from wakeful.safety.sandbox import SandboxSettings

    marker, workdir = sys.argv[1], sys.argv[2]
    command = f"(exec -a {marker}-child sleep 1000) & exec -a {marker}-fg sleep 1000"

    async def main() -> None:
        model = ScriptedModel([use(call("run_shell", command=command, background=True)), say("")])
        async with Runtime(
            model=model,
            workdir=workdir,
            store_path=workdir + "/wakeful.db",
            settings=[SandboxSettings(backend="none")],
        ) as rt:
            await rt.submit(user_input("start it"))
            await anyio.sleep(1000)

    anyio.run(main)
    """
)


def _diagnosis(runtime: subprocess.Popen[bytes], log: Path) -> str:
    """What the runtime process was doing: its log, whether it runs, and its process tree."""
    tree = subprocess.run(
        ["ps", "-o", "pid,ppid,stat,args", "--forest", "-g", str(runtime.pid)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return f"exit code: {runtime.poll()}\nlog:\n{log.read_text()}\nprocesses:\n{tree}"


def run_a_runtime_process_until(stop: signal.Signals, tmp_path: Path) -> int:
    """Run a real runtime process until its background command runs, send it `stop`, wait
    until it has exited and its command's processes are gone; return its exit code."""
    marker = f"wakeful-signal-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "runtime.py"
    script.write_text(RUNTIME)
    log = tmp_path / "runtime.log"
    with log.open("wb") as output:
        runtime = subprocess.Popen(
            [sys.executable, str(script), marker, str(tmp_path)],
            stdout=output,
            stderr=subprocess.STDOUT,
            # Ctrl-C must reach it even when the test runner was started with SIGINT ignored
            # (`nohup`, a background job): an ignored SIGINT is inherited.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        names = [f"{marker}-fg", f"{marker}-child"]  # the runtime's own argv holds `marker`

        def running() -> bool:
            # Seen twice, 0.2 s apart: the shell that starts the command holds both names in its
            # own command line for a moment, before it forks and execs them.
            if not all(map(live_processes_matching, names)):
                return False
            time.sleep(0.2)
            return all(map(live_processes_matching, names))

        deadline = time.monotonic() + 60
        while not running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(map(live_processes_matching, names)), _diagnosis(runtime, log)
        runtime.send_signal(stop)
        code = runtime.wait(timeout=20)
        deadline = time.monotonic() + 5
        while live_processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Stopped by the runtime's cleanup (SIGINT), or by the reaper (SIGKILL).
        assert live_processes_matching(marker) == [], log.read_text()
        return code
    finally:
        if runtime.poll() is None:
            runtime.kill()
            runtime.wait()
        for pid in live_processes_matching(marker):
            subprocess.run(["kill", "-9", str(pid)], check=False)


def test_ctrl_c_stops_a_running_task_and_the_next_start_says_it_was_stopped(
    tmp_path: Path,
) -> None:
    """Ctrl-C is a clean stop: asyncio cancels the main task, and the runtime's exit runs."""
    code = run_a_runtime_process_until(signal.SIGINT, tmp_path)
    assert code != 0, (tmp_path / "runtime.log").read_text()  # KeyboardInterrupt
    db = tmp_path / "wakeful.db"

    async def scenario() -> None:
        (record,) = await stored_tasks(db)
        assert (record.state, record.cancel_reason) == ("cancelled", RUNTIME_STOPPED)
        request = await restart_and_read_the_first_request(db, tmp_path)
        told = request[-1]
        assert isinstance(told, UserMessage)
        assert f"Task {record.id} (run_shell" in told.content
        assert "was stopped when the runtime shut down" in told.content
        assert "lost" not in told.content
        (record,) = await stored_tasks(db)
        assert record.state == "cancelled"

    anyio.run(scenario)


def test_a_kill_9_loses_a_running_task_and_the_next_start_says_it_was_lost(
    tmp_path: Path,
) -> None:
    assert run_a_runtime_process_until(signal.SIGKILL, tmp_path) == -signal.SIGKILL
    db = tmp_path / "wakeful.db"

    async def scenario() -> None:
        (record,) = await stored_tasks(db)
        assert record.state == "running"  # as the kill left it
        request = await restart_and_read_the_first_request(db, tmp_path)
        told = request[-1]
        assert isinstance(told, UserMessage)
        assert f"Task {record.id} (run_shell" in told.content
        assert "was lost when the runtime stopped without shutting down" in told.content
        assert "processes it started were killed with it" in told.content
        assert "was stopped when the runtime shut down" not in told.content
        (record,) = await stored_tasks(db)
        assert record.state == "lost"

    anyio.run(scenario)


def test_the_note_of_a_stopped_task_is_a_system_alert_for_its_session(tmp_path: Path) -> None:
    """The note is an ordinary pending event, stored with the task in one transaction."""
    db = tmp_path / "wakeful.db"
    marker = f"wakeful-note-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        model = start_in_background(long_command(marker))
        async with Runtime(model=model, store_path=db, workdir=tmp_path, settings=NO_SANDBOX) as rt:
            await rt.submit(user_input("start it", session="ops"))
            await wait_until_running(marker)
            (task,) = rt.tasks.running()
        async with await Store.open(db) as store:
            (note,) = await store.pending_events()
        assert (note.kind, note.session) == (SYSTEM_ALERT, "ops")
        assert note.context["task_id"] == task.id
        assert note.context["state"] == "cancelled"
        assert note.context["reason"] == RUNTIME_STOPPED

    anyio.run(scenario)
