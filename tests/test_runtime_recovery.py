"""A real runtime process is killed with SIGKILL mid-task; a new one recovers its store."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from process_probes import live_processes_matching
from wakeful.messages import Message, ToolMessage, UserMessage, check_trajectory
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.models.scripted import TurnFunction
from wakeful.runtime import Runtime

pytestmark = pytest.mark.slow

MARKER = "sleep 301.5"  # unique, so the test can clean up the orphaned commands

CHILD = textwrap.dedent(
    f"""
    import sys
    import anyio
    from wakeful.events import user_input
    from wakeful.messages import AssistantMessage
    from wakeful.models import FunctionModel, call, say, use
    from wakeful.runtime import Runtime

    def script(msgs, tools):
        last = msgs[-1]
        if last.role == "user" and last.content == "start":
            return use(call("run_shell", command="{MARKER}; echo bg", background=True))
        if last.role == "tool" and '"task_id"' in last.content:
            return use(call("run_shell", command="{MARKER}; echo inline"))
        return say("")

    async def main():
        async with Runtime(model=FunctionModel(script), store_path=sys.argv[1],
                           workdir=sys.argv[2]) as rt:
            await rt.submit(user_input("start"))
            session = rt.sessions["main"]
            while not (session.phase == "tools" and len(rt.tasks.running()) == 1
                       and len(session.trajectory) == 5):
                await anyio.sleep(0.01)
            await rt.submit(user_input("queued while busy 1"))
            await rt.submit(user_input("queued while busy 2"))
            print("READY", flush=True)
            await anyio.sleep(3600)

    anyio.run(main)
    """
)


def kill_orphans() -> None:
    """A SIGKILLed runtime cannot stop its commands; the test does."""
    for pid in live_processes_matching(MARKER):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def crash_a_runtime_mid_task(tmp_path: Path, db: Path) -> None:
    """Run a real runtime process until it is mid-task with events queued; SIGKILL it."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(child), str(db), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        kill_orphans()


def test_kill_9_mid_task_then_restart_recovers_everything(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    crash_a_runtime_mid_task(tmp_path, db)
    seen: list[list[Message]] = []

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        seen.append(list(msgs))
        return say("recovered")

    anyio.run(restart_and_check, db, tmp_path, script, seen)


async def restart_and_check(
    db: Path, tmp_path: Path, script: TurnFunction, seen: list[list[Message]]
) -> None:
    async with Runtime(model=FunctionModel(script), store_path=db, workdir=tmp_path) as rt:
        await rt.wait_idle()
        msgs = rt.sessions["main"].trajectory.messages
        assert check_trajectory(msgs) == []
        lost = [m for m in msgs if isinstance(m, ToolMessage) and m.status == "lost"]
        assert len(lost) == 1 and "result was lost" in lost[0].content
        # One model request saw everything: the lost inline call, the queued messages, and
        # the background task reported lost.
        assert len(seen) == 1
        batch = seen[0][-1]
        assert isinstance(batch, UserMessage) and batch.mark == "events"
        assert "[Unprocessed event 1/3] queued while busy 1" in batch.content
        assert "[Unprocessed event 2/3] queued while busy 2" in batch.content
        assert "was lost when the runtime stopped" in batch.content
        assert "1 system alert" in batch.content
        store = rt.store
        assert store is not None
        assert await store.pending_events() == []
        states = {t.description.split(";")[1].strip(): t.state for t in await store.tasks()}
        assert states == {"echo bg": "lost"}

    # A second restart finds nothing left to do and changes nothing.
    async with Runtime(model=FunctionModel(script), store_path=db, workdir=tmp_path) as rt:
        await rt.wait_idle()
        assert len(seen) == 1
        assert len(rt.sessions["main"].trajectory.messages) == len(msgs)
