"""Due timers fire through one claim on the store, whichever backend: the store, not a service's
memory, decides what fires, so two workers on one PostgreSQL database fire each occurrence once,
and a timer fired or cancelled elsewhere is neither fired again nor left listed.

One service across a restart on SQLite (exactly once across restarts and kills) is covered by
tests/channels/test_timers.py (the restart and burst tests) and tests/chaos/test_timer_kills.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from small_disk import fill, small_tmpfs
from wakeful.channels.timers import TimerService, fire_due_timers
from wakeful.clock import FakeClock
from wakeful.core.records import TimerRecord
from wakeful.errors import StoreFull, UserError
from wakeful.events import TIMER_TRIGGER, Event, user_input
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 20, 12, 0, tzinfo=UTC)
# The value of `open_store` (tests/conftest.py): the test's store on each backend in turn.
AnyOpenStore = Callable[[], AbstractAsyncContextManager[Any]]


def once(timer_id: str, due: datetime, session: str = "main") -> TimerRecord:
    return TimerRecord(
        id=timer_id, session=session, note=f"note {timer_id}", kind="once", next_fire=due
    )


def every(timer_id: str, due: datetime, seconds: float, session: str = "main") -> TimerRecord:
    return TimerRecord(
        id=timer_id,
        session=session,
        note=f"note {timer_id}",
        kind="every",
        next_fire=due,
        every_seconds=seconds,
        anchor=due,
    )


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (up to 10 s) for what the services do without emitting an event, polling."""
    with anyio.fail_after(10):
        while True:
            if condition():
                return
            await anyio.sleep(0.005)


# --- the claim, on both backends -----------------------------------------------------------------


async def test_a_claim_fires_what_the_store_says_is_due(open_store: AnyOpenStore) -> None:
    async with open_store() as store:
        timers = store.timer_records
        await timers.save_many(
            [
                once("past-1", T0 - timedelta(minutes=2)),
                every("hourly", T0 - timedelta(minutes=1), 3600, session="other"),
                once("cancelled", T0 - timedelta(seconds=30)),
                once("future", T0 + timedelta(hours=2)),
            ]
        )
        assert await timers.delete("cancelled") is True

        first = await timers.claim_due(fire_due_timers, limit=1, now=T0)
        assert [e.context["timer_id"] for e in first] == ["past-1"]
        second = await timers.claim_due(fire_due_timers, now=T0)
        assert [(e.context["timer_id"], e.session) for e in second] == [("hourly", "other")]
        assert await timers.claim_due(fire_due_timers, now=T0) == []  # fired: not due again
        assert [e.id for e in await store.events.pending()] == [e.id for e in first + second]
        by_id = {t.id: t for t in await timers.find()}
        assert not by_id["past-1"].active and by_id["past-1"].fire_count == 1
        assert by_id["hourly"].next_fire == T0 + timedelta(minutes=59)
        assert by_id["future"].fire_count == 0

        with pytest.raises(UserError, match="limit must be at least 1"):
            await timers.claim_due(fire_due_timers, limit=0)


async def test_a_decision_that_changes_an_unclaimed_timer_saves_nothing(
    open_store: AnyOpenStore,
) -> None:
    async with open_store() as store:
        await store.timer_records.save_many(
            [once("due", T0 - timedelta(seconds=1)), once("later", T0 + timedelta(hours=1))]
        )

        def meddle(
            records: Sequence[TimerRecord], now: datetime
        ) -> tuple[list[Event], list[TimerRecord]]:
            events, changed = fire_due_timers(records, now)
            return events, [*changed, once("later", T0 + timedelta(hours=2))]

        with pytest.raises(UserError, match="changed timer later, which this claim did not take"):
            await store.timer_records.claim_due(meddle, now=T0)
        assert await store.events.pending() == []
        stored = await store.timer_records.find(active_only=True)
        assert [(t.id, t.next_fire) for t in stored] == [
            ("due", T0 - timedelta(seconds=1)),
            ("later", T0 + timedelta(hours=1)),
        ]


def test_the_fire_decision_leaves_the_records_it_is_given_alone() -> None:
    record = every("hourly", T0, 3600)
    before = dataclasses.replace(record)
    events, (advanced,) = fire_due_timers([record], T0 + timedelta(minutes=5))
    assert record == before
    assert advanced.next_fire == T0 + timedelta(hours=1) and advanced.fire_count == 1
    assert [e.context["scheduled_for"] for e in events] == [T0.isoformat()]


