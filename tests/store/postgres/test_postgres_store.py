"""What only the PostgreSQL store has: its schema versions, databases it must refuse, servers it
cannot reach, and several stores (workers) on one database. Everything both backends share is in
tests/store/test_repositories_conformance.py."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import anyio
import pytest

from servers.postgres import PostgresServer, start_postgres
from wakeful.errors import StoreError, UserError
from wakeful.events import user_input
from wakeful.store.schema import Migration

pytestmark = pytest.mark.anyio

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import MIGRATIONS, PostgresStore, apply_migrations  # noqa: E402


def sql(url: str, query: str) -> list[tuple[object, ...]]:
    """Run one statement on the test database, as an operator with psql would."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode())
        return cursor.fetchall() if cursor.description else []


# Every version, in order, as a database at the latest schema records them.
LATEST = [(n,) for n in range(1, len(MIGRATIONS) + 1)]


def tables(url: str) -> list[str]:
    rows = sql(
        url,
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = 'public' ORDER BY table_name",
    )
    return [str(name) for (name,) in rows]


async def test_a_new_database_gets_the_latest_schema_once(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(user_input("hello"))
    versions = sql(postgres_url, "SELECT version, description FROM schema_version")
    assert versions == [(n, step.description) for n, step in enumerate(MIGRATIONS, start=1)]
    assert {"events", "schema_version", "tasks", "timers", "trajectory"} <= set(
        tables(postgres_url)
    )
    async with await PostgresStore.open(postgres_url) as store:  # reopening changes nothing
        assert [e.text for e in await store.events.pending()] == ["hello"]
    assert len(sql(postgres_url, "SELECT * FROM schema_version")) == len(MIGRATIONS)


async def test_workers_starting_together_migrate_once(postgres_url: str) -> None:
    stores: list[PostgresStore] = []

    async def start() -> None:
        stores.append(await PostgresStore.open(postgres_url, pool_size=1))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(start)
    for store in stores:
        await store.close()
    assert sql(postgres_url, "SELECT version FROM schema_version ORDER BY version") == LATEST


async def test_a_database_from_a_newer_wakeful_is_refused_untouched(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url):
        pass
    sql(postgres_url, "INSERT INTO schema_version VALUES (99, 'from the future', now())")
    with pytest.raises(StoreError, match=r"schema version 99.*newer wakeful.*Nothing was changed"):
        await PostgresStore.open(postgres_url)
    assert sql(postgres_url, "SELECT max(version) FROM schema_version") == [(99,)]


async def test_another_programs_database_is_refused_untouched(postgres_url: str) -> None:
    sql(postgres_url, "CREATE TABLE invoices (id serial PRIMARY KEY, total numeric)")
    with pytest.raises(StoreError, match=r"not a wakeful store.*invoices.*CREATE DATABASE"):
        await PostgresStore.open(postgres_url)
    assert tables(postgres_url) == ["invoices"]


async def test_a_failing_migration_step_changes_nothing_of_that_step(postgres_url: str) -> None:
    broken = Migration("a step that fails half way", ("CREATE TABLE half (x int)", "NOT SQL"))
    conn = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    async with conn:
        with pytest.raises(
            StoreError, match=rf"to schema version {len(MIGRATIONS) + 1} .a step that fails half"
        ):
            await apply_migrations(conn, "the test database", (*MIGRATIONS, broken))
    assert "half" not in tables(postgres_url)
    assert sql(postgres_url, "SELECT version FROM schema_version ORDER BY version") == LATEST
    async with await PostgresStore.open(postgres_url):  # the real schema still opens
        pass


async def test_an_unreachable_server_is_named_with_the_way_out() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once it is closed
    url = f"postgresql://wakeful:secret-password@127.0.0.1:{port}/wakeful"
    with pytest.raises(
        StoreError, match="Could not connect to the PostgreSQL database 'wakeful'"
    ) as refused:
        await PostgresStore.open(url, connect_timeout_s=2)
    assert "Check that the server runs" in str(refused.value)
    assert "secret-password" not in str(refused.value)


async def test_a_url_that_is_not_a_connection_url_is_refused() -> None:
    with pytest.raises(UserError, match=r"not a PostgreSQL connection URL.*postgresql://"):
        await PostgresStore.open("postgresql://host/db?no_such_option=1")
    with pytest.raises(UserError, match="pool_size must be at least 1"):
        await PostgresStore.open("postgresql:///db", pool_size=0)


async def test_a_store_used_without_async_with_says_how_to_open_it(postgres_url: str) -> None:
    store = await PostgresStore.open(postgres_url)
    try:
        with pytest.raises(StoreError, match=r"async with await PostgresStore.open"):
            await store.events.add(user_input("too early"))
    finally:
        await store.close()


async def test_an_unreadable_row_is_reported_and_kept(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(user_input("fine"))
        sql(postgres_url, "UPDATE events SET data = '{not json'")
        with pytest.raises(
            StoreError, match=r"event #1 stored in the PostgreSQL database .* cannot be read"
        ):
            await store.events.pending()
    assert sql(postgres_url, "SELECT data FROM events") == [("{not json",)]


async def test_a_dropped_connection_is_replaced_without_losing_a_write(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        await store.events.add(user_input("before"))
        # The server ends every connection of this database (a restart, an idle timeout).
        sql(
            postgres_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        await store.events.add(user_input("after"))
        assert [e.text for e in await store.events.pending()] == ["before", "after"]


async def test_two_workers_store_a_redelivered_event_once(postgres_url: str) -> None:
    """Two workers receiving the same burst (a webhook retried on another worker): every event
    is stored once, and each is reported stored by exactly one of them."""
    burst = [user_input(f"delivery {i}") for i in range(30)]
    results: dict[str, list[bool]] = {}
    async with (
        await PostgresStore.open(postgres_url) as first,
        await PostgresStore.open(postgres_url) as second,
    ):

        async def deliver(name: str, store: PostgresStore) -> None:
            results[name] = [await store.events.add_new(event) for event in burst]

        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver, "first", first)
            tg.start_soon(deliver, "second", second)
        assert [a != b for a, b in zip(results["first"], results["second"], strict=True)] == [
            True
        ] * len(burst)
        assert await first.events.count() == {"pending": len(burst)}


async def test_times_are_stored_as_instants(postgres_url: str) -> None:
    event = user_input("when").model_copy(update={"ts": datetime(2025, 1, 1, tzinfo=UTC)})
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(event)
    [(ts,)] = sql(postgres_url, "SELECT ts FROM events")
    assert ts == datetime(2025, 1, 1, tzinfo=UTC)
    assert isinstance(ts, datetime) and ts.utcoffset() is not None


@pytest.mark.slow
async def test_while_the_server_is_down_writes_fail_clearly_and_resume_after(
    postgres_server: PostgresServer,
) -> None:
    """A server of its own, stopped and started again under a running store."""
    del postgres_server  # only for its skip where PostgreSQL is missing
    server = start_postgres()
    try:
        url = server.url(server.create_database())
        async with await PostgresStore.open(url, connect_timeout_s=2) as store:
            await store.events.add(user_input("before"))
            server.halt()
            with pytest.raises(StoreError, match=r"Could not save 1 event\(s\) in .*server runs"):
                await store.events.add(user_input("while down"))
            with pytest.raises(StoreError, match=r"Reading the PostgreSQL database .* failed"):
                await store.events.pending()
            server.start()
            await store.events.add(user_input("after"))
            assert [e.text for e in await store.events.pending()] == ["before", "after"]
    finally:
        server.stop()
