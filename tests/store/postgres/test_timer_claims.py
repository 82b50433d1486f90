"""Due timers claimed on a real PostgreSQL: each fire recorded once, also with several worker
processes claiming at the same moment."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from wakeful.core.records import TimerRecord
from wakeful.errors import UserError
from wakeful.events import TIMER_TRIGGER, Event

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from store_worker import fire  # noqa: E402
from worker_processes import worker_processes  # noqa: E402

from wakeful.store.postgres import PostgresStore  # noqa: E402


def once(timer_id: str, due: datetime, session: str = "main") -> TimerRecord:
    return TimerRecord(
        id=timer_id, session=session, note=f"note {timer_id}", kind="once", next_fire=due
    )


def every(timer_id: str, due: datetime, seconds: float) -> TimerRecord:
    return TimerRecord(
        id=timer_id,
        session="main",
        note=f"note {timer_id}",
        kind="every",
        next_fire=due,
        every_seconds=seconds,
        anchor=due,
    )


def fired_counts(url: str) -> Counter[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT data FROM events WHERE kind = %s", (TIMER_TRIGGER,)).fetchall()
    return Counter(Event.from_json(data).context["timer_id"] for (data,) in rows)


@pytest.mark.anyio
async def test_claim_due_fires_due_timers_once_and_leaves_the_rest(postgres_url: str) -> None:
    now = datetime.now(UTC)
    async with await PostgresStore.open(postgres_url) as store:
        timers = store.timer_records
        await timers.save_many(
            [
                once("past-1", now - timedelta(minutes=2)),
                once("past-2", now - timedelta(minutes=1)),
                every("hourly", now - timedelta(seconds=30), 3600),
                once("future", now + timedelta(hours=1)),
            ]
        )
        first = await timers.claim_due(fire, limit=2)
        assert [e.context["timer_id"] for e in first] == ["past-1", "past-2"]
        second = await timers.claim_due(fire, limit=2)
        assert [e.context["timer_id"] for e in second] == ["hourly"]
        assert await timers.claim_due(fire) == []
        # The fires are pending events of the timers' sessions, stored with the new state.
        assert [e.id for e in await store.events.pending("main")] == [e.id for e in first + second]
        by_id = {t.id: t for t in await timers.find()}
        assert not by_id["past-1"].active and by_id["past-1"].fire_count == 1
        assert by_id["hourly"].active and by_id["hourly"].next_fire is not None
        assert by_id["hourly"].next_fire > now and by_id["hourly"].fire_count == 1
        assert by_id["future"].active and by_id["future"].fire_count == 0
        # Judged at a given time instead of the database's clock.
        later = await timers.claim_due(fire, now=now + timedelta(hours=2))
        assert sorted(e.context["timer_id"] for e in later) == ["future", "hourly"]


@pytest.mark.anyio
async def test_a_decision_that_changes_an_unclaimed_timer_saves_nothing(postgres_url: str) -> None:
    now = datetime.now(UTC)
    async with await PostgresStore.open(postgres_url) as store:
        await store.timer_records.save_many(
            [once("due", now - timedelta(seconds=1)), once("later", now + timedelta(hours=1))]
        )
        stray = once("later", now + timedelta(hours=2))

        def meddle(
            records: Sequence[TimerRecord], at: datetime
        ) -> tuple[list[Event], list[TimerRecord]]:
            events, changed = fire(records, at)
            return events, [*changed, stray]

        with pytest.raises(UserError, match="changed timer later, which this claim did not take"):
            await store.timer_records.claim_due(meddle)
        assert await store.events.pending() == []
        assert [t.id for t in await store.timer_records.find(active_only=True)] == [
            "due",
            "later",
        ]
        with pytest.raises(UserError, match="limit must be at least 1"):
            await store.timer_records.claim_due(fire, limit=0)


@pytest.mark.slow
def test_three_workers_claiming_together_fire_every_timer_exactly_once(postgres_url: str) -> None:
    now = datetime.now(UTC)
    timers = [once(f"once-{n:03d}", now - timedelta(seconds=n)) for n in range(300)]
    timers += [every(f"every-{n:02d}", now - timedelta(seconds=n), 3600) for n in range(30)]

    async def save() -> None:
        async with await PostgresStore.open(postgres_url) as store:
            await store.timer_records.save_many(timers)

    anyio.run(save)
    with worker_processes(postgres_url) as start_worker:
        workers = [start_worker() for _ in range(3)]
        for worker in workers:  # all at once
            worker.send("fire_timers", limit=7)
        fired = [worker.answer()["fired"] for worker in workers]

    everything = [timer_id for batch in fired for timer_id in batch]
    assert sorted(everything) == sorted(t.id for t in timers)  # once each, none twice
    assert sum(1 for batch in fired if batch) >= 2, "the claims did not run side by side"
    counts = fired_counts(postgres_url)
    assert set(counts.values()) == {1} and len(counts) == len(timers)

    async def check() -> None:
        async with await PostgresStore.open(postgres_url) as store:
            stored = {t.id: t for t in await store.timer_records.find()}
        assert {t.fire_count for t in stored.values()} == {1}
        assert not any(t.active for tid, t in stored.items() if tid.startswith("once"))
        assert all(
            t.active and t.next_fire is not None and t.next_fire > now
            for tid, t in stored.items()
            if tid.startswith("every")
        )

    anyio.run(check)
