"""SessionOwnership on a real PostgreSQL, in one process: events stored anywhere are consumed once
by the worker that owns their session; routing an event that arrived on a worker; a clean stop
hands the sessions over at once; a lost lease drops the session; idle sessions are released."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

import psycopg
from ownership_worker import EventConsumer

from wakeful.errors import UserError
from wakeful.events import user_input
from wakeful.runtime.worker import Route, SessionOwnership
from wakeful.store.postgres import LeaseLost, PostgresStore

pytestmark = pytest.mark.anyio


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float = 10.0) -> float:
    """Wait until `check` holds; return how long it took."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > within_s:
            raise AssertionError(f"not within {within_s} s")
        await anyio.sleep(0.05)
    return time.monotonic() - started


@asynccontextmanager
async def running(
    url: str, name: str, *, lease_s: float = 2.0, idle_release_s: float | None = None
) -> AsyncIterator[tuple[SessionOwnership, EventConsumer]]:
    """A worker in this process: its store, ownership and consumer, stopped on leaving."""
    async with await PostgresStore.open(url, pool_size=3) as store:
        consumer = EventConsumer(name)
        ownership = SessionOwnership(
            store, consumer, lease_seconds=lease_s, name=name, idle_release_s=idle_release_s
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.run)
            await tg.start(ownership.run)
            yield ownership, consumer
            tg.cancel_scope.cancel()


async def pending_count(store: PostgresStore) -> int:
    return (await store.events.count()).get("pending", 0)


def handlers_of(url: str) -> dict[str, list[str]]:
    """Each event id, with the workers whose trajectory messages carry it."""
    found: dict[str, list[str]] = {}
    for (data,) in sql(url, "SELECT data FROM trajectory ORDER BY seq"):
        message = json.loads(str(data))
        for event_id in message["event_ids"]:
            found.setdefault(event_id, []).append(json.loads(message["content"])["worker"])
    return found


async def test_events_stored_anywhere_are_consumed_once_by_their_owner(postgres_url: str) -> None:
    async with (
        await PostgresStore.open(postgres_url, pool_size=2) as submitter,
        running(postgres_url, "alpha") as (alpha, _),
        running(postgres_url, "beta") as (beta, _),
    ):
        events = [user_input(f"m{i}", session=f"s{i % 12}") for i in range(60)]
        for start in range(0, len(events), 10):
            await submitter.events.add_many(events[start : start + 10])
        await eventually(lambda: _nothing_pending(submitter))
        owned = set(alpha.sessions) | set(beta.sessions)
        assert not set(alpha.sessions) & set(beta.sessions)
        assert owned == {f"s{i}" for i in range(12)}
    handled = handlers_of(postgres_url)
    assert sorted(handled) == sorted(event.id for event in events)
    assert all(len(workers) == 1 for workers in handled.values())


async def _nothing_pending(store: PostgresStore) -> bool:
    return await pending_count(store) == 0


async def test_route_says_where_an_arriving_event_is_handled(postgres_url: str) -> None:
    async with (
        await PostgresStore.open(postgres_url, pool_size=2) as store,
        running(postgres_url, "alpha", lease_s=30) as (alpha, alpha_consumer),
        running(postgres_url, "beta", lease_s=30) as (beta, _),
    ):
        # Stored on alpha's side, the event wakes every worker; route decides who runs it.
        event = user_input("hi", session="chat-1")
        # Taken by alpha before the event is even stored: no claim pass competes.
        assert await alpha.route("chat-1") is Route.TAKEN
        await store.events.add(event)
        assert await alpha.route("chat-1") is Route.HERE
        assert await beta.route("chat-1") is Route.ELSEWHERE
        assert alpha.view("chat-1") is not None and beta.view("chat-1") is None
        await eventually(lambda: _nothing_pending(store))
        assert alpha_consumer.handled == 1
    assert handlers_of(postgres_url) == {event.id: ["alpha"]}


async def test_a_clean_stop_hands_the_sessions_over_at_once(postgres_url: str) -> None:
    async with (
        await PostgresStore.open(postgres_url, pool_size=2) as store,
        running(postgres_url, "beta", lease_s=30) as (beta, _),
    ):
        async with running(postgres_url, "alpha", lease_s=30) as (alpha, _):
            for session in ("a", "b", "c"):
                assert await alpha.route(session) is Route.TAKEN
        assert sql(postgres_url, "SELECT stopped_at IS NOT NULL FROM workers WHERE id = 'alpha'")[
            0
        ] == (True,)
        # New events for the released sessions: beta takes them now, not after 30 s.
        await store.events.add_many([user_input("x", session=s) for s in ("a", "b", "c")])
        took = await eventually(lambda: _nothing_pending(store), within_s=5)
        assert took < 5
        assert beta.sessions == ["a", "b", "c"]


async def test_a_lost_lease_drops_the_session_and_its_writes(postgres_url: str) -> None:
    async with running(postgres_url, "alpha", lease_s=1.0) as (alpha, consumer):
        assert await alpha.route("s1") is Route.TAKEN
        view = alpha.view("s1")
        assert view is not None
        # Another worker takes the session over (as after a freeze past the lease).
        sql(
            postgres_url,
            "UPDATE session_leases SET owner = 'intruder', epoch = epoch + 1, "
            "expires_at = clock_timestamp() + interval '1 minute' WHERE session = 's1'",
        )

        async def dropped() -> bool:
            return "s1" in consumer.lost_sessions

        await eventually(dropped, within_s=3)
        assert alpha.view("s1") is None
        with pytest.raises(LeaseLost, match="no longer holds the lease"):
            await view.events.add(user_input("late", session="s1"))
        assert await alpha.route("s1") is Route.ELSEWHERE


async def test_an_idle_session_is_released_for_any_worker(postgres_url: str) -> None:
    async with (
        await PostgresStore.open(postgres_url, pool_size=2) as store,
        running(postgres_url, "alpha", idle_release_s=0.4) as (alpha, consumer),
    ):
        await store.events.add(user_input("hello", session="quiet"))
        await eventually(lambda: _nothing_pending(store))

        async def released() -> bool:
            return alpha.sessions == []

        await eventually(released, within_s=5)
        assert consumer.lost_sessions == ["quiet"]
        assert sql(postgres_url, "SELECT owner FROM session_leases WHERE session = 'quiet'") == [
            (None,)
        ]
        # Its next event claims it back.
        await store.events.add(user_input("again", session="quiet"))
        await eventually(lambda: _nothing_pending(store))
        assert consumer.handled == 2


async def test_settings_out_of_range_are_refused(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, pool_size=1) as store:
        consumer = EventConsumer("x")
        with pytest.raises(UserError, match="claim_batch must be at least 1"):
            SessionOwnership(store, consumer, claim_batch=0)
        with pytest.raises(UserError, match="idle_release_s must be more than 0"):
            SessionOwnership(store, consumer, idle_release_s=0)
        with pytest.raises(UserError, match="not running"):
            await SessionOwnership(store, consumer).route("s")
        consumer.close()
