"""What the PostgreSQL repositories share: the connection pool, the one writer that applies
writes in order, and the translation of driver errors into :class:`StoreError`.

Reads take any connection of the pool and run concurrently. Writes go through one queue to one
writer task, which applies them in the order they were queued (those queued while it was busy
together, in one transaction with a savepoint for each, as the SQLite writer batches them): that is
the protocols' promise ("writes made from one event loop are applied in the order they were
made"), and it also means that within one process a row's `seq` (identity column) is committed
in increasing order, so a reader tailing `seq > N` never skips a row committed later with a
smaller number. A write that was queued is applied even if its caller is cancelled meanwhile, as
in the SQLite store.

A write may carry a :class:`~.leases.Lease` (a *fenced* write, made for a session a worker owns):
the writer then checks the lease in the write's own transaction, first, and the write fails with
:class:`~.leases.LeaseLost` (nothing of it saved) when the lease is no longer valid. See
:mod:`.leases` for why that check cannot race with a takeover.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

import anyio
import psycopg
import psycopg.errors
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from ...errors import StoreError, UserError
from ..rows import decode_row
from .leases import Lease, check_lease

__all__ = ["Connection", "PostgresAccess", "database_name", "decode_row", "insert_new"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.AsyncConnection[TupleRow]
Apply = Callable[[Connection], Awaitable[Any]]

# How many times one write is tried when the server rolls its transaction back to break a
# deadlock or a serialization conflict with another worker's (PostgreSQL's advice: try again).
ROLLBACK_ATTEMPTS: Final = 3
# What the server raises when it rolled a transaction back for such a conflict (psycopg's
# DeadlockDetected and SerializationFailure are not subclasses of its TransactionRollback).
_ROLLED_BACK: Final = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
)


def database_name(url: str) -> str:
    """How errors name the database of `url`: its name and host, never its password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise UserError(
            f"The store URL is not a PostgreSQL connection URL ({str(exc).strip()}). Write it as "
            "postgresql://USER@HOST:PORT/DATABASE."
        ) from exc
    name = params.get("dbname") or params.get("user") or "postgres"
    host = params.get("host") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    return f"the PostgreSQL database {name!r} on {host}{port}"


async def insert_new(
    conn: Connection, sql: str, row: Sequence[object], *, constraint: str, taken: str
) -> None:
    """Insert one row whose id must be new: a UserError saying `taken` (the fix included) when
    it breaks the unique `constraint`; any other violation is raised as it is."""
    try:
        await conn.execute(sql, row)
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != constraint:
            raise
        raise UserError(taken) from exc


@dataclass
class _QueuedWrite:
    apply: Apply
    what: str
    # None for a write nobody waits for (its failure is logged).
    done: anyio.Event | None
    # The lease checked before `apply`, in its transaction (a fenced write); None: unfenced.
    fence: Lease | None = None
    result: object = None
    error: BaseException | None = field(default=None)


