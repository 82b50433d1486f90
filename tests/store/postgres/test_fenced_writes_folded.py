"""Fenced writes that check their lease in their own statement (a trajectory's appends, an
events' mark) and the writer's batches, on a real PostgreSQL: each such write refuses exactly as
a separate check did (LeaseLost naming why, nothing saved); a takeover in flight decides the
write waiting on its lease row; a batch holding a refused or failing write still commits every
other write of it; and the store's connections, no longer checked by a round trip each time they
are taken, are still replaced once the server ends them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from wakeful.errors import StoreError
from wakeful.events import user_input
from wakeful.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import FencedStore, PostgresStore  # noqa: E402
from wakeful.store.postgres.leases import Lease, LeaseLost  # noqa: E402

pytestmark = pytest.mark.anyio

# Long enough that no lease here expires unless a test waits for it.
LEASE_S = 30.0
SHORT_LEASE_S = 1.0

FencedWrite = Callable[[FencedStore], Awaitable[object]]


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


@asynccontextmanager
async def holding(url: str, lease_s: float = LEASE_S) -> AsyncIterator[tuple[PostgresStore, Lease]]:
    """A store whose worker alpha holds the lease on s1, with one pending event of s1 stored."""
    async with await PostgresStore.open(url, pool_size=2) as store:
        alpha = await store.register_worker(lease_seconds=lease_s, name="alpha")
        lease = await alpha.acquire("s1")
        assert lease is not None
        await store.events.add(user_input("waiting", session="s1"))
        yield store, lease


async def append_one(view: FencedStore) -> None:
    await view.trajectories.append("s1", [UserMessage(content="late")])


async def mark_pending(view: FencedStore) -> None:
    ids = [event.id for event in await view.events.pending("s1")]
    await view.events.mark(ids, "consumed")


WRITES = [pytest.param(append_one, id="append"), pytest.param(mark_pending, id="mark")]


async def assert_nothing_saved(store: PostgresStore) -> None:
    assert await store.trajectories.load("s1") == []
    assert [e.text for e in await store.events.pending("s1")] == ["waiting"]


async def wait_for_lock_wait(url: str) -> None:
    """Wait until a statement of the database waits for a row lock (the fenced write)."""

    def waiting() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if sql(
                url,
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'",
            ):
                return
            time.sleep(0.02)
        raise AssertionError("the fenced write never waited for the lease row")

    await anyio.to_thread.run_sync(waiting)


async def race_a_takeover(url: str, view: FencedStore, write: FencedWrite, *, commit: bool) -> None:
    """Lock s1's lease row as a takeover does, let `write` wait on it, then hand the session to
    beta and commit (or roll the takeover back); `write`'s outcome is raised here."""
    outcome: list[BaseException | None] = []

    async def attempt() -> None:
        try:
            await write(view)
        except LeaseLost as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    async with await psycopg.AsyncConnection.connect(url) as takeover:
        await takeover.execute("SELECT 1 FROM session_leases WHERE session = 's1' FOR UPDATE")
        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt)
            await wait_for_lock_wait(url)
            await takeover.execute(
                "UPDATE session_leases SET owner = 'beta', epoch = epoch + 1, "
                "expires_at = clock_timestamp() + interval '30 s' WHERE session = 's1'"
            )
            await (takeover.commit() if commit else takeover.rollback())
    if outcome[0] is not None:
        raise outcome[0]


@pytest.mark.parametrize("write", WRITES)
async def test_a_write_waiting_on_a_takeover_is_refused_once_it_commits(
    postgres_url: str, write: FencedWrite
) -> None:
    async with holding(postgres_url) as (store, lease):
        with pytest.raises(LeaseLost, match=r"session 's1'.*worker beta holds it now \(epoch 2\)"):
            await race_a_takeover(postgres_url, store.fenced(lease), write, commit=True)
        await assert_nothing_saved(store)


@pytest.mark.parametrize("write", WRITES)
async def test_a_write_waiting_on_a_takeover_rolled_back_is_saved(
    postgres_url: str, write: FencedWrite
) -> None:
    async with holding(postgres_url) as (store, lease):
        await race_a_takeover(postgres_url, store.fenced(lease), write, commit=False)
        saved = await store.trajectories.load("s1") != [] or not await store.events.pending("s1")
        assert saved


