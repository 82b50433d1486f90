"""The writer on a real PostgreSQL: batches of two workers that lock rows in opposite orders
deadlock; the server rolls one back, and its writes are applied again one by one, none lost."""

from __future__ import annotations

import anyio
import pytest

from wakeful.events import user_input

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore  # noqa: E402


@pytest.mark.anyio
async def test_batches_locking_rows_in_opposite_orders_lose_no_write(postgres_url: str) -> None:
    events = [user_input(f"event {n}", session=f"s{n % 7}") for n in range(150)]
    ids = [event.id for event in events]
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        await worker_a.events.add_many(events)

        async def consume(store: PostgresStore, event_id: str) -> None:
            await store.events.mark([event_id], "consumed")

        # Queued together, each worker's marks become batches, one in each order.
        async with anyio.create_task_group() as group:
            for mine, theirs in zip(ids, reversed(ids), strict=True):
                group.start_soon(consume, worker_a, mine)
                group.start_soon(consume, worker_b, theirs)
        assert await worker_b.events.count() == {"consumed": len(ids)}
