"""The system channel: the user's inactivity, background tasks past their deadline, the host's
disk, memory and CPU, and runaway tasks, each reported once as a typed event, across restarts.

Everything here is real: a SQLite store keeps the cursors and the events, background tasks run
real processes, the disk test fills a real (small) file system. Time that matters is a
FakeClock's, moved by hand; loops that really wait use generous bounds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from small_disk import fill, small_tmpfs
from wakeful.activity import UserActivity
from wakeful.channels.system import KIND, SystemChannel, SystemChannelSettings, SystemWatch
from wakeful.clock import FakeClock
from wakeful.core.channel import ChannelContext, ChannelKind, Delivery, Inbox
from wakeful.events import (
    SYSTEM_PROCESS_TIMEOUT,
    SYSTEM_RESOURCE_ALERT,
    SYSTEM_USER_INACTIVE,
    Event,
    Source,
    render_event,
    user_input,
)
from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.services import Services, state_of
from wakeful.store.sqlite import Store
from wakeful.tools.result import ToolResult
from wakeful.tools.tasks import TaskHandle, TaskManager

pytestmark = pytest.mark.anyio

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


class StoreInbox:
    """An Inbox over a real store: each event stored once by its id, a redelivery answered
    "duplicate"; new events handed to `hand` (a runtime's submit) when given."""

    def __init__(self, store: Store, hand: Callable[[Event], Awaitable[object]] | None = None):
        self.store = store
        self.hand = hand
        self.delivered: list[Event] = []
        self.answers: list[Delivery] = []
        self._arrived = anyio.Event()

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        stored = await self.store.events.add_new(event, "filtered" if filtered else "pending")
        answer: Delivery = "duplicate" if not stored else "filtered" if filtered else "stored"
        self.answers.append(answer)
        if answer == "stored":
            self.delivered.append(event)
            if self.hand is not None:
                await self.hand(event)
            self._arrived.set()
            self._arrived = anyio.Event()
        return answer

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        return [await self.deliver(event, filtered=why) for event, why in events]

    def of_kind(self, kind: str) -> list[Event]:
        return [event for event in self.delivered if event.kind == kind]

    async def first(self, kind: str, seconds: float = 20) -> Event:
        with anyio.fail_after(seconds):
            while not self.of_kind(kind):
                await self._arrived.wait()
        return self.of_kind(kind)[0]


def payload(event: Event) -> dict[str, Any]:
    assert isinstance(event.content, dict)
    return event.content


def settings(**values: Any) -> SystemChannelSettings:
    return SystemChannelSettings.model_validate(values)


def channel(
    store: Store,
    inbox: Inbox,
    workspace: Path,
    watch: SystemWatch,
    **values: Any,
) -> SystemChannel:
    context = ChannelContext(
        name="system", inbox=inbox, cursors=store.channel_cursors, workspace=workspace
    )
    return SystemChannel(settings(**values), context, watch)


@asynccontextmanager
async def opened(path: Path) -> AsyncIterator[Store]:
    store = await Store.open(path)
    try:
        yield store
    finally:
        await store.close()


async def stored_kinds(store: Store, kind: str) -> list[Event]:
    return [row.event for row in await store.events.recent(1000) if row.event.kind == kind]


# --- user inactivity -------------------------------------------------------------------------


async def test_inactivity_is_reported_once_per_period_and_the_next_says_when_the_user_was_back(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    activity = UserActivity(clock)
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        system = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(user_activity=activity, clock=clock),
            monitors=["user_inactive"],
            user_inactive_minutes=30,
        )
        started = clock.now()
        activity.saw(user_input("hello", channel="console"))
        await system.check_now()
        clock.advance(timedelta(minutes=29))
        await system.check_now()
        assert inbox.delivered == []

        clock.advance(timedelta(minutes=2))
        await system.check_now()
        for _ in range(3):  # more checks in the same period report nothing more
            clock.advance(timedelta(minutes=10))
            await system.check_now()
        [first] = inbox.delivered
        assert first.kind == SYSTEM_USER_INACTIVE
        assert first.source == Source(type="system", id="user_inactive")
        assert first.session == "main" and first.urgency == "low"
        facts = payload(first)
        assert facts["inactive_since"] == started.isoformat()
        assert facts["inactive_minutes"] == 31.0
        assert facts["threshold_minutes"] == 30.0
        assert facts["last_seen_on"] == "console"
        assert facts["previous_inactivity"] is None
        assert "not been active for 31 minutes" in facts["summary"]
        assert render_event(first).startswith("[SYSTEM user_inactive] (system.user_inactive) ")

        back = clock.advance(timedelta(minutes=5))  # 66 minutes after the last message
        activity.saw(user_input("I'm back", channel="matrix:home"))
        await system.check_now()
        clock.advance(timedelta(minutes=31))
        await system.check_now()

    assert len(inbox.delivered) == 2
    second = payload(inbox.delivered[1])
    assert second["inactive_since"] == back.isoformat()
    assert second["last_seen_on"] == "matrix:home"
    assert second["previous_inactivity"] == {
        "inactive_since": started.isoformat(),
        "active_again_at": back.isoformat(),
        "inactive_minutes": 66.0,
    }


async def test_only_the_users_own_events_count_as_activity() -> None:
    clock = FakeClock()
    activity = UserActivity(clock)
    activity.saw(Event(kind="email.received", source=Source(type="contact", id="bob@x.org")))
    activity.saw(Event(kind="tool.result", source=Source(type="tool", id="task_1")))
    assert activity.last_seen is None
    activity.saw(user_input("hi", channel="console"))
    assert activity.last_seen == clock.now() and activity.last_channel == "console"


async def test_a_restart_does_not_report_the_same_inactivity_again(tmp_path: Path) -> None:
    clock = FakeClock()
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        watch = SystemWatch(user_activity=UserActivity(clock), clock=clock)
        first_run = channel(
            store, inbox, tmp_path, watch, monitors=["user_inactive"], user_inactive_minutes=5
        )
        await first_run.check_now()
        clock.advance(timedelta(minutes=6))
        await first_run.check_now()
        assert len(inbox.delivered) == 1

    # The runtime starts again: a new channel, a new (empty) activity record, the same store.
    clock.advance(timedelta(minutes=60))
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        watch = SystemWatch(user_activity=UserActivity(clock), clock=clock)
        second_run = channel(
            store, inbox, tmp_path, watch, monitors=["user_inactive"], user_inactive_minutes=5
        )
        await second_run.check_now()
        assert inbox.delivered == []
        assert len(await stored_kinds(store, SYSTEM_USER_INACTIVE)) == 1


async def test_a_new_period_after_a_restart_keeps_the_earlier_one_as_its_previous(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with opened(tmp_path / "w.db") as store:
        watch = SystemWatch(user_activity=UserActivity(clock), clock=clock)
        first_run = channel(
            store,
            StoreInbox(store),
            tmp_path,
            watch,
            monitors=["user_inactive"],
            user_inactive_minutes=5,
        )
        await first_run.check_now()
        clock.advance(timedelta(minutes=6))
        await first_run.check_now()
    async with opened(tmp_path / "w.db") as store:
        activity = UserActivity(clock)
        inbox = StoreInbox(store)
        second_run = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(user_activity=activity, clock=clock),
            monitors=["user_inactive"],
            user_inactive_minutes=5,
        )
        activity.saw(user_input("morning"))
        await second_run.check_now()
        clock.advance(timedelta(minutes=6))
        await second_run.check_now()
    [event] = inbox.delivered
    assert payload(event)["previous_inactivity"]["inactive_minutes"] == 6.0


async def test_the_running_channel_reports_inactivity_on_its_own(tmp_path: Path) -> None:
    activity = UserActivity()
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        system = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(user_activity=activity),
            monitors=["user_inactive"],
            user_inactive_minutes=0.005,  # 0.3 s
            check_interval_seconds=0.05,
        )
        assert system.health().state == "stopped"
        async with anyio.create_task_group() as tg:
            await tg.start(system.run)
            assert system.health().state == "running"
            event = await inbox.first(SYSTEM_USER_INACTIVE)
            await anyio.sleep(0.3)  # several more checks
            tg.cancel_scope.cancel()
    assert payload(event)["inactive_minutes"] >= 0.0
    assert len(inbox.of_kind(SYSTEM_USER_INACTIVE)) == 1
    assert system.health().state == "stopped"


