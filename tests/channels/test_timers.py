"""Timers with a fake clock and a real store: firing, schedules, restarts, missed fires."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from running_timers import next_event, running
from wakeful.channels.timer_schedules import InvalidTimer, TimerRecord
from wakeful.channels.timers import TimerService, UnknownTimer
from wakeful.clock import FakeClock, SystemClock
from wakeful.errors import UserError
from wakeful.events import TIMER_TRIGGER, Event, render_event
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 20, 12, 0, tzinfo=UTC)  # a Thursday
PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "wakeful.db"


async def assert_quiet(receive: MemoryObjectReceiveStream[Event]) -> None:
    await anyio.wait_all_tasks_blocked()
    with pytest.raises(anyio.WouldBlock):
        event = receive.receive_nowait()
        pytest.fail(f"unexpected event {event!r}")


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat()


# --- the clock -----------------------------------------------------------------------------------


async def test_fake_clock_wakes_sleepers_when_moved_past_their_time() -> None:
    clock = FakeClock(T0)
    woke: list[datetime] = []

    async def sleeper(seconds: int) -> None:
        await clock.sleep_until(T0 + timedelta(seconds=seconds))
        woke.append(clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper, 10)
        tg.start_soon(sleeper, 30)
        await anyio.wait_all_tasks_blocked()
        assert clock.sleepers == 2
        clock.advance(15)
        await anyio.wait_all_tasks_blocked()
        assert woke == [T0 + timedelta(seconds=15)]
        clock.set(T0 + timedelta(seconds=30))
    assert woke[1] == T0 + timedelta(seconds=30)
    with pytest.raises(UserError, match="only moves forward"):
        clock.advance(-1)
    with pytest.raises(UserError, match="no timezone"):
        FakeClock(datetime(2025, 1, 1))


async def test_system_clock_returns_for_a_past_time() -> None:
    clock = SystemClock()
    with anyio.fail_after(1):
        await clock.sleep_until(clock.now() - timedelta(seconds=5))
        await clock.sleep_until(clock.now() + timedelta(milliseconds=5))
    assert clock.now().tzinfo is UTC


# --- firing --------------------------------------------------------------------------------------


async def test_a_delay_timer_fires_once_on_time(db_path: Path) -> None:
    clock = FakeClock(T0)
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        record = await service.set_timer(session="ops", note="check the build", delay_seconds=60)
        clock.advance(59)
        await assert_quiet(events)
        clock.advance(1)
        event = await next_event(events)
        assert event.kind == TIMER_TRIGGER
        assert event.source.type == "system" and event.source.id == record.id
        assert event.content == "check the build" and event.session == "ops"
        assert event.ts == T0 + timedelta(seconds=60)
        assert event.context == {
            "timer_id": record.id,
            "scheduled_for": iso(T0 + timedelta(seconds=60)),
            "fired_at": iso(T0 + timedelta(seconds=60)),
            "late": False,
            "late_by_seconds": 0.0,
            "occurrences": 1,
            "schedule": "once",
            "next_fire": None,
        }
        assert render_event(event) == f"[TIMER {record.id}] check the build"
        clock.advance(3600)
        await assert_quiet(events)
        assert service.list_timers() == []
        await store.flush()
        (stored,) = await store.timers()
        assert not stored.active and stored.fire_count == 1 and stored.next_fire is None


async def test_an_rfc3339_timer_fires_at_that_instant() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        record = await service.set_timer(
            session="main", note="call mum", at="2025-03-20T14:30:00+01:00"
        )
        assert record.next_fire == datetime(2025, 3, 20, 13, 30, tzinfo=UTC)
        clock.set(datetime(2025, 3, 20, 13, 29, 59, tzinfo=UTC))
        await assert_quiet(events)
        clock.advance(1)
        assert (await next_event(events)).content == "call mum"


async def test_a_recurring_timer_follows_its_schedule_without_drift() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        record = await service.set_timer(session="main", note="tick", every_seconds=60)
        # The service gets to each fire a little late; the schedule must not slide.
        for k in range(1, 6):
            clock.set(T0 + timedelta(seconds=60 * k + 7))
            event = await next_event(events)
            assert event.context["scheduled_for"] == iso(T0 + timedelta(seconds=60 * k))
            assert event.context["next_fire"] == iso(T0 + timedelta(seconds=60 * (k + 1)))
            assert event.context["late"] is False
        assert record.fire_count == 5
        assert service.list_timers() == [record]


async def test_a_cron_timer_fires_at_nine_in_paris_across_a_dst_change() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        record = await service.set_timer(
            session="main", note="weekly report", cron="0 9 * * 5", timezone="Europe/Paris"
        )
        fires = []
        for _ in range(3):
            assert record.next_fire is not None
            clock.set(record.next_fire)
            event = await next_event(events)
            fires.append(datetime.fromisoformat(event.context["scheduled_for"]))
    # 21 and 28 March are in winter time (UTC+1), 4 April in summer time (UTC+2).
    assert fires == [
        datetime(2025, 3, 21, 8, tzinfo=UTC),
        datetime(2025, 3, 28, 8, tzinfo=UTC),
        datetime(2025, 4, 4, 7, tzinfo=UTC),
    ]
    assert {f.astimezone(PARIS).strftime("%a %H:%M") for f in fires} == {"Fri 09:00"}
    assert record.schedule == "cron '0 9 * * 5' in Europe/Paris"


async def test_a_cron_time_repeated_when_clocks_go_back_fires_once() -> None:
    clock = FakeClock(datetime(2025, 10, 25, 12, tzinfo=UTC))
    async with running(None, clock) as (service, events):
        record = await service.set_timer(
            session="main", note="backup", cron="30 2 * * *", timezone="Europe/Paris"
        )
        assert record.next_fire == datetime(2025, 10, 26, 0, 30, tzinfo=UTC)  # 02:30 CEST
        clock.set(record.next_fire)
        await next_event(events)
        # 02:30 CET comes an hour later on the same night; the next run is the following day.
        assert record.next_fire == datetime(2025, 10, 27, 1, 30, tzinfo=UTC)


async def test_an_earlier_timer_wakes_the_sleeping_service() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        await service.set_timer(session="main", note="in an hour", delay_seconds=3600)
        await anyio.wait_all_tasks_blocked()
        await service.set_timer(session="main", note="in a minute", delay_seconds=60)
        clock.advance(60)
        assert (await next_event(events)).content == "in a minute"
        clock.advance(3540)
        assert (await next_event(events)).content == "in an hour"


async def test_ten_thousand_timers_fire_in_order() -> None:
    clock = FakeClock(T0)
    count = 10_000
    async with running(None, clock) as (service, events):
        for i in range(count):
            # Scatter the due times: i * 7919 mod count is a permutation of 0..count-1.
            await service.set_timer(session="main", note=str(i), delay_seconds=(i * 7919) % count)
        started = time.perf_counter()
        clock.advance(count)
        fired = [await next_event(events) for _ in range(count)]
        elapsed = time.perf_counter() - started
    due = [datetime.fromisoformat(e.context["scheduled_for"]) for e in fired]
    assert due == sorted(due) and len({e.content for e in fired}) == count
    assert elapsed < 5


async def test_cancel_stops_a_timer_and_removes_it_from_the_store(db_path: Path) -> None:
    clock = FakeClock(T0)
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        keep = await service.set_timer(session="main", note="keep", delay_seconds=120)
        drop = await service.set_timer(session="main", note="drop", every_seconds=60)
        cancelled = await service.cancel_timer(drop.id)
        assert not cancelled.active
        assert [t.id for t in await store.timers()] == [keep.id]
        clock.advance(120)
        assert (await next_event(events)).content == "keep"
        await assert_quiet(events)
        with pytest.raises(UnknownTimer, match=drop.id):
            await service.cancel_timer(drop.id)


async def test_a_timer_missed_while_the_machine_slept_fires_once_late() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        await service.set_timer(session="main", note="stand-up", every_seconds=600)
        clock.advance(7200 + 90)  # twelve occurrences pass in one jump
        event = await next_event(events)
        assert event.context["late"] is True
        assert event.context["occurrences"] == 12
        assert event.context["late_by_seconds"] == 90.0
        assert event.context["next_fire"] == iso(T0 + timedelta(seconds=7800))
        await assert_quiet(events)


async def test_a_missed_cron_timer_fires_once_and_stays_on_its_schedule() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        daily = await service.set_timer(
            session="main", note="daily", cron="0 9 * * *", timezone="UTC"
        )
        clock.advance(timedelta(days=3))  # 21, 22 and 23 March at 09:00 pass
        event = await next_event(events)
        assert event.context["occurrences"] == 3
        assert event.context["scheduled_for"] == iso(datetime(2025, 3, 23, 9, tzinfo=UTC))
        assert event.context["late_by_seconds"] == 3 * 3600.0
        assert daily.next_fire == datetime(2025, 3, 24, 9, tzinfo=UTC)
        await assert_quiet(events)


async def test_a_very_frequent_missed_cron_timer_reports_a_floor_count() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events):
        await service.set_timer(session="main", note="poll", cron="* * * * *", timezone="UTC")
        clock.advance(timedelta(days=2, seconds=30))
        event = await next_event(events)
        assert event.context["occurrences"] == 1000
        assert event.context["occurrences_at_least"] is True
        assert event.context["scheduled_for"] == iso(T0 + timedelta(days=2))
        await assert_quiet(events)


# --- restarts ------------------------------------------------------------------------------------


async def test_timers_survive_a_restart_and_a_missed_one_shot_fires_once_late(
    db_path: Path,
) -> None:
    clock = FakeClock(T0)
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        missed = await service.set_timer(session="main", note="was due", delay_seconds=3600)
        future = await service.set_timer(session="main", note="still ahead", delay_seconds=86400)

    # The runtime is down for three hours.
    clock = FakeClock(T0 + timedelta(hours=3))
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        event = await next_event(events)
        assert event.source.id == missed.id
        assert event.context["late"] is True
        assert event.context["late_by_seconds"] == 7200.0
        assert event.context["scheduled_for"] == iso(T0 + timedelta(hours=1))
        assert event.context["fired_at"] == iso(T0 + timedelta(hours=3))
        assert "fired late by 7200s" in render_event(event)
        await assert_quiet(events)
        assert [t.id for t in service.list_timers()] == [future.id]
        await store.flush()

    # Restarting again does not fire the one-shot a second time.
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        await assert_quiet(events)
        assert [t.id for t in await store.timers(active_only=True)] == [future.id]
        clock.advance(86400)
        assert (await next_event(events)).content == "still ahead"


async def test_a_recurring_timer_missed_five_times_fires_once(db_path: Path) -> None:
    clock = FakeClock(T0)
    async with await Store.open(db_path) as store, running(store, clock) as (service, _):
        record = await service.set_timer(session="main", note="hourly", every_seconds=3600)

    clock = FakeClock(T0 + timedelta(hours=5, minutes=30))  # missed 1h, 2h, 3h, 4h and 5h
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        event = await next_event(events)
        assert event.context["occurrences"] == 5
        assert event.context["first_missed_at"] == iso(T0 + timedelta(hours=1))
        assert event.context["scheduled_for"] == iso(T0 + timedelta(hours=5))
        assert event.context["late"] is True and event.context["late_by_seconds"] == 1800.0
        (reloaded,) = service.list_timers()
        assert reloaded.next_fire == T0 + timedelta(hours=6)  # on the original schedule
        await assert_quiet(events)

        clock.advance(1800)
        on_time = await next_event(events)
        assert on_time.context["late"] is False
        assert on_time.context["scheduled_for"] == iso(T0 + timedelta(hours=6))
        assert reloaded.fire_count == 2
    assert record.id == reloaded.id


async def test_the_skip_policy_stays_quiet_and_moves_on(db_path: Path) -> None:
    clock = FakeClock(T0)
    async with await Store.open(db_path) as store, running(store, clock) as (service, _):
        hourly = await service.set_timer(
            session="main", note="hourly", every_seconds=3600, missed="skip"
        )
        once = await service.set_timer(
            session="main", note="useless late", delay_seconds=600, missed="skip"
        )

    clock = FakeClock(T0 + timedelta(hours=2, minutes=10))
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        # The store decides what the start-up claim skips: wait for it to be committed.
        await store.flush()
        await assert_quiet(events)
        (reloaded,) = service.list_timers()
        assert reloaded.id == hourly.id
        assert reloaded.next_fire == T0 + timedelta(hours=3)
        assert reloaded.fire_count == 0
        clock.advance(50 * 60)
        event = await next_event(events)
        assert event.context["late"] is False and event.source.id == hourly.id
        await store.flush()
        stored = {t.id: t for t in await store.timers()}
        assert stored[once.id].active is False and stored[once.id].fire_count == 0


async def test_a_burst_of_fires_is_stored_with_every_timers_advance_before_any_is_handed_on(
    db_path: Path,
) -> None:
    """A kill while the fires are being handed on must not fire any of them again: by the first
    hand-over, every fire of the burst and every timer's advance are committed together."""
    clock = FakeClock(T0)
    seen_in_store: list[tuple[list[Event], list[TimerRecord]]] = []
    handed_on: list[Event] = []
    all_handed_on = anyio.Event()
    async with await Store.open(db_path) as store:

        async def hand_on(event: Event) -> None:
            handed_on.append(event)
            if len(handed_on) == 1:
                seen_in_store.append((await store.pending_events(), await store.timers()))
            if len(handed_on) == 80:
                all_handed_on.set()

        service = TimerService(store, hand_on, clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            for i in range(40):
                await service.set_timer(session=f"s{i % 8}", note=f"once {i}", delay_seconds=10)
                await service.set_timer(session=f"s{i % 8}", note=f"every {i}", every_seconds=10)
            clock.advance(10)
            with anyio.fail_after(5):
                await all_handed_on.wait()
            tg.cancel_scope.cancel()

    ((pending, timers),) = seen_in_store
    assert sorted(e.id for e in pending) == sorted(e.id for e in handed_on)
    assert len(pending) == 80 and all(e.kind == TIMER_TRIGGER for e in pending)
    assert len(timers) == 80 and all(t.fire_count == 1 for t in timers)
    assert all(not t.active for t in timers if t.kind == "once")
    assert {t.next_fire for t in timers if t.kind == "every"} == {T0 + timedelta(seconds=20)}

    # Restarted after a kill at that moment, nothing fires again.
    async with await Store.open(db_path) as store, running(store, clock) as (service, events):
        await assert_quiet(events)
        clock.advance(5)
        await assert_quiet(events)
        assert len(await store.pending_events()) == 80


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"at": "next tuesday"}, "not an RFC 3339 time: got 'next tuesday'"),
        ({"at": "2025-03-21T09:00:00"}, "must include a timezone offset"),
        ({"at": "2025-03-19T09:00:00Z"}, "is in the past"),
        ({"at": "2025-03-21T09:00:00Z", "delay_seconds": 5}, "either `at` or `delay_seconds`"),
        ({"delay_seconds": -5}, "from 0 to"),
        ({"delay_seconds": float("nan")}, "from 0 to"),
        ({"every_seconds": 0.5}, "from 1 to"),
        ({"cron": "61 * * * *", "timezone": "UTC"}, "Invalid cron expression '61 \\* \\* \\* \\*'"),
        ({"cron": "0 0 30 2 *", "timezone": "UTC"}, "never fires"),
        ({"cron": "* * * * * *", "timezone": "UTC"}, "it has 6 fields; use five"),
        ({"cron": "0 9 * * 5", "timezone": "Mars/Olympus"}, "Unknown timezone 'Mars/Olympus'"),
        ({"cron": "0 9 * * 5", "timezone": "Europe"}, "Unknown timezone 'Europe'"),
        ({"cron": "0 9 * * 5"}, "needs a `timezone`"),
        ({"cron": "0 9 * * 5", "timezone": "UTC", "delay_seconds": 1}, "cannot be combined"),
        ({"delay_seconds": 60, "timezone": "UTC"}, "only applies to `cron`"),
        ({}, "Say when the timer fires"),
    ],
)
async def test_bad_arguments_are_refused_with_a_clear_message(
    arguments: dict[str, Any], message: str
) -> None:
    service = TimerService(None, _discard, clock=FakeClock(T0))
    with pytest.raises(InvalidTimer, match=message):
        await service.set_timer(session="main", note="n", **arguments)
    assert service.list_timers() == []


async def _discard(event: Event) -> None:
    raise AssertionError(f"nothing should fire, got {event!r}")


def test_a_timer_record_round_trips_through_a_dict() -> None:
    record = TimerRecord(
        id="tmr_1",
        session="main",
        note="n",
        kind="cron",
        next_fire=T0,
        cron="0 9 * * 5",
        timezone="Europe/Paris",
        created_at=T0,
        last_fired_at=T0,
        fire_count=3,
    )
    assert TimerRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    with pytest.raises(ValueError, match="needs cron and timezone"):
        TimerRecord.from_dict({**record.to_dict(), "cron": None})
