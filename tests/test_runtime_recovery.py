"""A real runtime process is killed with SIGKILL mid-task; a new one recovers its store."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from process_probes import end_process, live_processes_matching
from servers.postgres import RuntimeStoreUnderTest
from wakeful.clock import FakeClock
from wakeful.events import TIMER_TRIGGER, user_input
from wakeful.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    check_trajectory,
)
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.models.scripted import TurnFunction
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store

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
        store = sys.argv[1]  # a SQLite file, or a PostgreSQL database's URL
        where = {{"store_url": store}} if "://" in store else {{"store_path": store}}
        async with Runtime(model=FunctionModel(script), workdir=sys.argv[2], **where) as rt:
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


def crash_a_runtime_mid_task(tmp_path: Path, db: Path | str) -> None:
    """Run a real runtime process until it is mid-task with events queued; SIGKILL it. `db`:
    the store's file, or its PostgreSQL database's URL."""
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
        end_process(proc)
        kill_orphans()


def test_kill_9_mid_task_then_restart_recovers_everything(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    crash_a_runtime_mid_task(tmp_path, runtime_store.location)
    seen: list[list[Message]] = []

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        seen.append(list(msgs))
        return say("recovered")

    anyio.run(restart_and_check, runtime_store.options, tmp_path, script, seen)


async def restart_and_check(
    db: dict[str, Any], tmp_path: Path, script: TurnFunction, seen: list[list[Message]]
) -> None:
    async with Runtime(model=FunctionModel(script), workdir=tmp_path, **db) as rt:
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
    async with Runtime(model=FunctionModel(script), workdir=tmp_path, **db) as rt:
        await rt.wait_idle()
        assert len(seen) == 1
        assert "main" not in rt.sessions  # nothing left to do: it loads on its next use
        assert len((await rt.session("main")).trajectory.messages) == len(msgs)


# --- timers that came due while the runtime was down ---------------------------------------------

T0 = datetime(2025, 3, 20, 12, 0, tzinfo=UTC)


def timer_events_seen(seen: Sequence[Sequence[Message]]) -> list[str]:
    """The ids of the events in the newest user messages of each request, in order: what the
    agent was shown for the first time in that request."""
    ids: list[str] = []
    for messages in seen:
        for message in reversed(messages):
            if not isinstance(message, UserMessage):
                break
            ids.extend(message.event_ids)
    return ids


async def stop_with_due_timers(
    db: dict[str, Any], tmp_path: Path, *, sessions: int, per_session: int, with_events: bool
) -> None:
    """A run that sets 0.5 s timers and stops before they fire (the clock does not move).
    `db`: the runtime's store option (`store_path` or `store_url`)."""
    model = FunctionModel(lambda msgs, tools: say(""))
    async with Runtime(model=model, workdir=tmp_path, clock=FakeClock(T0), gate=None, **db) as rt:
        assert rt.timers is not None
        for i in range(sessions):
            if with_events:
                await rt.submit(user_input("hello", session=f"s{i}"))
            for j in range(per_session):
                await rt.timers.set_timer(session=f"s{i}", note=f"n{i}.{j}", delay_seconds=0.5)
        await rt.wait_idle()


async def start_after_the_timers_came_due(
    db: dict[str, Any], tmp_path: Path, expected_fires: int, stored_fires: int
) -> dict[str, list[Message]]:
    """Restart one second later; wait until the fires reached the agents and things settle.

    `expected_fires` is how many fires the agents see in this run, `stored_fires` how many the
    store holds once it is done (from every run so far)."""
    seen: list[list[Message]] = []
    all_seen = anyio.Event()

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        seen.append(list(msgs))
        if len(set(timer_events_seen(seen))) >= expected_fires:
            all_seen.set()
        return say("")

    async with Runtime(
        model=FunctionModel(script),
        workdir=tmp_path,
        clock=FakeClock(T0 + timedelta(seconds=1)),
        gate=None,
        **db,
    ) as rt:
        store = rt.store
        assert store is not None
        with anyio.fail_after(10):
            if expected_fires:
                await all_seen.wait()
            await rt.wait_idle()
            await anyio.sleep(0.1)  # a duplicate would arrive by now
            await rt.wait_idle()
        ids = timer_events_seen(seen)
        assert len(ids) == len(set(ids)) == expected_fires
        stored = await store.recent_events(limit=10_000)
        fires = [s.event.id for s in stored if s.event.kind == TIMER_TRIGGER]
        assert len(fires) == stored_fires and set(ids) <= set(fires)
        assert await store.pending_events() == []
        assert await store.timers(active_only=True) == []
        trajectories = {s.id: list(s.trajectory.messages) for s in rt.sessions.values()}
    for messages in trajectories.values():
        assert check_trajectory(messages) == []
        carried = [i for m in messages if isinstance(m, UserMessage) for i in m.event_ids]
        assert len(carried) == len(set(carried)), carried
    return trajectories