# --- background tasks past their deadline -----------------------------------------------------


async def test_a_background_task_past_its_deadline_wakes_the_agent_once_and_it_cancels_it(
    tmp_path: Path,
) -> None:
    """Through a whole runtime: the model starts a slow command in the background; past the
    default deadline the system channel tells its session, which cancels the task."""
    seen: list[str] = []

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = messages[-1]
        if isinstance(last, UserMessage) and last.content == "build it":
            return use(call("run_shell", command="echo compiling; sleep 60", background=True))
        if isinstance(last, UserMessage) and "(system.process_timeout)" in last.content:
            seen.append(last.content)
            facts, _ = json.JSONDecoder().raw_decode(last.content.split(") ", 1)[1])
            task_id = facts["task_id"]
            return use(call("cancel_task", task_id=task_id, reason="it hangs"))
        if isinstance(last, ToolMessage) and last.name == "cancel_task":
            return say("Stopped the hung build.")
        return say("")

    runtime = Runtime(model=FunctionModel(script), workdir=tmp_path, store_path=tmp_path / "w.db")
    async with runtime as rt, opened(tmp_path / "inbox.db") as seen_ids:
        assert rt.store is not None
        inbox = StoreInbox(seen_ids, hand=rt.submit)
        system = channel(
            rt.store,
            inbox,
            tmp_path,
            SystemWatch.of_services(rt.services),
            monitors=["process_timeout"],
            task_deadline_minutes=0.01,  # 0.6 s
            check_interval_seconds=0.05,
        )
        async with anyio.create_task_group() as tg:
            await tg.start(system.run)
            await rt.submit(user_input("build it"))
            event = await inbox.first(SYSTEM_PROCESS_TIMEOUT)
            with anyio.fail_after(20):
                while rt.tasks.running():  # noqa: ASYNC110 - until the agent cancelled it
                    await anyio.sleep(0.05)
            await anyio.sleep(0.2)  # more checks: the task is not reported again
            tg.cancel_scope.cancel()
        await rt.wait_idle()
        [task] = rt.tasks.list()
        events = await stored_kinds(rt.store, SYSTEM_PROCESS_TIMEOUT)

    facts = payload(event)
    assert facts["task_id"] == task.id and event.session == "main"
    assert facts["tool"] == "run_shell"
    assert facts["command"] == "echo compiling; sleep 60"
    assert facts["last_output_line"] == "compiling"
    assert facts["running_seconds"] >= 0.6
    assert facts["deadline_seconds"] == 0.6 and facts["deadline_from"] == "channel default"
    assert any("cancel_task" in option for option in facts["options"])
    assert f"Background task {task.id} (run_shell: echo compiling; sleep 60)" in facts["summary"]
    assert len(seen) == 1 and len(events) == 1
    assert task.state == "cancelled" and task.cancel_reason == "it hangs"


