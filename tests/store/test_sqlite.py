"""The SQLite store against real files: round trips, schema versions, damage, concurrency."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from wakeful.channels.timer_schedules import TimerRecord
from wakeful.errors import StoreError, UserError
from wakeful.events import Event, Source, user_input
from wakeful.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from wakeful.store.schema import MIGRATIONS, Migration, apply_migrations
from wakeful.store.sqlite import Store
from wakeful.tools.tasks import TaskRecord

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "wakeful.db"


def task_record(task_id: str, state: str = "running", session: str = "main") -> TaskRecord:
    return TaskRecord(
        id=task_id,
        session=session,
        tool="run_shell",
        call_id=f"call_{task_id}",
        description="make test",
        state=state,  # type: ignore[arg-type]
        background=True,
        started_at=T0,
    )


def timer_record(timer_id: str, next_fire: datetime | None, session: str = "main") -> TimerRecord:
    return TimerRecord(
        id=timer_id,
        session=session,
        note=f"note of {timer_id}",
        kind="once",
        next_fire=next_fire,
        active=next_fire is not None,
        created_at=T0,
    )


def overwrite_header(path: Path) -> bytes:
    """Replace the SQLite header of the file with garbage; return the new content."""
    data = bytearray(path.read_bytes())
    data[:16] = b"garbage garbage!"
    path.write_bytes(bytes(data))
    return bytes(data)


def raw_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    conn.close()
    return int(version)


# --- events --------------------------------------------------------------------------------------


async def test_events_round_trip_in_arrival_order(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        first = Event(
            kind="email.received",
            source=Source(type="contact", id="ann@example.com"),
            content={"subject": "hi", "body": "Ünïcode ✓"},
            context={"thread": 7},
            session="mail",
        )
        second = user_input("hello")
        third = user_input("again")
        rowids = [await store.add_event(e) for e in (first, second, third)]
        assert rowids == sorted(rowids)

        assert await store.pending_events() == [first, second, third]
        assert await store.pending_events("mail") == [first]

        await store.mark_events([second.id, "ev_unknown"], "consumed")
        assert await store.pending_events() == [first, third]

        recent = await store.recent_events(limit=2)
        assert [(r.status, r.event) for r in recent] == [("consumed", second), ("pending", third)]
        tail = await store.recent_events(after_rowid=rowids[0])
        assert [r.rowid for r in tail] == rowids[1:]
        assert await store.recent_events(session="mail") == [(rowids[0], "pending", first)]
        assert await store.sessions() == ["mail", "main"]


async def test_a_duplicate_event_is_refused_and_loses_nothing(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        event = user_input("once")
        await store.add_event(event)
        others = [user_input(f"other {i}") for i in range(20)]
        failures: list[StoreError] = []

        async def add_duplicate() -> None:
            try:
                await store.add_event(event.model_copy(update={"content": "twice"}))
            except StoreError as exc:
                failures.append(exc)

        # The duplicate shares a batch with good writes; only it may fail.
        async with anyio.create_task_group() as tg:
            for other in others[:10]:
                tg.start_soon(store.add_event, other)
            tg.start_soon(add_duplicate)
            for other in others[10:]:
                tg.start_soon(store.add_event, other)

        assert len(failures) == 1
        assert event.id in str(failures[0]) and "fresh id" in str(failures[0])
        stored = await store.pending_events()
        assert len(stored) == 21
        assert [e for e in stored if e.id == event.id] == [event]


async def test_a_lone_duplicate_is_refused_and_the_store_goes_on(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        event = user_input("once")
        await store.add_event(event)
        with pytest.raises(StoreError, match=event.id):
            await store.add_event(event)  # alone in its batch: no savepoint to fall back on
        later = user_input("later")
        await store.add_event(later)
        assert await store.pending_events() == [event, later]


async def test_add_events_stores_a_burst_all_or_none(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        kept = user_input("kept")
        await store.add_event(kept)
        burst = [user_input(f"burst {i}") for i in range(5)]
        rowids = await store.add_events(burst)
        assert rowids == sorted(rowids) and len(rowids) == 5
        bad = [user_input("fine"), kept, user_input("also fine")]  # kept's id is taken
        with pytest.raises(StoreError, match=kept.id):
            await store.add_events(bad)
        assert await store.pending_events() == [kept, *burst]


async def test_invalid_status_is_refused_before_anything_changes(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        event = user_input("keep me")
        await store.add_event(event)
        with pytest.raises(UserError, match="'done'"):
            await store.mark_events([event.id], "done")
        assert await store.pending_events() == [event]


async def test_many_concurrent_writers_are_all_persisted_in_order(db_path: Path) -> None:
    # How fast is bench/event_throughput.py's to say (a timed assertion here failed under load).
    writers, each = 100, 40
    batches = [
        [user_input(f"{w}:{i}", session=f"s{w % 7}") for i in range(each)] for w in range(writers)
    ]

    async def writer(events: list[Event]) -> None:
        for event in events:
            await store.add_event(event)

    async with await Store.open(db_path) as store, anyio.create_task_group() as tg:
        for events in batches:
            tg.start_soon(writer, events)
    with Store.read_only(db_path) as reader:
        stored = reader.pending_events()
    assert {e.id for e in stored} == {e.id for b in batches for e in b}
    # Each writer's own events keep their order.
    first_writer = [e.id for e in stored if e.text.startswith("0:")]
    assert first_writer == [e.id for e in batches[0]]


async def test_a_cancelled_writer_still_has_its_write_committed(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        event = user_input("committed anyway")
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.add_event(event)
        assert await store.pending_events() == [event]


# --- trajectories --------------------------------------------------------------------------------


async def test_trajectory_round_trip_per_session(db_path: Path) -> None:
    call = ToolCall.make("run_shell", command="ls")
    messages: list[Message] = [
        SystemMessage(content="You are helpful."),
        UserMessage(content="list files", event_ids=["ev_1"], mark="event"),
        AssistantMessage(content="", thinking="let me look", tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name="run_shell", content="a\nb", status="placeholder"),
    ]
    async with await Store.open(db_path) as store:
        await store.append_messages("main", messages[:2])
        await store.append_messages("other", [UserMessage(content="elsewhere")])
        await store.append_messages("main", messages[2:])
    async with await Store.open(db_path) as store:
        assert await store.load_trajectory("main") == messages
        assert await store.load_trajectory("other") == [UserMessage(content="elsewhere")]
        assert await store.load_trajectory("nobody") == []
        assert await store.sessions() == ["main", "other"]


# --- tasks ---------------------------------------------------------------------------------------


async def test_tasks_upsert_and_nowait_saves_are_ordered(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.save_task(task_record("task_a"))
        record = task_record("task_b", session="other")
        store.save_task_nowait(record)
        record.state = "completed"
        record.result = "done"
        record.ended_at = T0 + timedelta(seconds=5)
        store.save_task_nowait(record)
        await store.flush()
        assert await store.tasks() == [task_record("task_a"), record]
        assert await store.tasks("other") == [record]


async def test_running_tasks_become_lost_on_restart(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.save_task(task_record("task_run1"))
        await store.save_task(task_record("task_done", state="completed"))
        await store.save_task(task_record("task_run2", session="other"))

    async with await Store.open(db_path) as store:
        lost = await store.mark_running_tasks_lost()
        assert [r.id for r in lost] == ["task_run1", "task_run2"]
        assert all(r.state == "lost" and r.ended_at is not None for r in lost)
        states = {r.id: r.state for r in await store.tasks()}
        assert states == {"task_run1": "lost", "task_done": "completed", "task_run2": "lost"}
        assert await store.mark_running_tasks_lost() == []


# --- timers --------------------------------------------------------------------------------------


async def test_timers_save_list_delete(db_path: Path) -> None:
    late = timer_record("tmr_late", T0 + timedelta(hours=2))
    soon = timer_record("tmr_soon", T0 + timedelta(hours=1), session="other")
    done = timer_record("tmr_done", None)
    async with await Store.open(db_path) as store:
        await store.save_timers([late, soon, done])
    async with await Store.open(db_path) as store:
        assert await store.timers() == [soon, late, done]
        assert await store.timers(active_only=True) == [soon, late]
        assert await store.timers("other") == [soon]
        assert await store.delete_timer("tmr_soon") is True
        assert await store.delete_timer("tmr_soon") is False
        assert [t.id for t in await store.timers()] == ["tmr_late", "tmr_done"]


async def test_timer_fires_and_the_timers_advance_are_stored_together_or_not_at_all(
    db_path: Path,
) -> None:
    hourly = timer_record("tmr_hourly", T0 + timedelta(hours=1))
    once = timer_record("tmr_once", T0)
    async with await Store.open(db_path) as store:
        await store.save_timers([hourly, once])
        taken = user_input("already stored")
        await store.add_event(taken)
        fire = Event(kind="timer.trigger", source=Source(type="system", id="tmr_once"))
        done = timer_record("tmr_once", None)
        advanced = timer_record("tmr_hourly", T0 + timedelta(hours=2))
        # One event cannot be stored (its id is taken): nothing of the write is kept.
        clash = Event(id=taken.id, kind="timer.trigger", source=fire.source)
        with pytest.raises(StoreError, match="already stored"):
            await store.record_timer_fires([fire, clash], [done, advanced])
        assert await store.timers() == [once, hourly]
        assert [e.id for e in await store.pending_events()] == [taken.id]

        await store.record_timer_fires([fire], [done, advanced])
        assert await store.timers() == [advanced, done]
        assert [e.id for e in await store.pending_events()] == [taken.id, fire.id]


# --- opening, versions and damage ----------------------------------------------------------------


async def test_a_new_store_is_at_the_latest_version_in_wal_mode(db_path: Path) -> None:
    async with await Store.open(db_path):
        pass
    assert raw_version(db_path) == len(MIGRATIONS)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with Store.read_only(db_path) as reader:
        assert reader.schema_version() == len(MIGRATIONS)


async def test_a_store_from_a_newer_wakeful_is_refused_untouched(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.add_event(user_input("precious"))
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', '2030-01-01')")
    conn.commit()
    conn.close()

    with pytest.raises(StoreError, match=r"schema version 99.*newer wakeful.*Upgrade wakeful"):
        await Store.open(db_path)
    with pytest.raises(StoreError, match="schema version 99"):
        Store.read_only(db_path)
    assert raw_version(db_path) == 99
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 1
    conn.close()


def test_migrations_apply_in_order_and_a_failing_step_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "migrate.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert apply_migrations(conn, path) == len(MIGRATIONS)
        conn.execute("INSERT INTO meta (key, value) VALUES ('keep', 'me')")

        extra = Migration("add notes", ("CREATE TABLE notes (id INTEGER PRIMARY KEY)",))
        assert apply_migrations(conn, path, [*MIGRATIONS, extra]) == len(MIGRATIONS) + 1
        assert apply_migrations(conn, path, [*MIGRATIONS, extra]) == len(MIGRATIONS) + 1

        broken = Migration(
            "half done", ("CREATE TABLE half (id INTEGER)", "ALTER TABLE nowhere ADD x")
        )
        with pytest.raises(StoreError, match=f"left at version {len(MIGRATIONS) + 1}, unchanged"):
            apply_migrations(conn, path, [*MIGRATIONS, extra, broken])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "notes" in tables and "half" not in tables
        assert conn.execute("SELECT value FROM meta WHERE key = 'keep'").fetchone() == ("me",)
    finally:
        conn.close()


async def test_a_version_1_store_is_upgraded_in_place_keeping_its_data(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    event = user_input("from before the upgrade")
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        assert apply_migrations(conn, db_path, MIGRATIONS[:1]) == 1
        conn.execute(
            "INSERT INTO events (id, session, kind, ts, status, data) VALUES (?, ?, ?, ?, ?, ?)",
            (event.id, event.session, event.kind, event.ts.isoformat(), "pending", event.to_json()),
        )
        record = task_record("t_old", state="done")
        conn.execute(
            "INSERT INTO tasks (id, session, state, data) VALUES (?, ?, ?, ?)",
            (record.id, record.session, record.state, json.dumps(record.to_dict())),
        )
    finally:
        conn.close()
    with pytest.raises(
        StoreError, match=f"schema version 1 and this wakeful needs {len(MIGRATIONS)}"
    ):
        Store.read_only(db_path)
    assert raw_version(db_path) == 1

    async with await Store.open(db_path) as store:
        assert await store.pending_events() == [event]
        assert [t.id for t in await store.tasks()] == ["t_old"]
        assert await store.idempotency_entry("send_email", "k1") is None
    assert raw_version(db_path) == len(MIGRATIONS)
    conn = sqlite3.connect(db_path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    descriptions = conn.execute("SELECT version, description FROM schema_version").fetchall()
    conn.close()
    assert {"idempotency_keys", "confirmations", "audit"} <= tables
    assert descriptions == [
        (1, "events, trajectories, tasks, timers"),
        (2, "idempotency keys, confirmation tokens, audit log"),
        (3, "filtered events, channel cursors, connected channels"),
        (4, "messages to the user, their deliveries and read state"),
        (5, "subagents: child sessions, their trees and results"),
        (6, "cases: the decisions people made on requests, for the learning loop"),
        (7, "human requests: requests to a person, their outcome and its delivery"),
    ]
    with Store.read_only(db_path) as reader:
        assert reader.schema_version() == len(MIGRATIONS)
        assert reader.audit_rows() == []


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n" * 50, bytes(range(256)) * 64],
    ids=["text", "binary"],
)
async def test_a_file_that_is_not_sqlite_is_refused_untouched(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as info:
        await Store.open(path)
    message = str(info.value)
    assert str(path) in message and "is not a SQLite database" in message
    assert "Nothing in it was changed" in message
    with pytest.raises(StoreError, match="not a readable wakeful store"):
        Store.read_only(path)
    assert path.read_bytes() == content


async def test_a_damaged_store_is_refused_untouched(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.add_event(user_input("x"))
    damaged = overwrite_header(db_path)
    with pytest.raises(StoreError, match=r"not a SQLite database.*first page is damaged"):
        await Store.open(db_path)
    assert await anyio.Path(db_path).read_bytes() == damaged


async def test_another_programs_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"not a wakeful store.*invoices"):
        await Store.open(path)
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["invoices"]


def test_read_only_needs_an_existing_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no wakeful store at"):
        Store.read_only(missing)
    assert not missing.exists()


async def test_an_unreadable_row_is_reported_and_kept(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.add_event(user_input("fine"))
    conn = sqlite3.connect(db_path)
    conn.execute(
        "INSERT INTO events (id, session, kind, ts, status, data) "
        "VALUES ('ev_bad', 'main', 'user.input', '', 'pending', '{not json')"
    )
    conn.commit()
    conn.close()
    async with await Store.open(db_path) as store:
        with pytest.raises(StoreError, match=r"event #2 stored in .* cannot be read"):
            await store.pending_events()
        await store.mark_events(["ev_bad"], "consumed")
        assert [e.text for e in await store.pending_events()] == ["fine"]


# --- lifecycle and the read-only view ------------------------------------------------------------


async def test_read_only_view_sees_a_running_store_and_changes_nothing(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        event = user_input("visible")
        rowid = await store.add_event(event)
        await store.save_task(task_record("task_x"))
        await store.save_timer(timer_record("tmr_x", T0))
        await store.append_messages("main", [UserMessage(content="hi")])
        with Store.read_only(db_path) as reader:
            assert reader.recent_events() == [(rowid, "pending", event)]
            assert [t.id for t in reader.tasks()] == ["task_x"]
            assert [t.id for t in reader.timers()] == ["tmr_x"]
            assert reader.load_trajectory("main") == [UserMessage(content="hi")]
            assert reader.sessions() == ["main"]
            later = user_input("later")
            await store.add_event(later)
            assert [r.event for r in reader.recent_events(after_rowid=rowid)] == [later]
    with Store.read_only(db_path) as reader:
        assert len(reader.pending_events()) == 2


async def test_a_closed_store_refuses_writes(db_path: Path) -> None:
    store = await Store.open(db_path)
    await store.close()
    await store.close()
    assert store.closed
    with pytest.raises(StoreError, match="is closed"):
        await store.add_event(user_input("too late"))
    with pytest.raises(StoreError, match="is closed"):
        store.save_task_nowait(task_record("task_late"))


async def test_stored_json_is_plain_and_readable(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.save_task(task_record("task_json"))
    conn = sqlite3.connect(db_path)
    (data,) = conn.execute("SELECT data FROM tasks").fetchone()
    conn.close()
    assert json.loads(data)["id"] == "task_json"
