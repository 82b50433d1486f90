"""What the PostgreSQL repositories share: the connection pool, the one writer that applies
writes in order, and the translation of driver errors into :class:`StoreError`.

Reads take any connection of the pool and run concurrently. Writes go through one queue to one
writer task, which applies them in the order they were queued (those queued while it was busy
together, in one transaction, as the SQLite writer batches them; a batch in which a write fails is
applied again one write per transaction, so each write still succeeds or fails alone): that is
the protocols' promise ("writes made from one event loop are applied in the order they were
made"), and it also means that within one process a row's `seq` (identity column) is committed
in increasing order, so a reader tailing `seq > N` never skips a row committed later with a
smaller number. A write that was queued is applied even if its caller is cancelled meanwhile, as
in the SQLite store.

A write may carry a :class:`~.leases.Lease` (a *fenced* write, made for a session a worker owns):
the writer then checks the lease in the write's own transaction, first, and the write fails with
:class:`~.leases.LeaseLost` (nothing of it saved) when the lease is no longer valid. See
:mod:`.leases` for why that check cannot race with a takeover. The hottest fenced writes (a
trajectory's appends, an events' mark) check the lease in their own statement instead
(:data:`~.leases.LEASE_ROW`), one round trip fewer.

Where a worker's time goes (``bench/workers_scaling.py``, docs/benchmarks.md): round trips, each
costing the worker's Python and the server more than the statement itself. So a batch has no
savepoint per write (two round trips each), and a connection taken from the pool is checked by a
round trip only when the server has sent something on it while it was idle (see
:func:`check_taken_connection`).
"""

from __future__ import annotations

import logging
import math
import select
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

__all__ = [
    "Connection",
    "PostgresAccess",
    "check_taken_connection",
    "database_name",
    "decode_row",
    "insert_new",
]

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


async def check_taken_connection(conn: Connection) -> None:
    """The pool's check of a connection being taken: raise (the pool then replaces it) when the
    server ended it while it sat idle in the pool (a restart, an idle timeout, a terminated
    backend), so no read or write discovers that by failing.

    The server's goodbye (an error message, then the end of the stream) makes the idle socket
    readable, which a `select` sees without a round trip; only then is the connection tried with
    an empty query, which fails when it is closed (and merely consumes a notice or a parameter
    report the server may send unprompted). Trying every connection taken cost a fifth of a
    worker's round trips."""
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        await AsyncConnectionPool.check_connection(conn)


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
        """Apply the writes queued meanwhile in one transaction and report them once committed.

        The batch stands or falls as one (no savepoint per write: two round trips each). When a
        write of it fails (its own error: a lease lost, an id stored already), or the server
        rolls it back to break a deadlock (or a serialization failure) with another worker's
        transaction, the batch is rolled back and applied again one write per transaction, in
        order: each write then succeeds or fails alone, as if it had not been batched, and none
        is lost. (A batch holds its locks longer than one write does, so this is also where two
        workers locking rows in opposite orders meet.)"""
        if len(batch) > 1 and await self._applied_together(batch):
            return
        for item in batch:
            await self._apply_alone(item)

    async def _applied_together(self, batch: Sequence[_QueuedWrite]) -> bool:
        """Apply `batch` in one transaction. True when every write of it is reported: committed,
        or failed with the connection; False when it was rolled back and must be applied one
        write at a time (a write of it failed, or the server broke a deadlock)."""

        async def run_all(conn: Connection) -> None:
            for item in batch:
                await self._run(conn, item)

        try:
            await self._transaction(run_all)
        except _ROLLED_BACK as exc:
            log.info(
                "A batch of %d writes to %s was rolled back (%s); applying them one by one",
                len(batch),
                self.where,
                str(exc).strip(),
            )
            return False
        except psycopg.OperationalError as exc:
            # The connection or the commit failed: nothing of the batch was saved.
            for item in batch:
                self._finish(item, self._write_error(item.what, exc))
            return True
        except Exception:
            # Not swallowed: applied alone, the failing write reports its own error.
            return False
        for item in batch:
            self._finish(item, None)
        return True

    async def _apply_alone(self, item: _QueuedWrite) -> None:
        """Apply one write in its own transaction and report it; tried again (up to
        :data:`ROLLBACK_ATTEMPTS` in all) when the server rolls it back for a deadlock."""
        for attempt in range(1, ROLLBACK_ATTEMPTS + 1):
            try:
                outcome = await self._apply_one(item)
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

    async def _apply_one(self, item: _QueuedWrite) -> BaseException | None:
        """Apply one write in a transaction of its own; return why it failed, or None."""

        async def run(conn: Connection) -> None:
            await self._run(conn, item)

        try:
            await self._transaction(run)
        except psycopg.OperationalError:
            raise  # the connection is gone, or a deadlock: _apply_alone decides
        except psycopg.Error as exc:
            return self._write_error(item.what, exc)
        except (StoreError, UserError) as exc:
            return exc
        except Exception as exc:
            # Not swallowed: raised to the write's caller (or logged for a nowait write). The
            # writer itself goes on, so one faulty write cannot leave every later one waiting.
            return exc
        return None

    async def _transaction(self, body: Callable[[Connection], Awaitable[None]]) -> None:
        """Run `body` in a transaction on a connection of the pool. When the server ends the
        connection before the transaction commits (it sat ended in the pool and fails its
        BEGIN, or the server ends it while `body` runs: a restart, a terminated backend),
        nothing of it was committed: it is replaced and the transaction begun again, once.
        A connection lost while committing is not: the commit may have happened. (The pool's
        check sees an idle connection's end only once the server's goodbye has arrived: see
        :func:`check_taken_connection`.)"""
        for last in (False, True):
            taken = began = committing = False
            held: Connection | None = None
            try:
                async with self.pool.connection() as conn:
                    taken, held = True, conn
                    async with conn.transaction():
                        began = True
                        await body(conn)
                        committing = True
                return
            except psycopg.OperationalError:
                ended = held is not None and held.broken
                if not taken or last or committing or (began and not ended):
                    raise

    @staticmethod
    async def _run(conn: Connection, item: _QueuedWrite) -> None:
        """Run one write in the caller's transaction: its lease checked first when it is fenced."""
        if item.fence is not None:
            await check_lease(conn, item.fence, item.what)
        item.result = await item.apply(conn)

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
        """The rows of one query, on any connection of the pool (tried again once on another
        when the server had ended the one taken)."""
        self.check_open()
        for last in (False, True):
            taken = False
            try:
                async with self.pool.connection() as conn:
                    taken = True
                    cursor = await conn.execute(query, params)
                    return await cursor.fetchall()
            except psycopg.Error as exc:
                # A connection the server ended while it sat idle fails the query, its first
                # command: read again, once, on another (see _transaction).
                if taken and not last and isinstance(exc, psycopg.OperationalError):
                    continue
                raise StoreError(
                    f"Reading {self.where} failed: {exc}. Check that the server runs and is "
                    "reachable, then try again."
                ) from exc
        raise AssertionError("the last attempt returns or raises")

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