async def test_a_tasks_own_deadline_wins_over_the_default(tmp_path: Path) -> None:
    clock = FakeClock()
    release = anyio.Event()

    async def slow(handle: TaskHandle) -> ToolResult:
        handle.add_output("step 1 of 3")
        await release.wait()
        return ToolResult("done")

    async with opened(tmp_path / "w.db") as store, anyio.create_task_group() as tg:
        inbox = StoreInbox(store)
        tasks = TaskManager(tg, inbox.deliver)
        own = tasks.start(
            session="work", tool="export", run=slow, background=True, deadline_seconds=0.1
        )
        other = tasks.start(session="work", tool="import", run=slow, background=True)
        system = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(tasks=tasks, clock=clock),
            monitors=["process_timeout"],
            task_deadline_minutes=60,
        )
        await anyio.sleep(0.2)
        await system.check_now()
        await system.check_now()
        release.set()
    [event] = inbox.of_kind(SYSTEM_PROCESS_TIMEOUT)
    facts = payload(event)
    assert facts["task_id"] == own.id != other.id
    assert facts["deadline_seconds"] == 0.1 and facts["deadline_from"] == "task"
    assert facts["last_output_line"] == "step 1 of 3"
    assert event.session == "work"


# --- runaway background tasks ----------------------------------------------------------------


