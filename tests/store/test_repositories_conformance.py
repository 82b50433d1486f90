"""The core repositories (events, trajectories, task records, timers) behave the same on every
backend: each test runs on the SQLite store (a file) and on the PostgreSQL store (a fresh
database on a real server, see tests/servers/postgres.py; skipped where PostgreSQL is missing).

Ported here from the SQLite-only tests (same behaviours, now on both backends): from
test_sqlite.py the event round trip, duplicates (alone, in a batch, among concurrent writers),
bursts all or none, invalid statuses, concurrent writers in order, the cancelled writer, the
trajectory round trip, task upserts and nowait order, running tasks lost on restart, timers
save/list/delete and fires stored with their timers or not at all; from test_repositories.py the
duplicate-in-a-batch refusal and the closed store; from test_channel_cursors.py redeliveries
recognised by `add_new` and bursts naming their duplicates; from test_sessions_to_resume.py the
query agreeing with the trajectory for every ending. What only one backend has (SQLite's files,
locks, full disks; PostgreSQL's migrations and servers) stays in that backend's own tests.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta, timezone
from typing import Protocol

import anyio
import pytest

from wakeful.agent.trajectory import Trajectory
from wakeful.core.records import EventStatus, TaskRecord, TaskState, TimerRecord
from wakeful.core.repositories import (
    EventRepository,
    TaskRepository,
    TimerRepository,
    TrajectoryRepository,
)
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

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class CoreStore(Protocol):
    """What every backend offers: the core four repositories and `flush`."""

    @property
    def events(self) -> EventRepository: ...
    @property
    def trajectories(self) -> TrajectoryRepository: ...
    @property
    def task_records(self) -> TaskRepository: ...
    @property
    def timer_records(self) -> TimerRepository: ...
    async def flush(self) -> None: ...


OpenStore = Callable[[], AbstractAsyncContextManager[CoreStore]]


def task_record(task_id: str, state: TaskState = "running", session: str = "main") -> TaskRecord:
    return TaskRecord(
        id=task_id,
        session=session,
        tool="run_shell",
        call_id=f"call_{task_id}",
        description="make test",
        state=state,
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


def mail(message_id: str, text: str = "hello") -> Event:
    """An email event whose id comes from its Message-ID, as a channel derives it."""
    return Event(
        id=f"ev_mail_{message_id.strip('<>').replace('@', '_at_')}",
        kind="email.received",
        source=Source(type="contact", id="ann@example.com"),
        content=text,
        session="mail",
    )


# --- events --------------------------------------------------------------------------------------


async def test_events_round_trip_in_arrival_order(open_store: OpenStore) -> None:
    async with open_store() as store:
        first = Event(
            kind="email.received",
            source=Source(type="contact", id="ann@example.com"),
            content={"subject": "hi", "body": "Ünïcode ✓ \x00 and a NUL"},
            context={"thread": 7},
            session="mail",
        )
        second, third = user_input("hello"), user_input("again")
        rowids = [await store.events.add(e) for e in (first, second, third)]
        assert rowids == sorted(rowids)

        assert await store.events.pending() == [first, second, third]
        assert await store.events.pending("mail") == [first]

        await store.events.mark([second.id, "ev_unknown"], "consumed")
        assert await store.events.pending() == [first, third]

        recent = await store.events.recent(limit=2)
        assert [(r.status, r.event) for r in recent] == [("consumed", second), ("pending", third)]
        tail = await store.events.recent(after_rowid=rowids[0])
        assert [r.rowid for r in tail] == rowids[1:]
        assert await store.events.recent(session="mail") == [(rowids[0], "pending", first)]
        assert await store.events.count() == {"pending": 2, "consumed": 1}
        assert await store.events.count("mail") == {"pending": 1}
        assert await store.trajectories.sessions() == ["mail", "main"]

    async with open_store() as store:  # and all of it is still there after a restart
        assert await store.events.pending() == [first, third]


async def test_a_lone_duplicate_is_refused_and_the_store_goes_on(open_store: OpenStore) -> None:
    async with open_store() as store:
        event = user_input("once")
        await store.events.add(event)
        with pytest.raises(StoreError, match=event.id) as refused:
            await store.events.add(event.model_copy(update={"content": "twice"}))
        assert "already stored" in str(refused.value) and "fresh id" in str(refused.value)
        later = user_input("later")
        await store.events.add(later)
        assert await store.events.pending() == [event, later]


async def test_a_duplicate_among_concurrent_writes_fails_alone(open_store: OpenStore) -> None:
    async with open_store() as store:
        event = user_input("once")
        await store.events.add(event)
        others = [user_input(f"other {i}") for i in range(20)]
        failures: list[StoreError] = []

        async def add_duplicate() -> None:
            try:
                await store.events.add(event.model_copy(update={"content": "twice"}))
            except StoreError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for other in others[:10]:
                tg.start_soon(store.events.add, other)
            tg.start_soon(add_duplicate)
            for other in others[10:]:
                tg.start_soon(store.events.add, other)

        assert len(failures) == 1 and event.id in str(failures[0])
        stored = await store.events.pending()
        assert len(stored) == 21
        assert [e for e in stored if e.id == event.id] == [event]


async def test_a_burst_is_stored_all_or_none(open_store: OpenStore) -> None:
    async with open_store() as store:
        kept = user_input("kept")
        await store.events.add(kept)
        burst = [user_input(f"burst {i}") for i in range(5)]
        rowids = await store.events.add_many(burst)
        assert rowids == sorted(rowids) and len(rowids) == 5 and rowids[0] > 0
        bad = [user_input("fine"), kept, user_input("also fine")]  # kept's id is taken
        with pytest.raises(StoreError, match=f"{kept.id} is already stored, so none of them"):
            await store.events.add_many(bad)
        assert await store.events.pending() == [kept, *burst]
        assert await store.events.add_many([]) == []


async def test_a_redelivered_event_is_recognised_and_left_as_it_was(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        first = mail("<m1@x>")
        assert await store.events.add_new(first) is True
        await store.events.mark([first.id], "consumed")
        again = mail("<m1@x>", text="changed on the way")
        assert await store.events.add_new(again) is False
        [stored] = await store.events.recent()
        assert stored.status == "consumed" and stored.event == first


async def test_a_burst_stores_the_new_events_and_names_the_duplicates(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        await store.events.add_new(mail("<old@x>"))
        burst: list[tuple[Event, EventStatus]] = [
            (mail("<a@x>"), "pending"),
            (mail("<old@x>"), "pending"),
            (mail("<b@x>"), "filtered"),
            (mail("<a@x>"), "pending"),  # twice in one burst: the second is a duplicate
        ]
        assert await store.events.add_new_many(burst) == [True, False, True, False]
        assert await store.events.add_new_many([]) == []
        assert await store.events.count() == {"pending": 2, "filtered": 1}
        pending_ids = [e.id for e in await store.events.pending()]
        assert pending_ids == [mail("<old@x>").id, mail("<a@x>").id]
        filtered = await store.events.recent(status="filtered")
        assert [s.event.id for s in filtered] == [mail("<b@x>").id]


async def test_kept_events_are_stored_with_their_status(open_store: OpenStore) -> None:
    async with open_store() as store:
        done = user_input("task finished")
        await store.events.keep(done, "consumed")
        await store.events.keep(user_input("alert"))
        assert [(r.status, r.event.text) for r in await store.events.recent()] == [
            ("consumed", "task finished"),
            ("pending", "alert"),
        ]


async def test_an_invalid_status_is_refused_before_anything_changes(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        event = user_input("keep me")
        await store.events.add(event)
        with pytest.raises(UserError, match="'pending', 'consumed' or 'filtered', got 'done'"):
            await store.events.mark([event.id], "done")
        with pytest.raises(UserError, match="got 'lost'"):
            await store.events.add_new_many(
                [(user_input("a"), "pending"), (user_input("b"), "lost")]  # type: ignore[list-item]
            )
        with pytest.raises(UserError, match="got 'lost'"):
            await store.events.add(user_input("c"), "lost")  # type: ignore[arg-type]
        assert await store.events.pending() == [event]
        assert await store.events.count() == {"pending": 1}


async def test_concurrent_writers_are_all_stored_each_in_its_order(
    open_store: OpenStore,
) -> None:
    writers, each = 20, 10
    batches = [
        [user_input(f"{w}:{i}", session=f"s{w % 7}") for i in range(each)] for w in range(writers)
    ]
    async with open_store() as store:

        async def writer(events: list[Event]) -> None:
            for event in events:
                await store.events.add(event)

        async with anyio.create_task_group() as tg:
            for events in batches:
                tg.start_soon(writer, events)
        stored = await store.events.pending()
        assert {e.id for e in stored} == {e.id for b in batches for e in b}
        for batch in batches:
            own = {e.id for e in batch}
            assert [e.id for e in stored if e.id in own] == [e.id for e in batch]
        # Arrival order is rowid order, and the tail from any point sees the rest.
        rowids = [r.rowid for r in await store.events.recent(limit=writers * each)]
        assert rowids == sorted(rowids)
        middle = rowids[len(rowids) // 2]
        tail = await store.events.recent(limit=writers * each, after_rowid=middle)
        assert [r.rowid for r in tail] == [r for r in rowids if r > middle]


async def test_a_cancelled_writer_still_has_its_write_committed(open_store: OpenStore) -> None:
    async with open_store() as store:
        event = user_input("committed anyway")
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.events.add(event)
        await store.flush()
        assert await store.events.pending() == [event]


async def test_a_closed_store_refuses_use(open_store: OpenStore) -> None:
    async with open_store() as store:
        pass
    with pytest.raises(StoreError, match="is closed"):
        await store.events.pending()
    with pytest.raises(StoreError, match="is closed"):
        await store.timer_records.save_many([])
    with pytest.raises(StoreError, match="is closed"):
        store.task_records.save_nowait(task_record("t"))


# --- trajectories --------------------------------------------------------------------------------


async def test_trajectories_round_trip_per_session(open_store: OpenStore) -> None:
    call = ToolCall.make("run_shell", command="ls")
    messages: list[Message] = [
        SystemMessage(content="You are helpful."),
        UserMessage(content="list files", event_ids=["ev_1"], mark="event"),
        AssistantMessage(content="", thinking="let me look", tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name="run_shell", content="a\nb", status="placeholder"),
    ]
    async with open_store() as store:
        await store.trajectories.append("main", messages[:2])
        await store.trajectories.append("other", [UserMessage(content="elsewhere")])
        await store.trajectories.append("main", messages[2:])
        await store.trajectories.append("main", [])
    async with open_store() as store:
        assert await store.trajectories.load("main") == messages
        assert await store.trajectories.load("other") == [UserMessage(content="elsewhere")]
        assert await store.trajectories.load("nobody") == []
        assert await store.trajectories.sessions() == ["main", "other"]


CALL = ToolCall.make("run_shell", call_id="call_1", command="make")
CALL_2 = ToolCall.make("run_shell", call_id="call_2", command="make test")
START: list[Message] = [SystemMessage(content="You help."), UserMessage(content="hi", mark="event")]

ENDINGS: dict[str, list[Message]] = {
    "system_only": [SystemMessage(content="You help.")],
    "answered": [*START, AssistantMessage(content="hello")],
    "event_awaiting_model": START,
    "events_awaiting_model": [*START[:1], UserMessage(content="a\nb", mark="events")],
    "note_awaiting_model": [*START, AssistantMessage(content="ok"), UserMessage(content="n")],
    "parallel_answer": [
        *START,
        AssistantMessage(content="ok"),
        UserMessage(content="p", mark="parallel"),
    ],
    "unanswered_call": [*START, AssistantMessage(tool_calls=[CALL])],
    "half_answered_calls": [
        *START,
        AssistantMessage(tool_calls=[CALL, CALL_2]),
        ToolMessage(tool_call_id="call_1", name="run_shell", content="built"),
    ],
    "result_awaiting_model": [
        *START,
        AssistantMessage(tool_calls=[CALL]),
        ToolMessage(tool_call_id="call_1", name="run_shell", content="built"),
    ],
}


def needs_work(messages: list[Message]) -> bool:
    trajectory = Trajectory("s", messages)
    return trajectory.needs_model or bool(trajectory.unanswered_calls())


async def test_sessions_to_resume_agree_with_the_trajectory_for_every_ending(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        for session, messages in ENDINGS.items():
            await store.trajectories.append(session, messages)
        # Another session's later messages do not hide where this one ends.
        await store.trajectories.append(
            "answered_later", [*START, AssistantMessage(tool_calls=[CALL])]
        )
        await store.trajectories.append(
            "answered_later",
            [
                ToolMessage(tool_call_id="call_1", name="run_shell", content="ok"),
                AssistantMessage(content="done"),
            ],
        )
        expected = sorted(s for s, messages in ENDINGS.items() if needs_work(messages))
        assert await store.trajectories.sessions_to_resume() == expected
        assert expected == [
            "event_awaiting_model",
            "events_awaiting_model",
            "half_answered_calls",
            "note_awaiting_model",
            "result_awaiting_model",
            "unanswered_call",
        ]


# --- tasks ---------------------------------------------------------------------------------------


async def test_tasks_upsert_and_nowait_saves_are_ordered(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.task_records.save(task_record("task_a"))
        record = task_record("task_b", session="other")
        store.task_records.save_nowait(record)
        record.state = "completed"
        record.result = "done"
        record.ended_at = T0 + timedelta(seconds=5)
        store.task_records.save_nowait(record)
        await store.flush()
        assert await store.task_records.find() == [task_record("task_a"), record]
        assert await store.task_records.find("other") == [record]
        # An update keeps the record where it was first saved.
        await store.task_records.save(task_record("task_a", state="failed"))
        assert [r.id for r in await store.task_records.find()] == ["task_a", "task_b"]


async def test_a_task_stopped_with_the_runtime_is_stored_with_its_note(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        record = task_record("task_cut", state="cancelled")
        note = user_input("task_cut was stopped with the runtime")
        store.task_records.save_stopped_nowait(record, note)
    async with open_store() as store:
        assert await store.task_records.find() == [record]
        assert await store.events.pending() == [note]


async def test_running_tasks_become_lost_on_restart(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.task_records.save(task_record("task_run1"))
        await store.task_records.save(task_record("task_done", state="completed"))
        await store.task_records.save(task_record("task_run2", session="other"))

    async with open_store() as store:
        lost = await store.task_records.mark_running_lost()
        assert [r.id for r in lost] == ["task_run1", "task_run2"]
        assert all(r.state == "lost" and r.ended_at is not None for r in lost)
        states = {r.id: r.state for r in await store.task_records.find()}
        assert states == {"task_run1": "lost", "task_done": "completed", "task_run2": "lost"}
        assert await store.task_records.mark_running_lost() == []


# --- timers --------------------------------------------------------------------------------------


async def test_timers_save_list_delete(open_store: OpenStore) -> None:
    late = timer_record("tmr_late", T0 + timedelta(hours=2))
    soon = timer_record("tmr_soon", T0 + timedelta(hours=1), session="other")
    done = timer_record("tmr_done", None)
    async with open_store() as store:
        await store.timer_records.save_many([late, soon, done])
    async with open_store() as store:
        assert await store.timer_records.find() == [soon, late, done]
        assert await store.timer_records.find(active_only=True) == [soon, late]
        assert await store.timer_records.find("other") == [soon]
        assert await store.timer_records.delete("tmr_soon") is True
        assert await store.timer_records.delete("tmr_soon") is False
        assert [t.id for t in await store.timer_records.find()] == ["tmr_late", "tmr_done"]


async def test_timers_in_other_time_zones_are_ordered_by_the_instant(
    open_store: OpenStore,
) -> None:
    tokyo = timezone(timedelta(hours=9))
    # 09:30 in Tokyo is 00:30 UTC: before 01:00 UTC although its wall-clock time is later.
    early = timer_record("tmr_tokyo", datetime(2025, 1, 1, 9, 30, tzinfo=tokyo))
    later = timer_record("tmr_utc", datetime(2025, 1, 1, 1, 0, tzinfo=UTC))
    async with open_store() as store:
        await store.timer_records.save(later)
        await store.timer_records.save(early)
        assert [t.id for t in await store.timer_records.find()] == ["tmr_tokyo", "tmr_utc"]


async def test_timer_fires_and_the_timers_advance_are_stored_together_or_not_at_all(
    open_store: OpenStore,
) -> None:
    hourly = timer_record("tmr_hourly", T0 + timedelta(hours=1))
    once = timer_record("tmr_once", T0)
    async with open_store() as store:
        await store.timer_records.save_many([hourly, once])
        taken = user_input("already stored")
        await store.events.add(taken)
        fire = Event(kind="timer.trigger", source=Source(type="system", id="tmr_once"))
        done = timer_record("tmr_once", None)
        advanced = timer_record("tmr_hourly", T0 + timedelta(hours=2))
        # One event cannot be stored (its id is taken): nothing of the write is kept.
        clash = Event(id=taken.id, kind="timer.trigger", source=fire.source)
        with pytest.raises(StoreError, match="already stored"):
            await store.timer_records.record_fires([fire, clash], [done, advanced])
        assert await store.timer_records.find() == [once, hourly]
        assert [e.id for e in await store.events.pending()] == [taken.id]

        await store.timer_records.record_fires([fire], [done, advanced])
        assert await store.timer_records.find() == [advanced, done]
        assert [e.id for e in await store.events.pending()] == [taken.id, fire.id]


async def test_a_failed_nowait_write_saves_nothing_of_itself_and_the_store_goes_on(
    open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_store() as store:
        taken = user_input("already stored")
        await store.events.add(taken)
        # Its note's id is taken: neither the record nor the note is stored.
        store.task_records.save_stopped_nowait(task_record("task_cut", state="cancelled"), taken)
        store.task_records.save_nowait(task_record("task_next"))
        await store.flush()
        assert [r.id for r in await store.task_records.find()] == ["task_next"]
        assert await store.events.pending() == [taken]
    assert "task_cut" in caplog.text and "already stored" in caplog.text