@pytest.mark.parametrize("write", WRITES)
async def test_a_released_lease_refuses_the_write(postgres_url: str, write: FencedWrite) -> None:
    async with holding(postgres_url) as (store, lease):
        sql(postgres_url, "UPDATE session_leases SET owner = NULL, expires_at = clock_timestamp()")
        with pytest.raises(LeaseLost, match=r"nobody holds it now \(it was released\)"):
            await write(store.fenced(lease))
        await assert_nothing_saved(store)


@pytest.mark.parametrize("write", WRITES)
async def test_an_expired_lease_refuses_the_write(postgres_url: str, write: FencedWrite) -> None:
    async with holding(postgres_url, SHORT_LEASE_S) as (store, lease):
        await anyio.sleep(SHORT_LEASE_S + 0.2)
        with pytest.raises(LeaseLost, match="it expired before it was renewed"):
            await write(store.fenced(lease))
        await assert_nothing_saved(store)


@pytest.mark.parametrize("write", WRITES)
async def test_a_session_never_leased_refuses_the_write(
    postgres_url: str, write: FencedWrite
) -> None:
    async with holding(postgres_url) as (store, lease):
        ghost = Lease("s1", lease.owner, lease.epoch, lease.expires_at)
        sql(postgres_url, "DELETE FROM session_leases")
        with pytest.raises(LeaseLost, match=r"nobody holds it now"):
            await write(store.fenced(ghost))
        await assert_nothing_saved(store)


async def test_a_batch_commits_every_write_but_the_refused_ones(postgres_url: str) -> None:
    """Writes queued together: a lost lease's append and mark fail, the live session's writes
    and an unfenced event are saved, in the order they were made."""
    async with holding(postgres_url) as (store, lost), holding_s2(store) as live:
        sql(
            postgres_url,
            "UPDATE session_leases SET owner = 'beta', epoch = epoch + 1 WHERE session = 's1'",
        )
        stale = store.fenced(lost)
        refused: list[str] = []
        pending = [e.id for e in await store.events.pending("s1")]

        async def refusable(name: str, write: Awaitable[None]) -> None:
            try:
                await write
            except LeaseLost:
                refused.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(live.trajectories.append, "s2", [UserMessage(content="one")])
            tg.start_soon(
                refusable, "append", stale.trajectories.append("s1", [UserMessage(content="x")])
            )
            tg.start_soon(store.events.add, user_input("unfenced", session="s3"))
            tg.start_soon(refusable, "mark", stale.events.mark(pending, "consumed"))
            tg.start_soon(live.trajectories.append, "s2", [UserMessage(content="two")])
        assert sorted(refused) == ["append", "mark"]
        assert [m.content for m in await store.trajectories.load("s2")] == ["one", "two"]
        assert [e.text for e in await store.events.pending("s3")] == ["unfenced"]
        await assert_nothing_saved(store)


@asynccontextmanager
async def holding_s2(store: PostgresStore) -> AsyncIterator[FencedStore]:
    worker = await store.register_worker(lease_seconds=LEASE_S, name="gamma")
    lease = await worker.acquire("s2")
    assert lease is not None
    yield store.fenced(lease)