def start_process(argv: list[str]) -> Callable[[TaskHandle], Awaitable[ToolResult]]:
    """A task runner that runs `argv` as a process group of the task, as the shell tools do."""

    async def run(handle: TaskHandle) -> ToolResult:
        process = await anyio.open_process(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        handle.watch_process_group(process.pid)
        try:
            await process.wait()
        finally:
            with anyio.CancelScope(shield=True):
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
                await process.aclose()
            handle.forget_process_group(process.pid)
        return ToolResult("exited")

    return run


@linux_only
@pytest.mark.parametrize(
    ("measure", "program", "limits"),
    [
        ("task_cpu", "while True: pass", {"task_cpu_seconds": 0.5}),
        (
            "task_memory",
            "import time; block = bytearray(96 * 2**20); block[::4096] = b'x' * len(block[::4096]);"
            " time.sleep(60)",
            {"task_memory_mb": 64, "task_cpu_seconds": 0},
        ),
    ],
)
async def test_a_runaway_task_is_reported_once_with_its_processes(
    tmp_path: Path, measure: str, program: str, limits: dict[str, float]
) -> None:
    async with opened(tmp_path / "w.db") as store, anyio.create_task_group() as tg:
        inbox = StoreInbox(store)
        tasks = TaskManager(tg, inbox.deliver)
        burner = tasks.start(
            session="main",
            tool="run_shell",
            description="python burn.py",
            run=start_process([sys.executable, "-c", program]),
            background=True,
        )
        system = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(tasks=tasks),
            monitors=["resources"],
            disk_percent=0,
            memory_percent=0,
            cpu_percent=0,
            check_interval_seconds=0.1,
            **limits,
        )
        tg.start_soon(system.run)
        try:
            event = await inbox.first(SYSTEM_RESOURCE_ALERT)
            await system.check_now()
            await system.check_now()
        finally:
            burner.cancel("the test is over")
            tg.cancel_scope.cancel()
    [only] = inbox.of_kind(SYSTEM_RESOURCE_ALERT)
    facts = payload(only)
    assert only is event and only.urgency == "high"
    assert facts["measure"] == measure and facts["task_id"] == burner.id
    assert facts["value"] >= facts["threshold"]
    assert facts["command"] == "python burn.py"
    [process] = facts["top_consumers"]
    assert program[:20] in process["command"]
    assert any(burner.id in option for option in facts["options"])


# --- the host: disk, memory, CPU -------------------------------------------------------------