# --- a service whose timer is fired or cancelled elsewhere -----------------------------------


async def test_a_timer_fired_or_cancelled_elsewhere_is_not_fired_again(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    emitted: list[Event] = []

    async def emit(event: Event) -> None:
        emitted.append(event)

    async with await Store.open(tmp_path / "wakeful.db") as store:
        service = TimerService(store, emit, clock=clock)
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            hourly = await service.set_timer(session="main", note="tick", every_seconds=3600)
            doomed = await service.set_timer(session="main", note="gone", delay_seconds=3601)
            # Another process on the file fires the hourly timer, and deletes the other.
            fired = await store.timer_records.claim_due(
                fire_due_timers, now=T0 + timedelta(hours=1)
            )
            assert await store.timer_records.delete(doomed.id) is True

            clock.set(T0 + timedelta(hours=1, seconds=1))
            await until(
                lambda: hourly.next_fire == T0 + timedelta(hours=2), "the hourly timer refreshed"
            )
            assert service.list_timers() == [hourly]  # the deleted one is gone here too
            assert hourly.fire_count == 1 and emitted == []

            clock.set(T0 + timedelta(hours=2))
            await until(lambda: len(emitted) == 1, "the next hourly fire")
            tg.cancel_scope.cancel()

    assert [e.context["timer_id"] for e in fired] == [hourly.id]
    assert emitted[0].context["scheduled_for"] == (T0 + timedelta(hours=2)).isoformat()


async def test_due_timers_wait_out_a_full_disk_and_then_fire_once(tmp_path: Path) -> None:
    """A claim the full disk refuses fires nothing (no fire is held in memory, where a kill
    would lose it); the timer is claimed again a moment later, and fires once space is back."""
    clock = FakeClock(T0)
    emitted: list[Event] = []

    async def emit(event: Event) -> None:
        emitted.append(event)

    with small_tmpfs(tmp_path / "disk", 8) as disk:
        async with await Store.open(disk / "w.db", reserve_bytes=0) as store:
            service = TimerService(store, emit, clock=clock)
            async with anyio.create_task_group() as tg:
                await tg.start(service.run)
                record = await service.set_timer(session="main", note="check", delay_seconds=10)
                filler = fill(disk)
                with pytest.raises(StoreFull):  # the WAL's slack taken too
                    for i in range(200):
                        await store.add_event(user_input(f"{i} {'x' * 100_000}"))

                clock.advance(10)
                await until(lambda: clock.sleepers == 1, "the refused claim, and a retry set")
                assert emitted == [] and service.list_timers() == [record]
                assert record.fire_count == 0 and record.next_fire == T0 + timedelta(seconds=10)

                filler.unlink()
                clock.advance(1)
                await until(lambda: len(emitted) == 1, "the fire once space is back")
                tg.cancel_scope.cancel()
            pending = [e for e in await store.pending_events() if e.kind == TIMER_TRIGGER]

    assert [e.id for e in pending] == [e.id for e in emitted]
    assert emitted[0].context["scheduled_for"] == (T0 + timedelta(seconds=10)).isoformat()
    assert emitted[0].context["late"] is False
    assert service.list_timers() == [] and record.fire_count == 1


# --- two workers on one PostgreSQL database ------------------------------------------------------

SESSIONS = 10
ONE_SHOTS = 200
RECURRING = 40


async def test_two_workers_fire_every_due_timer_exactly_once(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    from wakeful.store.postgres import PostgresStore

    clock = FakeClock(T0)
    start = T0 + timedelta(seconds=10)
    timers = [
        once(f"once-{n:03d}", start + timedelta(milliseconds=5 * n), f"s{n % SESSIONS}")
        for n in range(ONE_SHOTS)
    ]
    timers += [every(f"every-{n:02d}", start, 30, f"s{n % SESSIONS}") for n in range(RECURRING)]
    emitted: dict[str, list[Event]] = {"a": [], "b": []}

    def total() -> int:
        return sum(len(events) for events in emitted.values())

    async with (
        await PostgresStore.open(postgres_url) as store_a,
        await PostgresStore.open(postgres_url) as store_b,
    ):
        await store_a.timer_records.save_many(timers)
        services = {}
        async with anyio.create_task_group() as tg:
            for name, store in (("a", store_a), ("b", store_b)):

                async def emit(event: Event, name: str = name) -> None:
                    emitted[name].append(event)

                # Small claims, so that the two take turns through the burst.
                services[name] = TimerService(store, emit, clock=clock, claim_limit=7)
                await tg.start(services[name].run)
            assert all(len(s.list_timers()) == len(timers) for s in services.values())

            # Both wake at once and claim side by side: every timer is due.
            clock.set(start + timedelta(seconds=2))
            await until(lambda: total() == ONE_SHOTS + RECURRING, "the first round fired")
            assert all(emitted.values()), "the claims did not run side by side"
            # The recurring ones' second occurrence.
            clock.set(start + timedelta(seconds=31))
            await until(lambda: total() == ONE_SHOTS + 2 * RECURRING, "the second round fired")
            # A worker that met a timer locked by the other looks at it again a second later.
            clock.set(start + timedelta(seconds=33))

            def settled(service: TimerService) -> bool:
                listed = service.list_timers()
                return len(listed) == RECURRING and all(
                    t.next_fire == start + timedelta(seconds=60) and t.fire_count == 2
                    for t in listed
                )

            await until(lambda: all(settled(s) for s in services.values()), "both up to date")
            tg.cancel_scope.cancel()

        stored = [
            stored_event.event
            for stored_event in await store_a.events.recent(limit=10_000)
            if stored_event.event.kind == TIMER_TRIGGER
        ]

    # Every fire stored once, and handed on once, by one worker or the other.
    handed_on = [e.id for events in emitted.values() for e in events]
    assert sorted(handed_on) == sorted(e.id for e in stored)
    assert len(set(handed_on)) == len(handed_on)
    counts = Counter(e.context["timer_id"] for e in stored)
    assert counts == {t.id: 1 if t.kind == "once" else 2 for t in timers}
    assert {e.context["late"] for e in stored} == {False}

    # Each session's events in order: a recurring timer's occurrences as they came, and each
    # worker handed on its fires in the order the store holds them.
    position = {e.id: n for n, e in enumerate(stored)}
    for session in {t.session for t in timers}:
        of_session = [e for e in stored if e.session == session]
        for timer_id in {e.context["timer_id"] for e in of_session}:
            scheduled = [
                e.context["scheduled_for"] for e in of_session if e.context["timer_id"] == timer_id
            ]
            assert scheduled == sorted(scheduled) and len(set(scheduled)) == len(scheduled)
        for events in emitted.values():
            order = [position[e.id] for e in events if e.session == session]
            assert order == sorted(order)


async def test_a_polling_worker_fires_a_timer_it_never_saw_once(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    from wakeful.store.postgres import PostgresStore

    clock = FakeClock(T0)
    emitted: list[Event] = []

    async def emit(event: Event) -> None:
        emitted.append(event)

    async with (
        await PostgresStore.open(postgres_url) as store_a,
        await PostgresStore.open(postgres_url) as store_b,
    ):
        services = [
            TimerService(store, emit, clock=clock, poll_seconds=5) for store in (store_a, store_b)
        ]
        async with anyio.create_task_group() as tg:
            for service in services:
                await tg.start(service.run)
            # Set through a third worker that has gone since: neither service knows it.
            await store_a.timer_records.save(once("orphan", T0 + timedelta(seconds=1)))
            assert all(s.list_timers() == [] for s in services)
            clock.set(T0 + timedelta(seconds=5))
            await until(lambda: len(emitted) == 1, "the orphan fired")
            clock.set(T0 + timedelta(seconds=10))  # both poll again: nothing is due
            await until(lambda: clock.sleepers == 2, "both asleep again")
            tg.cancel_scope.cancel()
        (stored,) = await store_a.timer_records.find()

    assert [e.context["timer_id"] for e in emitted] == ["orphan"]
    assert not stored.active and stored.fire_count == 1


def test_poll_seconds_must_be_positive() -> None:
    with pytest.raises(UserError, match="poll_seconds must be a positive number of seconds"):
        TimerService(None, _discard, poll_seconds=0)


async def _discard(event: Event) -> None:
    raise AssertionError(f"nothing should fire, got {event!r}")