async def test_a_failing_write_leaves_the_rest_of_its_batch(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        first = user_input("first")
        await store.events.add(first)
        failed: list[StoreError] = []

        async def add_again() -> None:
            try:
                await store.events.add(first)
            except StoreError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(store.events.add, user_input("second"))
            tg.start_soon(add_again)
            tg.start_soon(store.events.add, user_input("third"))
        assert len(failed) == 1 and f"event {first.id} is already stored" in str(failed[0])
        assert [e.text for e in await store.events.pending()] == ["first", "second", "third"]


async def test_writes_queued_together_commit_in_one_transaction(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        await store.events.add(user_input("alone"))
        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(store.events.add, user_input(f"together {n}"))
        transactions = sql(postgres_url, "SELECT count(DISTINCT xid) FROM events")
        assert transactions == [(2,)]


def conversation(n: int) -> list[Message]:
    """`n` rounds of a user message, a tool call and its result."""
    messages: list[Message] = []
    for i in range(n):
        messages.append(UserMessage(content=f"question {i}"))
        messages.append(AssistantMessage(content="", tool_calls=[ToolCall(id=f"c{i}", name="t")]))
        messages.append(ToolMessage(tool_call_id=f"c{i}", name="t", content=f"result {i}"))
    return messages


async def test_a_long_append_keeps_its_order_and_what_the_last_message_needs(
    postgres_url: str,
) -> None:
    async with holding(postgres_url) as (store, lease):
        messages = conversation(100)
        await store.fenced(lease).trajectories.append("s1", messages)
        assert await store.trajectories.load("s1") == messages
        assert await store.trajectories.sessions_to_resume() == ["s1"]  # ends with a result
        await store.fenced(lease).trajectories.append("s1", [AssistantMessage(content="done")])
        assert await store.trajectories.sessions_to_resume() == []
        await store.fenced(lease).trajectories.append("s1", [])
        assert len(await store.trajectories.load("s1")) == len(messages) + 1


@pytest.mark.parametrize(
    "terminate",
    [
        # Gone before the store takes them: the socket tells, without a round trip.
        pytest.param("pg_terminate_backend(pid, 5000)", id="ended-before"),
        # Taken at once, maybe before the server's goodbye arrives: the first command fails.
        pytest.param("pg_terminate_backend(pid)", id="ending-meanwhile"),
    ],
)
async def test_connections_the_server_ended_are_replaced_for_reads_and_writes(
    postgres_url: str, terminate: str
) -> None:
    async with holding(postgres_url) as (store, lease):
        for _ in range(2):
            # The server ends every connection of this database (a restart, an idle timeout).
            sql(
                postgres_url,
                f"SELECT {terminate} FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            assert [e.text for e in await store.events.pending("s1")] == ["waiting"]
            sql(
                postgres_url,
                f"SELECT {terminate} FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            await store.fenced(lease).trajectories.append("s1", [UserMessage(content="again")])
        assert len(await store.trajectories.load("s1")) == 2


async def test_a_write_whose_connection_the_server_ends_before_it_commits_is_applied_again(
    postgres_url: str,
) -> None:
    # The server ends the connection in the middle of a write (a restart, a terminated backend):
    # nothing of it was committed, so it is begun again, once, on a new connection.
    attempts: list[int] = []

    async def apply(conn: object) -> None:
        assert isinstance(conn, psycopg.AsyncConnection)
        attempts.append(conn.info.backend_pid)
        await conn.execute(
            "INSERT INTO channel_cursors (channel, key, value, updated_at) "
            "VALUES ('t', 'k', 'v', now())"
        )
        if len(attempts) == 1:
            sql(postgres_url, "SELECT pg_terminate_backend(%s, 5000)", (conn.info.backend_pid,))
            await conn.execute("SELECT 1")  # the server has ended it: this fails

    async with holding(postgres_url) as (store, _):
        await store._access.write(apply, "a cursor")
        assert len(attempts) == 2 and attempts[0] != attempts[1]
        assert sql(postgres_url, "SELECT value FROM channel_cursors WHERE channel = 't'") == [
            ("v",)
        ]


async def test_a_write_that_keeps_losing_its_connection_fails_saying_nothing_was_saved(
    postgres_url: str,
) -> None:
    async def apply(conn: object) -> None:
        assert isinstance(conn, psycopg.AsyncConnection)
        await conn.execute(
            "INSERT INTO channel_cursors (channel, key, value, updated_at) "
            "VALUES ('u', 'k', 'v', now())"
        )
        sql(postgres_url, "SELECT pg_terminate_backend(%s, 5000)", (conn.info.backend_pid,))
        await conn.execute("SELECT 1")

    async with holding(postgres_url) as (store, _):
        with pytest.raises(StoreError, match="Nothing of this write was saved"):
            await store._access.write(apply, "a cursor")
        assert sql(postgres_url, "SELECT value FROM channel_cursors WHERE channel = 'u'") == []