@linux_only
async def test_a_full_disk_alerts_once_until_it_has_gone_back_under_by_the_margin(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    with small_tmpfs(tmp_path / "disk", size_mb=4) as disk:
        async with opened(tmp_path / "w.db") as store:
            inbox = StoreInbox(store)
            system = channel(
                store,
                inbox,
                disk,
                SystemWatch(clock=clock),
                monitors=["resources"],
                disk_percent=90,
                margin_percent=10,
                memory_percent=0,
                cpu_percent=0,
                min_alert_interval_minutes=10,
            )
            await system.check_now()
            assert inbox.delivered == []

            filler = fill(disk, leave=128 * 1024)  # about 97% used
            await system.check_now()
            assert len(inbox.delivered) == 1
            first = payload(inbox.delivered[0])

            # Hovering around the line: under it, but not by the margin; then over again.
            os.truncate(filler, filler.stat().st_size - 400 * 1024)  # about 87%
            await system.check_now()
            fill(disk, leave=64 * 1024, name="filler2")
            await system.check_now()
            assert len(inbox.delivered) == 1
            assert system.health().detail.endswith(f"over threshold: disk {disk}")

            # Back well under, then over again: a second alert once the interval has passed.
            filler.unlink()
            (disk / "filler2").unlink()
            await system.check_now()
            fill(disk, leave=64 * 1024)
            await system.check_now()
            assert len(inbox.delivered) == 1  # too soon after the first
            clock.advance(timedelta(minutes=11))
            await system.check_now()
    assert len(inbox.delivered) == 2
    assert inbox.delivered[0].id != inbox.delivered[1].id
    assert first["measure"] == "disk" and first["mount"] == str(disk)
    assert first["holds"] == [f"workspace {disk}"]
    assert first["threshold_percent"] == 90 and first["clears_below_percent"] == 80
    assert first["value_percent"] >= 90 and first["free_mb"] == 0
    assert first["summary"].startswith(f"The disk at {disk} is ")


@linux_only
async def test_an_alert_still_over_after_a_restart_is_not_reported_twice(tmp_path: Path) -> None:
    used = 100 * (1 - shutil.disk_usage(tmp_path).free / shutil.disk_usage(tmp_path).total)
    if used < 2:
        pytest.skip("the temp disk is nearly empty: no threshold fits under its usage")
    clock = FakeClock()
    options: dict[str, Any] = {
        "monitors": ["resources"],
        "disk_percent": round(used - 1, 2),
        "memory_percent": 0,
        "cpu_percent": 0,
    }
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        await channel(store, inbox, tmp_path, SystemWatch(clock=clock), **options).check_now()
        assert len(inbox.delivered) == 1
    clock.advance(timedelta(hours=1))
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        second_run = channel(store, inbox, tmp_path, SystemWatch(clock=clock), **options)
        await second_run.check_now()
        await second_run.check_now()
        assert inbox.answers == ["duplicate"]  # delivered again by id, recognised, dropped
        assert len(await stored_kinds(store, SYSTEM_RESOURCE_ALERT)) == 1


@linux_only
async def test_memory_over_its_threshold_names_the_top_consumers(tmp_path: Path) -> None:
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        system = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(),
            monitors=["resources"],
            disk_percent=0,
            cpu_percent=0,
            memory_percent=0.1,  # any host uses more
            top_consumers=3,
            session="ops",
        )
        await system.check_now()
    [event] = inbox.delivered
    facts = payload(event)
    assert event.session == "ops"
    assert facts["measure"] == "memory" and facts["value_percent"] > 0.1
    assert facts["total_mb"] > facts["available_mb"] > 0
    assert len(facts["top_consumers"]) == 3
    sizes = [consumer["rss_mb"] for consumer in facts["top_consumers"]]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 0
    assert all(consumer["command"] for consumer in facts["top_consumers"])


@linux_only
async def test_a_busy_cpu_names_the_process_that_keeps_it_busy(tmp_path: Path) -> None:
    async with opened(tmp_path / "w.db") as store:
        inbox = StoreInbox(store)
        system = channel(
            store,
            inbox,
            tmp_path,
            SystemWatch(),
            monitors=["resources"],
            disk_percent=0,
            memory_percent=0,
            cpu_percent=1,
            top_consumers=50,  # a busy shared machine has other busy processes
            check_interval_seconds=1,
        )
        burner = await anyio.open_process([sys.executable, "-c", "while True: pass  # busy"])
        try:
            await system.check_now()  # the first reading: nothing to compare with yet
            await anyio.sleep(0.5)
            await system.check_now()
        finally:
            burner.kill()
            await burner.wait()
            await burner.aclose()
    [event] = inbox.delivered
    facts = payload(event)
    assert facts["measure"] == "cpu" and facts["value_percent"] >= 1
    assert any(c["pid"] == burner.pid and c["cpu_percent"] > 0 for c in facts["top_consumers"])


