"""The PostgreSQL store: the core four repositories on one PostgreSQL database, for the day
several wakeful workers share one store (see the package docs for what is there and what not)."""

from __future__ import annotations

from types import TracebackType
from typing import Self

import anyio
import psycopg
from anyio.abc import TaskGroup
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...errors import StoreError, UserError
from .access import Connection, PostgresAccess, database_name
from .events import PostgresEvents
from .schema import apply_migrations
from .tasks import PostgresTasks
from .timers import PostgresTimers
from .trajectories import PostgresTrajectories

__all__ = ["DEFAULT_POOL_SIZE", "PostgresStore"]

DEFAULT_POOL_SIZE = 8
DEFAULT_CONNECT_TIMEOUT_S = 10.0


class PostgresStore:
    """Events, trajectories, task records and timers on a PostgreSQL database.

    Open it as an async context manager (``open`` is awaited first), which runs its writer::

        async with await PostgresStore.open("postgresql://wakeful@db/wakeful") as store:
            await store.events.add(event)

    Every write method returns once its write is committed; writes made from one event loop are
    applied in the order they were made (one writer applies them, see :mod:`.access`).
    """

    def __init__(self, pool: AsyncConnectionPool[Connection], where: str) -> None:
        """Use :meth:`PostgresStore.open`: this takes a pool already open on a migrated
        database."""
        self.where = where
        self._access = PostgresAccess(pool, where)
        self._task_group: TaskGroup | None = None
        self.events = PostgresEvents(self._access)
        self.trajectories = PostgresTrajectories(self._access)
        self.task_records = PostgresTasks(self._access)
        self.timer_records = PostgresTimers(self._access)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> PostgresStore:
        """Connect to the database at `url` (``postgresql://USER@HOST:PORT/DATABASE``), creating
        or upgrading its schema, and open a pool of up to `pool_size` connections.

        A server that cannot be reached, a database of another program, or one written by a
        newer wakeful is refused with a StoreError that says which (the database untouched).
        """
        if pool_size < 1:
            raise UserError(f"pool_size must be at least 1, got {pool_size}.")
        where = database_name(url)
        try:
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=max(1, round(connect_timeout_s))
            )
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"Could not connect to {where}: {str(exc).strip()}. Check that the server runs, "
                "that the URL names it, and that this user may log in to that database."
            ) from exc
        async with conn:
            await apply_migrations(conn, where)
        pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            # A connection the server dropped (a restart, an idle timeout) is replaced when
            # taken, not discovered by the write that uses it; one round trip per checkout.
            check=AsyncConnectionPool.check_connection,
            open=False,
            name="wakeful-store",
            # How long a read or write waits for a connection (the server is down) before it
            # fails with a StoreError, instead of the pool's 30 s.
            timeout=connect_timeout_s,
            # After an outage the pool reconnects with a growing delay (1 s, 2 s, 4 s …); it gives
            # up that series after this long, and the next read or write starts a fresh one, so
            # the store is usable again within seconds of the server's return.
            reconnect_timeout=max(connect_timeout_s, 1.0),
        )
        try:
            await pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout as exc:
            await pool.close()
            raise StoreError(
                f"Could not open connections to {where} within {connect_timeout_s} s. Check "
                "that the server accepts this many connections (max_connections)."
            ) from exc
        return cls(pool, where)

    @property
    def closed(self) -> bool:
        return self._access.closed

    async def flush(self) -> None:
        """Wait until every write queued so far (including `*_nowait` ones) is committed."""
        await self._access.flush()

    async def close(self) -> None:
        """Finish every queued write and close the pool. Safe to call twice."""
        await self._access.close()

    async def __aenter__(self) -> Self:
        if self._task_group is not None or self._access.closed:
            raise StoreError(
                f"The store on {self.where} was entered already; open a new one with "
                "`async with await PostgresStore.open(url) as store:`."
            )
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._access.run_writer)
        self._access.started = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._task_group is not None
        try:
            await self.close()
        finally:
            # The writer has finished its queue and ended: the group has nothing to cancel, and
            # an error of the body is the caller's to see (so it is not handed to the group).
            await self._task_group.__aexit__(None, None, None)