def test_a_timer_due_while_down_reaches_each_agent_once(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    async def scenario() -> None:
        db = runtime_store.options
        await stop_with_due_timers(db, tmp_path, sessions=20, per_session=1, with_events=True)
        trajectories = await start_after_the_timers_came_due(
            db, tmp_path, expected_fires=20, stored_fires=20
        )
        assert len(trajectories) == 20
        # A second start fires nothing again.
        await start_after_the_timers_came_due(db, tmp_path, expected_fires=0, stored_fires=20)

    anyio.run(scenario)


def test_due_timers_of_sessions_without_events_do_not_stop_the_start(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    async def scenario() -> None:
        db = runtime_store.options
        await stop_with_due_timers(db, tmp_path, sessions=20, per_session=10, with_events=False)
        trajectories = await start_after_the_timers_came_due(
            db, tmp_path, expected_fires=200, stored_fires=200
        )
        assert len(trajectories) == 20
        await start_after_the_timers_came_due(db, tmp_path, expected_fires=0, stored_fires=200)

    anyio.run(scenario)


def test_recovered_sessions_that_start_new_ones_do_not_stop_the_start(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    """Recovery starts the sessions it reloaded; one may create another session meanwhile."""

    async def scenario() -> None:
        async with runtime_store.open() as store:  # events a killed runtime left pending
            await store.add_events([user_input(f"hello {i}", session=f"s{i}") for i in range(20)])
        runtime: Runtime | None = None

        async def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
            last = msgs[-1]
            if runtime is not None and isinstance(last, UserMessage) and "hello" in last.content:
                number = last.content.rsplit(" ", 1)[-1]
                await runtime.submit(user_input("from a sibling", session=f"new{number}"))
            return say("")

        runtime = Runtime(
            model=FunctionModel(script),
            workdir=tmp_path,
            with_core_tools=False,
            with_timers=False,
            gate=None,
            **runtime_store.options,
        )
        async with runtime as rt:
            with anyio.fail_after(10):
                await rt.wait_idle()
            assert {f"new{i}" for i in range(20)} <= set(rt.sessions)

    anyio.run(scenario)


# --- a reply cut off by a kill -------------------------------------------------------------------

REPLY = "Your flight is confirmed."

REPLY_CHILD = textwrap.dedent(
    f"""
    import os
    import signal
    import sys
    import anyio
    from wakeful.events import user_input
    from wakeful.messages import ToolMessage
    from wakeful.models import FunctionModel, call, say, use
    from wakeful.runtime import Runtime
    from wakeful.store.sqlite import Store

    db, inbox, workdir, moment = sys.argv[1:5]

    def script(msgs, tools):
        if msgs[-1].role == "user":
            return use(call("reply_to_user", text={REPLY!r}))
        return say("")

    if moment == "after-delivery":
        # The kill comes once the message went out, before its result is recorded.
        append = Store.append_messages

        async def append_or_die(self, session, messages):
            if any(isinstance(m, ToolMessage) and m.name == "reply_to_user" for m in messages):
                os.kill(os.getpid(), signal.SIGKILL)
            await append(self, session, messages)

        Store.append_messages = append_or_die

    async def deliver(message):
        with open(inbox, "a") as f:
            f.write(message["text"] + "\\n")
        if moment == "during-delivery":
            os.kill(os.getpid(), signal.SIGKILL)

    async def main():
        async with Runtime(model=FunctionModel(script), store_path=db, workdir=workdir,
                           gate=None) as rt:
            rt.outbox.listeners.append(deliver)
            await rt.submit(user_input("Is my flight confirmed?"))
            await anyio.sleep(30)

    anyio.run(main)
    """
)


@pytest.mark.parametrize("moment", ["after-delivery", "during-delivery"])
def test_a_reply_cut_off_by_a_kill_is_not_sent_twice(tmp_path: Path, moment: str) -> None:
    db, inbox = tmp_path / "wakeful.db", tmp_path / "inbox.txt"
    child = tmp_path / "child.py"
    child.write_text(REPLY_CHILD)
    done = subprocess.run(
        [sys.executable, str(child), str(db), str(inbox), str(tmp_path), moment],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert inbox.read_text().splitlines() == [REPLY]

    def naive(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = msgs[-1]
        # What a model does with a lost result it cannot check: it sends the message again,
        # unless the result says the user may have it.
        if (
            isinstance(last, ToolMessage)
            and last.name == "reply_to_user"
            and last.is_error
            and "may have reached the user" not in last.content
        ):
            return use(call("reply_to_user", text=REPLY))
        return say("")

    async def restart() -> list[Message]:
        async with Runtime(
            model=FunctionModel(naive), store_path=db, workdir=tmp_path, gate=None
        ) as rt:

            async def deliver(message: dict[str, Any]) -> None:
                with inbox.open("a") as f:
                    f.write(message["text"] + "\n")

            rt.outbox.listeners.append(deliver)
            await rt.wait_idle()
            return list(rt.sessions["main"].trajectory.messages)

    messages = anyio.run(restart)
    assert inbox.read_text().splitlines() == [REPLY]
    assert check_trajectory(messages) == []
    (result,) = [m for m in messages if isinstance(m, ToolMessage)]
    if moment == "after-delivery":
        assert (result.content, result.status) == ("sent", "ok")
    else:
        assert result.status == "lost" and "It was not sent again" in result.content


# --- a start loads only the sessions that have work ----------------------------------------------

IDLE_SESSIONS = 300


async def store_sessions_left_by_a_crash(db: Path) -> None:
    """Idle sessions, and one of each kind that a start must load."""
    system = SystemMessage(content="You help.")
    async with await Store.open(db, synchronous="normal") as store:
        for i in range(IDLE_SESSIONS):
            await store.append_messages(
                f"idle{i:03d}",
                [
                    system,
                    UserMessage(content=f"hi {i}", mark="event"),
                    AssistantMessage(content=f"hello {i}"),
                ],
            )
        cut = ToolCall.make("deploy", call_id="call_cut", target="prod")
        await store.append_messages(
            "cut", [system, UserMessage(content="deploy it"), AssistantMessage(tool_calls=[cut])]
        )
        await store.append_messages("asked", [system, UserMessage(content="what now?")])
        await store.add_event(user_input("news", session="idle007"))


def test_a_start_loads_only_the_sessions_that_have_work(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    seen: list[list[Message]] = []

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        seen.append(list(msgs))
        return say("ok")

    async def scenario() -> None:
        await store_sessions_left_by_a_crash(db)
        async with Runtime(
            model=FunctionModel(script),
            store_path=db,
            workdir=tmp_path,
            with_core_tools=False,
            with_timers=False,
            gate=None,
        ) as rt:
            # The cut-off call, the message awaiting the model, the pending event: no others.
            assert set(rt.sessions) == {"cut", "asked", "idle007"}
            with anyio.fail_after(10):
                await rt.wait_idle()
            assert len(seen) == 3

            # The call cut off by the crash was answered as lost, before the model saw it.
            cut = rt.sessions["cut"].trajectory.messages
            assert check_trajectory(cut) == []
            (lost,) = [m for m in cut if isinstance(m, ToolMessage)]
            assert (lost.tool_call_id, lost.status) == ("call_cut", "lost")
            (request,) = [r for r in seen if any(m.content == "deploy it" for m in r)]
            assert request[-1] == lost

            # An idle session answers its next event with its whole trajectory.
            await rt.submit(user_input("again", session="idle123"))
            with anyio.fail_after(10):
                await rt.wait_idle()
            assert len(rt.sessions) == 4
            request = seen[-1]
            assert [m.role for m in request] == ["system", "user", "assistant", "user"]
            assert request[1].content == "hi 123" and request[2].content == "hello 123"
            assert "again" in request[3].content

    anyio.run(scenario)


def test_a_start_says_which_sessions_it_asks_the_model_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "wakeful.db"

    async def scenario() -> None:
        await store_sessions_left_by_a_crash(db)
        async with Runtime(
            model=FunctionModel(lambda msgs, tools: say("ok")),
            store_path=db,
            workdir=tmp_path,
            with_core_tools=False,
            with_timers=False,
            gate=None,
        ) as rt:
            with anyio.fail_after(10):
                await rt.wait_idle()

    with caplog.at_level("WARNING", logger="wakeful.runtime.recovery"):
        anyio.run(scenario)
    said = sorted(
        r.getMessage().split(":")[0]
        for r in caplog.records
        if "asking the model again" in r.getMessage()
    )
    # The message that awaited the model and the call cut off mid-run; not the idle sessions.
    assert said == ["Session asked", "Session cut"]