async def test_a_disk_path_that_is_gone_degrades_the_channel_and_says_which(
    tmp_path: Path,
) -> None:
    async with opened(tmp_path / "w.db") as store:
        system = channel(
            store,
            StoreInbox(store),
            tmp_path,
            SystemWatch(),
            monitors=["resources"],
            memory_percent=0,
            cpu_percent=0,
            disk_paths=[str(tmp_path / "gone")],
        )
        async with anyio.create_task_group() as tg:
            await tg.start(system.run)
            health = system.health()
            tg.cancel_scope.cancel()
    assert health.state == "degraded"
    assert f"disk path ({tmp_path / 'gone'}): No such file or directory" in health.detail


# --- settings and the kind -------------------------------------------------------------------


def test_an_empty_table_watches_everything_with_defaults_for_one_machine() -> None:
    defaults = settings()
    assert defaults.monitors == ("user_inactive", "process_timeout", "resources")
    assert defaults.session == "main"
    assert (defaults.user_inactive_minutes, defaults.task_deadline_minutes) == (30, 30)
    assert (defaults.disk_percent, defaults.memory_percent, defaults.cpu_percent) == (90, 90, 95)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"monitors": ["disk"]}, "'user_inactive', 'process_timeout' or 'resources'"),
        ({"monitors": []}, "monitors is empty, so the channel would watch nothing"),
        ({"disk_paths": ["data"]}, "disk_paths must be absolute, got data"),
        ({"disk_percent": 150}, "less than or equal to 100"),
        ({"user_inactive_minutes": 0}, "greater than 0"),
        ({"interval": 5}, "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_are_refused_naming_the_problem(values: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as caught:
        settings(**values)
    assert expected in str(caught.value)


async def test_the_kind_builds_a_channel_that_says_what_it_cannot_watch(tmp_path: Path) -> None:
    kind: ChannelKind = KIND
    assert kind.kind == "system" and kind.settings_model is SystemChannelSettings
    async with opened(tmp_path / "w.db") as store:
        context = ChannelContext(
            name="system",
            inbox=StoreInbox(store),
            cursors=store.channel_cursors,
            workspace=tmp_path,
        )
        built = kind.build(settings(disk_percent=0, memory_percent=0, cpu_percent=0), context)
        async with anyio.create_task_group() as tg:
            await tg.start(built.run)
            health = built.health()
            tg.cancel_scope.cancel()
    assert built.name == "system"
    assert health.state == "degraded"
    assert "cannot watch user_inactive (the runtime shares no user activity)" in health.detail
    assert "cannot watch process_timeout (the runtime shares no task manager)" in health.detail


def test_the_documented_example_is_a_valid_table() -> None:
    import tomllib

    from wakeful.channels.system import settings as settings_module

    doc = settings_module.__doc__ or ""
    example = doc.split("::\n", 1)[1].split("\n\n", 1)[0]
    table = tomllib.loads(textwrap.dedent(example))["channels"]["system"][0]
    assert settings(**table) == settings()


@dataclass(frozen=True)
class RuntimeChannelContext(ChannelContext):
    """The context the channel registry gives a channel of a running runtime: the
    ChannelContext with the runtime's services (until ChannelContext carries them itself)."""

    services: Services | None = None


async def test_the_kind_watches_what_a_runtimes_services_share(tmp_path: Path) -> None:
    runtime = Runtime(model=ScriptedModel([]), workdir=tmp_path, store_path=tmp_path / "w.db")
    async with runtime as rt:
        assert rt.store is not None
        context = RuntimeChannelContext(
            name="system",
            inbox=StoreInbox(rt.store),
            cursors=rt.store.channel_cursors,
            workspace=tmp_path,
            services=rt.services,
        )
        built = KIND.build(settings(), context)
        async with anyio.create_task_group() as tg:
            await tg.start(built.run)
            health = built.health()
            tg.cancel_scope.cancel()
        shared = state_of(rt.services, UserActivity)
    assert health.state == "running", health.detail
    assert health.detail == "checks every 30 s"
    assert built.watch.tasks is rt.tasks
    assert built.watch.user_activity is shared
    assert built.watch.store_path == tmp_path / "w.db"