class PostgresAccess:
    """The pool and the writer of one PostgreSQL store, shared by its repositories.

    :meth:`run_writer` is the writer task; the store runs it in its task group while open.
    """

    def __init__(self, pool: AsyncConnectionPool[Connection], where: str) -> None:
        self.pool = pool
        self.where = where
        self._send: MemoryObjectSendStream[_QueuedWrite]
        self._receive: MemoryObjectReceiveStream[_QueuedWrite]
        self._send, self._receive = anyio.create_memory_object_stream[_QueuedWrite](math.inf)
        self._writer_done = anyio.Event()
        self.started = False
        self.closed = False
        # The worker registered on this store (``PostgresStore.register_worker``), recorded with
        # the tasks it saves; None for a store used without workers (one process).
        self.worker: str | None = None

    def check_open(self) -> None:
        if self.closed:
            raise StoreError(
                f"The store on {self.where} is closed. Keep it open for as long as the runtime "
                "runs: close it only after the task group that uses it has finished."
            )
        if not self.started:
            raise StoreError(
                f"The store on {self.where} is not started: its writer runs in a task group. "
                "Open it with `async with await PostgresStore.open(url) as store:`."
            )

    async def run_writer(self) -> None:
        """Apply queued writes in order until :meth:`close`, then finish the queue."""
        try:
            async with self._receive:
                async for first in self._receive:
                    batch = [first]
                    while True:
                        try:
                            batch.append(self._receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    # Shielded: a write already queued is applied even while the store closes.
                    with anyio.CancelScope(shield=True):
                        await self._apply_batch(batch)
        finally:
            self._writer_done.set()

    async def _apply_batch(self, batch: Sequence[_QueuedWrite]) -> None:
        """Apply the writes queued meanwhile in one transaction, each in a savepoint of its
        own (a write that fails leaves the others), and report them once committed.

        A batch the server rolled back to break a deadlock (or a serialization failure) with
        another worker's transaction is applied again one write per transaction, in order: a
        batch holds its locks longer than one write does, so this is where two workers locking
        rows in opposite orders meet, and no write is lost to it."""
        if len(batch) == 1:
            await self._apply_alone(batch[0])
            return
        outcomes: list[BaseException | None] = []
        try:
            async with self.pool.connection() as conn, conn.transaction():
                for item in batch:
                    outcomes.append(await self._apply_one(conn, item))
        except _ROLLED_BACK as exc:
            log.info(
                "A batch of %d writes to %s was rolled back (%s); applying them one by one",
                len(batch),
                self.where,
                str(exc).strip(),
            )
            for item in batch:
                await self._apply_alone(item)
            return
        except psycopg.Error as exc:
            # The connection or the commit failed: nothing of the batch was saved.
            for item in batch:
                self._finish(item, self._write_error(item.what, exc))
            return
        for item, outcome in zip(batch, outcomes, strict=True):
            self._finish(item, outcome)

    async def _apply_alone(self, item: _QueuedWrite) -> None:
        """Apply one write in its own transaction and report it; tried again (up to
        :data:`ROLLBACK_ATTEMPTS` in all) when the server rolls it back for a deadlock."""
        for attempt in range(1, ROLLBACK_ATTEMPTS + 1):
            try:
                async with self.pool.connection() as conn:
                    outcome = await self._apply_one(conn, item)
            except _ROLLED_BACK as exc:
                if attempt < ROLLBACK_ATTEMPTS:
                    continue
                self._finish(item, self._write_error(item.what, exc))
                return
            except psycopg.Error as exc:
                self._finish(item, self._write_error(item.what, exc))
                return
            self._finish(item, outcome)
            return

    async def _apply_one(self, conn: Connection, item: _QueuedWrite) -> BaseException | None:
        """Apply one write in a transaction (a savepoint inside the batch's); return why it
        failed, or None."""
        try:
            async with conn.transaction():
                if item.fence is not None:
                    await check_lease(conn, item.fence, item.what)
                item.result = await item.apply(conn)
        except psycopg.OperationalError:
            raise  # the connection is gone: _apply_batch fails the whole batch
        except psycopg.Error as exc:
            return self._write_error(item.what, exc)
        except (StoreError, UserError) as exc:
            return exc
        except Exception as exc:
            # Not swallowed: raised to the write's caller (or logged for a nowait write). The
            # writer itself goes on, so one faulty write cannot leave every later one waiting.
            return exc
        return None

    def _finish(self, item: _QueuedWrite, error: BaseException | None) -> None:
        item.error = error
        if item.done is not None:
            item.done.set()
        elif error is not None:
            log.error("A queued write (%s) to %s failed: %s", item.what, self.where, error)

    def _write_error(self, what: str, exc: psycopg.Error) -> StoreError:
        if isinstance(exc, psycopg.OperationalError):
            way_out = "check that the server runs and is reachable, then try again"
        else:
            way_out = "the database refused it as it is"
        error = StoreError(
            f"Could not save {what} in {self.where}: {str(exc).strip()}. Nothing of this write "
            f"was saved; {way_out}."
        )
        error.__cause__ = exc
        return error

    async def write(
        self,
        apply: Callable[[Connection], Awaitable[T]],
        what: str,
        *,
        fence: Lease | None = None,
    ) -> T:
        """Queue `apply` (run in one transaction on the writer) and return its result once
        committed; a failure is raised here, as a StoreError. With `fence`, the lease is checked
        first in that transaction (:class:`~.leases.LeaseLost` when it is no longer held)."""
        self.check_open()
        item = _QueuedWrite(apply, what, anyio.Event(), fence)
        self._send.send_nowait(item)
        assert item.done is not None
        await item.done.wait()
        if item.error is not None:
            raise item.error
        return cast(T, item.result)

    def write_nowait(self, apply: Apply, what: str, *, fence: Lease | None = None) -> None:
        """Queue `apply` without waiting; a failure is logged. :meth:`flush` waits for it."""
        self.check_open()
        self._send.send_nowait(_QueuedWrite(apply, what, None, fence))

    async def flush(self) -> None:
        """Wait until every write queued so far is committed."""

        async def nothing(conn: Connection) -> None:
            return None

        await self.write(nothing, "a flush")

    async def read(self, query: str, params: Sequence[object] = ()) -> list[TupleRow]:
        """The rows of one query, on any connection of the pool."""
        self.check_open()
        try:
            async with self.pool.connection() as conn:
                cursor = await conn.execute(query, params)
                return await cursor.fetchall()
        except psycopg.Error as exc:
            raise StoreError(
                f"Reading {self.where} failed: {exc}. Check that the server runs and is "
                "reachable, then try again."
            ) from exc

    async def close(self) -> None:
        """Let the writer finish every queued write, then close the pool."""
        if self.closed:
            return
        self.closed = True
        self._send.close()
        if self.started:
            await self._writer_done.wait()
        else:
            self._receive.close()
        await self.pool.close()
