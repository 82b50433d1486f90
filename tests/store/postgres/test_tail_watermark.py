"""A tail of the events table across workers never skips a row committed late: two real
connections (two workers' transactions) commit their events out of seq order, and the reader's
tail still returns every event once, in an order no later commit can go back on."""

from __future__ import annotations

import pytest

from wakeful.events import Event, user_input

pytestmark = pytest.mark.anyio

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import MIGRATIONS, PostgresStore, apply_migrations  # noqa: E402
from wakeful.store.postgres.events import INSERT_EVENT, event_row  # noqa: E402
from wakeful.store.postgres.reader import (  # noqa: E402
    PostgresReader,
    TailPosition,
    open_postgres_reader,
)


def insert(conn: psycopg.Connection, event: Event) -> int:
    """Store `event` as a worker's writer would, in `conn`'s open transaction; its seq."""
    row = conn.execute(INSERT_EVENT + " RETURNING seq", event_row(event, "pending")).fetchone()
    assert row is not None
    return int(row[0])


def texts(reader: PostgresReader, after: TailPosition | None) -> tuple[list[str], TailPosition]:
    events, position = reader.tail_events(100, after=after)
    return [stored.event.text for stored in events], position


async def test_an_event_committed_after_a_later_seq_is_not_skipped(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(user_input("before"))
    with (
        open_postgres_reader(postgres_url) as reader,
        psycopg.connect(postgres_url) as worker_a,
        psycopg.connect(postgres_url) as worker_b,
    ):
        seen, position = texts(reader, None)
        assert seen == ["before"]

        # Worker A takes the smaller seq; worker B takes the next one and commits first.
        seq_a = insert(worker_a, user_input("from A"))
        seq_b = insert(worker_b, user_input("from B"))
        assert seq_a < seq_b
        worker_b.commit()
        # B's row is committed, but A's transaction, older, is still open: B is held back, or a
        # tail standing on B would never return A.
        assert texts(reader, position) == ([], position)

        worker_a.commit()
        seen, position = texts(reader, position)
        assert seen == ["from A", "from B"]
        assert texts(reader, position) == ([], position)


async def test_a_transaction_that_started_writing_earlier_but_took_a_later_seq(
    postgres_url: str,
) -> None:
    """The case a seq position cannot handle even below the watermark: A's transaction got its
    id first (an earlier write, such as a lease check), B took the smaller seq and is still
    open when A commits with the larger one."""
    async with await PostgresStore.open(postgres_url):
        pass
    with (
        open_postgres_reader(postgres_url) as reader,
        psycopg.connect(postgres_url) as worker_a,
        psycopg.connect(postgres_url) as worker_b,
    ):
        worker_a.execute("SELECT pg_current_xact_id()")  # A's transaction has its id now
        seq_b = insert(worker_b, user_input("from B"))
        seq_a = insert(worker_a, user_input("from A"))
        assert seq_b < seq_a
        worker_a.commit()

        seen, position = texts(reader, None)
        assert seen == ["from A"]
        assert position.seq == seq_a
        worker_b.commit()

        # A reader that went on from A's seq would have lost B for good ...
        assert reader.recent_events(100, after_rowid=seq_a) == []
        # ... the tail reads it.
        seen, position = texts(reader, position)
        assert seen == ["from B"]
        assert texts(reader, position) == ([], position)


async def test_a_rolled_back_transaction_holds_the_tail_only_while_it_is_open(
    postgres_url: str,
) -> None:
    async with await PostgresStore.open(postgres_url):
        pass
    with (
        open_postgres_reader(postgres_url) as reader,
        psycopg.connect(postgres_url) as worker_a,
        psycopg.connect(postgres_url) as worker_b,
    ):
        insert(worker_a, user_input("never stored"))
        insert(worker_b, user_input("stored"))
        worker_b.commit()
        assert texts(reader, None)[0] == []
        worker_a.rollback()
        assert texts(reader, None)[0] == ["stored"]


async def test_the_store_records_each_events_transaction_without_changing_its_inserts(
    postgres_url: str,
) -> None:
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add_many([user_input("one"), user_input("two")])
        await store.events.add(user_input("three"))
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT xid::text FROM events ORDER BY seq").fetchall()
    first, second, third = (int(xid) for (xid,) in rows)
    assert first == second < third  # one transaction per write


async def test_events_stored_before_the_upgrade_are_read_by_the_tail(postgres_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await apply_migrations(conn, "the test database", MIGRATIONS[:4])
        await conn.execute(
            "INSERT INTO events (id, session, kind, ts, status, data) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            event_row(user_input("old"), "pending"),
        )
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(user_input("new"))
    with open_postgres_reader(postgres_url) as reader:
        assert texts(reader, None)[0] == ["old", "new"]


async def test_the_tail_orders_transactions_by_number_across_a_power_of_ten(
    postgres_url: str,
) -> None:
    """Transaction ids 9998, 9999, 10000 … sort as numbers (as text, "10000" < "9999")."""
    async with await PostgresStore.open(postgres_url):
        pass
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        current = int(conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
        boundary = 10 ** len(str(current + 3))
        while current < boundary - 3:
            current = int(conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
        # One transaction per event: their ids straddle the power of ten.
        stored = [f"event {n}" for n in range(6)]
        for text in stored:
            insert(conn, user_input(text))
        xids = [int(x) for (x,) in conn.execute("SELECT xid::text FROM events ORDER BY seq")]
    assert min(xids) < boundary <= max(xids)
    with open_postgres_reader(postgres_url) as reader:
        assert texts(reader, None)[0] == stored
        last, _ = reader.tail_events(1)
        assert [e.event.text for e in last] == ["event 5"]
        _, start = reader.tail_events(1, after=TailPosition(0, 0))
        assert texts(reader, start)[0] == stored[1:]
