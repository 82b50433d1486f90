"""The PostgreSQL store: the core four repositories on one PostgreSQL database, for the day
several wakeful workers share one store (see the package docs for what is there and what not)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
import psycopg
from anyio.abc import TaskGroup
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...errors import StoreError, UserError
from ..delegation import RepositoryMethods
from .access import Connection, PostgresAccess, check_taken_connection, database_name
from .audit import PostgresAuditLog
from .cases import PostgresCases
from .channel_cursors import PostgresChannelCursors, PostgresConnectedChannels
from .confirmations import PostgresConfirmations
from .events import PostgresEvents
from .human_requests import PostgresHumanRequests
from .idempotency import PostgresIdempotencyKeys
from .leases import (
    IDLE_IN_TRANSACTION_TIMEOUT_S,
    Lease,
    Worker,
    WorkerInfo,
    list_workers,
    register_worker,
)
from .messages import PostgresMessages
from .roles import PostgresRoleLeases
from .schema import apply_migrations
from .subagents import PostgresSubagents
from .tasks import PostgresTasks
from .timers import PostgresTimers
from .trajectories import PostgresTrajectories
from .wakeups import OnWake, WakeupListener

__all__ = ["DEFAULT_POOL_SIZE", "FencedStore", "PostgresStore"]

DEFAULT_POOL_SIZE = 8
DEFAULT_CONNECT_TIMEOUT_S = 10.0


class PostgresStore(RepositoryMethods):
    """Events, trajectories, task records and timers on a PostgreSQL database.

    Open it as an async context manager (``open`` is awaited first), which runs its writer::

        async with await PostgresStore.open("postgresql://wakeful@db/wakeful") as store:
            await store.events.add(event)

    Every write method returns once its write is committed; writes made from one event loop are
    applied in the order they were made (one writer applies them, see :mod:`.access`). It is a
    :class:`wakeful.core.runtime_store.RuntimeStore`, so the runtime runs on it unchanged; the
    methods it inherits from :class:`RepositoryMethods` delegate to the repositories.
    """

    # No file on this machine: the database lives on its server (see `where`).
    path: Path | None = None

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
        self.messages = PostgresMessages(self._access)
        self.subagents = PostgresSubagents(self._access)
        self.cases = PostgresCases(self._access)
        self.human_requests = PostgresHumanRequests(self._access)
        # Names this opening of the store (one worker's run): the owner of its idempotency
        # claims (see PostgresIdempotencyKeys for what another owner's claim means).
        self.instance_id = secrets.token_hex(8)
        self.idempotency_keys = PostgresIdempotencyKeys(self._access, self.instance_id)
        self.confirmations = PostgresConfirmations(self._access)
        self.audit_log = PostgresAuditLog(self._access)
        self.channel_cursors = PostgresChannelCursors(self._access)
        self.connected_channels = PostgresConnectedChannels(self._access)

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
            # taken, not discovered by the write that uses it; a round trip only for one the
            # server sent something to while it was idle.
            check=check_taken_connection,
            configure=_end_abandoned_transactions,
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

    async def register_worker(self, *, lease_seconds: float, name: str | None = None) -> Worker:
        """Register this process as a worker sharing the database (see :mod:`.leases`); the
        task records it saves from now on name it."""
        worker = await register_worker(
            self._access.pool, self.where, lease_seconds=lease_seconds, name=name
        )
        self._access.worker = worker.id
        return worker

    def role_leases(self, owner: str, *, lease_seconds: float) -> PostgresRoleLeases:
        """The roles worker `owner` holds one at a time among the workers (see :mod:`.roles`):
        the runtime runs a channel that pulls only while it holds the channel's role."""
        return PostgresRoleLeases(self._access.pool, self.where, owner, lease_seconds)

    async def workers(self) -> list[WorkerInfo]:
        """Every registered worker with the sessions it holds (``wakeful workers``)."""
        return await list_workers(self._access.pool, self.where)

    def fenced(self, lease: Lease) -> FencedStore:
        """The repositories of `lease.session` for the worker holding `lease`: each write first
        checks, in its own transaction, that the lease is still held (else
        :class:`~.leases.LeaseLost`, nothing saved); a write for another session is refused.

        A view rather than a `lease` argument on each write or a fence the runtime installs per
        session: its repositories are the core protocols unchanged, so a session is handed the
        view as its store and none of its writes can skip the check; and the view is bound to
        one epoch, so a session object left over from an earlier lease of the same worker cannot
        write under a later one."""
        return FencedStore(
            lease,
            PostgresEvents(self._access, lease),
            PostgresTrajectories(self._access, lease),
            PostgresTasks(self._access, lease),
            PostgresTimers(self._access, lease),
            PostgresMessages(self._access, lease),
            PostgresSubagents(self._access, lease),
            PostgresHumanRequests(self._access, lease),
        )

    def wakeup_listener(self, on_wake: OnWake, on_missed: Callable[[], None]) -> WakeupListener:
        """A listener for the sessions that get pending events, on a connection of its own (run
        its :meth:`~WakeupListener.run` in the worker's task group)."""
        url = self._access.pool.conninfo
        assert isinstance(url, str), "open() gives the pool the store's URL"
        return WakeupListener(url, on_wake, on_missed)

    @property
    def closed(self) -> bool:
        return self._access.closed

    # -- disk space: the server's concern. PostgreSQL refuses a write on a full disk (a
    # StoreError, nothing saved); nothing is held in memory, so the store is never "short" and
    # its watcher is never called. --

    @property
    def held_writes(self) -> int:
        """Always 0: no write is held in memory for a full disk."""
        return 0

    @property
    def space_short(self) -> bool:
        """Always False: the database server, not this store, handles its disk filling."""
        return False

    def watch_space(self, listener: Callable[[bool], None]) -> None:
        """Accepted for the runtime's sake and never called (see :attr:`space_short`)."""

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


@dataclass(frozen=True)
class FencedStore:
    """The session-scoped repositories of one session, fenced by the lease its worker holds
    (:meth:`PostgresStore.fenced`). The worker hands this, not the store, to the session it
    runs, so no write of that session can skip the lease check; when the lease is lost, the
    session is dropped with it and a new lease gets a new view.

    Each repository's docs say which of its writes are the session's (checked against the
    lease) and which record facts that any worker's channel may bring in (a read receipt, a
    person's answer) and so pass through unchecked."""

    lease: Lease
    events: PostgresEvents
    trajectories: PostgresTrajectories
    task_records: PostgresTasks
    timer_records: PostgresTimers
    messages: PostgresMessages
    subagents: PostgresSubagents
    human_requests: PostgresHumanRequests


async def _end_abandoned_transactions(conn: Connection) -> None:
    """Have the server end a transaction of this connection that waits on its client for too
    long (a worker frozen inside a write), so the lease row it locked is free again."""
    timeout_ms = round(IDLE_IN_TRANSACTION_TIMEOUT_S * 1000)
    await conn.execute(f"SET idle_in_transaction_session_timeout = {timeout_ms}")
