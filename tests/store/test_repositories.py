"""The store's repositories: one per group of tables, on the one writer thread, and the rule that
the store depends on the core alone."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

import wakeful.core
import wakeful.store
from wakeful.core import records
from wakeful.core.records import TaskRecord, TimerRecord
from wakeful.core.repositories import Repositories
from wakeful.errors import StoreError
from wakeful.events import Event, Source, user_input
from wakeful.messages import UserMessage
from wakeful.store.audit import SqliteAuditLog
from wakeful.store.events import SqliteEvents
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)

# What the store may import from wakeful: the core and the small modules every layer shares.
CORE_MODULES = {"core", "errors", "events", "messages", "clock", "storable_text"}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "wakeful.db"


def wakeful_imports(path: Path) -> set[str]:
    """The top-level wakeful modules that the module at `path` imports (also those imported only
    for type checking or inside functions)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 2:
            # `from ..events import Event`, or `from .. import events`
            tops = [node.module] if node.module else [alias.name for alias in node.names]
            names.update(top.split(".")[0] for top in tops)
        else:
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            names.update(m.split(".")[1] for m in modules if m.startswith("wakeful."))
    return names


STORE_DIR = Path(str(wakeful.store.__file__)).parent
CORE_DIR = Path(str(wakeful.core.__file__)).parent


@pytest.mark.parametrize(
    "module",
    [*sorted(STORE_DIR.glob("*.py")), CORE_DIR / "records.py", CORE_DIR / "repositories.py"],
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_the_store_and_its_records_import_only_core_modules(module: Path) -> None:
    assert wakeful_imports(module) - CORE_MODULES == set()


def test_the_records_keep_their_old_import_paths() -> None:
    from wakeful.channels.timer_schedules import MissedPolicy, TimerKind
    from wakeful.channels.timer_schedules import TimerRecord as TimerFromChannels
    from wakeful.store.reader import AuditRow, IdempotencyEntry, StoredEvent
    from wakeful.store.sqlite import EventStatus
    from wakeful.tools.tasks import TaskRecord as TaskFromTools
    from wakeful.tools.tasks import TaskState

    assert TimerFromChannels is TimerRecord
    assert TaskFromTools is TaskRecord
    assert (AuditRow, IdempotencyEntry, StoredEvent) == (
        records.AuditRow,
        records.IdempotencyEntry,
        records.StoredEvent,
    )
    assert (EventStatus, TaskState, MissedPolicy, TimerKind) == (
        records.EventStatus,
        records.TaskState,
        records.MissedPolicy,
        records.TimerKind,
    )


async def test_events_and_trajectories_through_their_repositories(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        mail = Event(
            kind="email.received",
            source=Source(type="contact", id="ann@example.com"),
            content="hi",
            session="mail",
        )
        first = await store.events.add(mail)
        later = await store.events.add_many([user_input("one"), user_input("two")])
        assert later == [first + 1, first + 2]
        await store.events.keep(user_input("done"), "consumed")
        await store.events.mark([mail.id], "consumed")
        assert [e.content for e in await store.events.pending()] == ["one", "two"]
        assert [r.status for r in await store.events.recent(limit=4)] == [
            "consumed",
            "pending",
            "pending",
            "consumed",
        ]
        # The façade's methods read and write the same tables.
        assert await store.pending_events() == await store.events.pending()

        await store.trajectories.append("mail", [UserMessage(content="hi")])
        assert await store.trajectories.load("mail") == [UserMessage(content="hi")]
        assert await store.trajectories.sessions() == ["mail", "main"]
        assert await store.trajectories.sessions_to_resume() == ["mail"]


async def test_a_batch_of_events_with_a_duplicate_is_refused_whole(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        event = user_input("once")
        await store.events.add(event)
        with pytest.raises(StoreError, match="none of them was saved"):
            await store.events.add_many([user_input("new"), event])
        assert await store.events.pending() == [event]


async def test_tasks_and_timers_through_their_repositories(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        task = TaskRecord(
            id="task_1",
            session="main",
            tool="run_shell",
            call_id="call_1",
            description="make test",
            state="running",
            background=True,
            started_at=T0,
        )
        await store.task_records.save(task)
        store.task_records.save_nowait(
            TaskRecord(**{**task.to_dict(), "id": "task_2", "started_at": T0})
        )
        await store.flush()
        lost = await store.task_records.mark_running_lost()
        assert [r.id for r in lost] == ["task_1", "task_2"]
        assert {r.state for r in await store.task_records.find("main")} == {"lost"}
        assert await store.tasks() == await store.task_records.find()

        timer = TimerRecord(
            id="tmr_1", session="main", note="wake", kind="once", next_fire=T0, created_at=T0
        )
        await store.timer_records.save(timer)
        done = TimerRecord(
            id="tmr_1", session="main", note="wake", kind="once", next_fire=None, active=False
        )
        fire = Event(kind="timer.trigger", source=Source(type="system", id="tmr_1"), content="wake")
        await store.timer_records.record_fires([fire], [done])
        assert await store.timer_records.find(active_only=True) == []
        assert [t.fire_count for t in await store.timer_records.find()] == [0]
        assert await store.events.pending() == [fire]
        assert await store.timer_records.delete("tmr_1")
        assert not await store.timer_records.delete("tmr_1")


async def test_the_store_exposes_every_repository(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        whole: Repositories = store  # mypy checks that Store implements every protocol
        assert isinstance(whole.events, SqliteEvents)
        assert isinstance(whole.audit_log, SqliteAuditLog)


async def test_every_repository_refuses_use_once_the_store_is_closed(db_path: Path) -> None:
    store = await Store.open(db_path)
    await store.close()
    with pytest.raises(StoreError, match="is closed"):
        await store.events.pending()
    with pytest.raises(StoreError, match="is closed"):
        await store.timer_records.save_many([])
    with pytest.raises(StoreError, match="is closed"):
        store.task_records.save_nowait(
            TaskRecord("t", "main", "x", "c", "d", "running", True, started_at=T0)
        )
