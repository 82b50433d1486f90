"""The write side of the store: one thread owns the write connection and commits in batches.

Every awaited write returns once the batch holding it is committed, and concurrent writers share
one commit (group commit), which is what allows thousands of events a second with fsync on. A
write that fails is undone alone (a savepoint per write); the rest of its batch still commits.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..errors import StoreError, UserError
from .schema import apply_migrations, connect, not_a_store

__all__ = ["MAX_BATCH", "WriteSync", "WriterThread", "open_write_connection"]

log = logging.getLogger(__name__)

T = TypeVar("T")
WriteSync = Literal["full", "normal"]

MAX_BATCH: Final = 1024


def open_write_connection(path: Path, synchronous: WriteSync) -> sqlite3.Connection:
    """The write connection to `path`, in WAL mode, with the schema brought up to date."""
    conn = connect(path, read_only=False)
    try:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise not_a_store(path, exc) from exc
        if str(mode).lower() != "wal":
            raise StoreError(
                f"The store {path} could not be switched to WAL mode (it stayed in {mode!r}); "
                "it may be on a network file system. Put it on a local disk."
            )
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        apply_migrations(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


@dataclass(eq=False)
class _Write:
    """One write waiting for the writer thread. `done` is None for fire-and-forget writes."""

    apply: Callable[[sqlite3.Connection], object]
    what: str
    token: anyio.lowlevel.EventLoopToken | None
    done: anyio.Event | None
    result: object = None
    error: BaseException | None = None


_STOP: Final = object()


def _set_done(writes: list[_Write]) -> None:
    for write in writes:
        assert write.done is not None
        write.done.set()


class WriterThread(threading.Thread):
    """The one thread that writes: drains the queue, commits each batch in one transaction.

    Event loops hand it writes with :meth:`submit` (or :meth:`submit_nowait`); :meth:`stop` lets
    it finish what is queued, close the connection and end.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        super().__init__(name=f"wakeful store writer ({path.name})", daemon=True)
        self.conn = conn
        self.path = path
        self.queue: queue.SimpleQueue[_Write | object] = queue.SimpleQueue()

    async def submit(self, apply: Callable[[sqlite3.Connection], T], what: str) -> T:
        """Queue `apply` and return its result once the batch holding it is committed."""
        if not self.is_alive():
            raise StoreError(
                f"The writer thread of the store {self.path} has stopped (see the log for why). "
                "Restart the runtime."
            )
        write = _Write(apply, what, anyio.lowlevel.current_token(), anyio.Event())
        self.queue.put(write)
        assert write.done is not None
        # The write happens whether or not the caller is cancelled, so wait for its outcome.
        with anyio.CancelScope(shield=True):
            await write.done.wait()
        if write.error is not None:
            raise write.error
        return cast(T, write.result)

    def submit_nowait(self, apply: Callable[[sqlite3.Connection], object], what: str) -> None:
        """Queue `apply` without waiting; a failure is logged."""
        self.queue.put(_Write(apply, what, None, None))

    def stop(self) -> None:
        """Let the thread commit every write queued so far, close the connection and end."""
        self.queue.put(_STOP)

    def run(self) -> None:
        try:
            stopping = False
            while not stopping:
                item = self.queue.get()
                if item is _STOP:
                    break
                batch = [cast(_Write, item)]
                while len(batch) < MAX_BATCH:
                    try:
                        item = self.queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stopping = True
                        break
                    batch.append(cast(_Write, item))
                try:
                    self._commit(batch)
                finally:
                    self._deliver(batch)
        finally:
            self.conn.close()

    def _commit(self, batch: list[_Write]) -> None:
        conn = self.conn
        # A savepoint per write lets one bad write fail alone; a batch of one needs none.
        isolate = len(batch) > 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in batch:
                if isolate:
                    conn.execute("SAVEPOINT one_write")
                try:
                    write.result = write.apply(conn)
                except Exception as exc:
                    # Undo this write only; its caller gets the error, the batch carries on.
                    write.error = _as_store_error(exc, self.path, write.what)
                    if not isolate:
                        self._rollback()
                        return
                    conn.execute("ROLLBACK TO one_write")
                if isolate:
                    conn.execute("RELEASE one_write")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            for write in batch:
                if write.error is None:
                    write.error = StoreError(
                        f"Could not commit {write.what} to the store {self.path}: {exc}. It was "
                        "not saved; check free disk space and file permissions."
                    )
                    write.error.__cause__ = exc

    def _rollback(self) -> None:
        if not self.conn.in_transaction:
            return
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            # SQLite already rolled back (e.g. after an I/O error); the writer must stay alive.
            log.warning("rollback in %s failed: %s", self.path, exc)

    def _deliver(self, batch: list[_Write]) -> None:
        by_loop: dict[anyio.lowlevel.EventLoopToken, list[_Write]] = {}
        for write in batch:
            if write.done is None:
                if write.error is not None:
                    log.error("background store write failed: %s", write.error)
                continue
            assert write.token is not None
            by_loop.setdefault(write.token, []).append(write)
        for token, writes in by_loop.items():
            try:
                anyio.from_thread.run_sync(_set_done, writes, token=token)
            except RuntimeError as exc:
                # The waiting event loop has ended; nobody is left to tell.
                log.warning("store write finished after its event loop closed: %s", exc)


def _as_store_error(exc: Exception, path: Path, what: str) -> BaseException:
    if isinstance(exc, StoreError | UserError):
        return exc
    if isinstance(exc, sqlite3.IntegrityError):
        error = StoreError(
            f"Could not save {what} in {path}: {exc}. Something with the same id is already "
            "stored; give the new item a fresh id."
        )
    elif isinstance(exc, sqlite3.Error):
        error = StoreError(f"Could not save {what} in {path}: {exc}. It was not saved.")
    else:
        return exc
    error.__cause__ = exc
    return error
