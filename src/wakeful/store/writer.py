"""The write side of the store: one thread owns the write connection and commits in batches.

Every awaited write returns once the batch holding it is committed, and concurrent writers share
one commit (group commit), which is what allows thousands of events a second with fsync on. A
write that fails is undone alone (a savepoint per write); the rest of its batch still commits.

When the disk is full (SQLITE_FULL), a write that keeps work under way (`keep=True`: trajectory
messages, event marks, task and timer state) is not failed: the thread holds it in memory, its
caller goes on, and it is retried with backoff, before any later write, so that writes still land
in the order they were made. Other writes fail with :class:`StoreFull`. The WAL is checkpointed
and truncated when it passes `wal_limit_bytes` and at the end, so it cannot grow without bound.
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..errors import StoreError, StoreFull, UserError
from .disk_space import disk_full_error, free_bytes, is_disk_full
from .schema import BUSY_TIMEOUT_MS

__all__ = [
    "MAX_BATCH",
    "WAL_LIMIT_BYTES",
    "WriteSync",
    "WriterThread",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
WriteSync = Literal["full", "normal"]

MAX_BATCH: Final = 1024
# Past this size the WAL is checkpointed and truncated after a commit; a checkpoint that resets it
# also cuts it back to this size (journal_size_limit).
WAL_LIMIT_BYTES: Final = 4 * 1024 * 1024
# Held writes are retried after this long, doubling up to the maximum, while the disk is full.
_RETRY_FIRST_S: Final = 0.05
_RETRY_MAX_S: Final = 2.0


@dataclass(eq=False)
class _Write:
    """One write waiting for the writer thread. `done` is None for fire-and-forget writes;
    `keep` ones are held and retried when the disk is full instead of failing."""

    apply: Callable[[sqlite3.Connection], object]
    what: str
    token: anyio.lowlevel.EventLoopToken | None
    done: anyio.Event | None
    keep: bool = False
    # Try the held writes now rather than at the next retry (a flush waits for them).
    retry_held: bool = False
    result: object = None
    error: BaseException | None = None
    delivered: bool = False


_STOP: Final = object()


def _set_done(writes: list[_Write]) -> None:
    for write in writes:
        assert write.done is not None
        write.done.set()


class WriterThread(threading.Thread):
    """The one thread that writes: drains the queue, commits each batch in one transaction.

    Event loops hand it writes with :meth:`submit` (or :meth:`submit_nowait`); :meth:`stop` lets
    it finish what is queued, close the connection and end. `on_full_changed` is called from
    this thread when the disk fills (True: a write met SQLITE_FULL) and when it has room again
    (False: every held write is stored and `reserve` bytes are free).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        reserve: int = 0,
        on_full_changed: Callable[[bool], None] | None = None,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
    ) -> None:
        super().__init__(name=f"wakeful store writer ({path.name})", daemon=True)
        self.conn = conn
        self.path = path
        self.queue: queue.SimpleQueue[_Write | object] = queue.SimpleQueue()
        self.reserve = reserve
        self.on_full_changed = on_full_changed
        self.wal_limit_bytes = wal_limit_bytes
        self._wal_path = path.with_name(path.name + "-wal")
        # Writes kept in memory while the disk is full, in the order they were made.
        self._held: list[_Write] = []
        self._retry_delay = _RETRY_FIRST_S
        self._retry_at = 0.0
        self.full = False

    @property
    def held_writes(self) -> int:
        """How many writes are held in memory, waiting for disk space."""
        return len(self._held)

    async def submit(
        self,
        apply: Callable[[sqlite3.Connection], T],
        what: str,
        *,
        keep: bool = False,
        retry_held: bool = False,
    ) -> T | None:
        """Queue `apply` and return its result once the batch holding it is committed.

        With `keep`, a write the full disk cannot take now is held and retried (see the module
        docstring): it returns None at once, and its result is never seen.
        """
        if not self.is_alive():
            raise StoreError(
                f"The writer thread of the store {self.path} has stopped (see the log for why). "
                "Restart the runtime."
            )
        write = _Write(
            apply,
            what,
            anyio.lowlevel.current_token(),
            anyio.Event(),
            keep=keep,
            retry_held=retry_held,
        )
        self.queue.put(write)
        assert write.done is not None
        # The write happens whether or not the caller is cancelled, so wait for its outcome.
        with anyio.CancelScope(shield=True):
            await write.done.wait()
        if write.error is not None:
            raise write.error
        return cast(T, write.result)

    def submit_nowait(
        self, apply: Callable[[sqlite3.Connection], object], what: str, *, keep: bool = False
    ) -> None:
        """Queue `apply` without waiting; a failure is logged."""
        self.queue.put(_Write(apply, what, None, None, keep=keep))

    def stop(self) -> None:
        """Let the thread commit every write queued so far, close the connection and end."""
        self.queue.put(_STOP)

    def run(self) -> None:
        try:
            stopping = False
            while not stopping:
                try:
                    item = self.queue.get(timeout=self._until_retry())
                except queue.Empty:
                    self._retry_held()
                    continue
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
                    self._process(batch)
                finally:
                    self._deliver(batch)
            if self._held:
                self._retry_at = 0.0
                self._retry_held()
            if self._held:
                log.error(
                    "the store %s is closing with %d write(s) still waiting for disk space; they "
                    "are lost (the events they answered stay pending and are handled again)",
                    self.path,
                    len(self._held),
                )
            self._checkpoint()
        finally:
            self.conn.close()

    def _until_retry(self) -> float | None:
        """How long to wait for a write before retrying the held ones (None: no retry due)."""
        if not self._held:
            return None
        return max(0.0, self._retry_at - time.monotonic())

    def _process(self, batch: list[_Write]) -> None:
        """Commit a batch, after the held writes (which go first, to keep the order)."""
        due = time.monotonic() >= self._retry_at or any(write.retry_held for write in batch)
        if self._held and (not due or not self._retry_held()):
            # The disk is still full: what must be kept is held behind the others, the rest
            # fails without a try.
            free = free_bytes(self.path)
            for write in batch:
                write.error = disk_full_error(self.path, write.what, free=free)
            self._hold(batch)
            return
        self._commit(batch)
        met_full = any(isinstance(write.error, StoreFull) for write in batch)
        committed = any(write.error is None for write in batch)
        self._hold(batch)
        self._after_commit(committed=committed, met_full=met_full)

    def _hold(self, writes: list[_Write]) -> None:
        """Hold the `keep` writes that failed for a full disk, in order; note the full disk."""
        for write in writes:
            if not isinstance(write.error, StoreFull):
                continue
            self._set_full(True)
            if write.keep:
                write.error = None
                write.result = None
                self._held.append(write)
                if len(self._held) == 1:
                    self._retry_delay = _RETRY_FIRST_S
                    self._retry_at = time.monotonic() + self._retry_delay

    def _retry_held(self) -> bool:
        """Try the held writes again; True when every one of them is stored (or failed for
        another reason, which is logged: their callers have gone on)."""
        held = list(self._held)
        self._commit(held)
        for write in held:
            if write.error is not None and not isinstance(write.error, StoreFull):
                log.error("a held store write failed and is lost: %s", write.error)
        still = [write for write in held if isinstance(write.error, StoreFull)]
        for write in still:
            write.error = None
        # One assignment, so that `held_writes` never reads 0 while some are still held.
        self._held = still
        if self._held:
            self._retry_delay = min(_RETRY_MAX_S, self._retry_delay * 2)
            self._retry_at = time.monotonic() + self._retry_delay
            return False
        log.info("the store %s has room again: %d held write(s) stored", self.path, len(held))
        self._after_commit(committed=True, met_full=False)
        return True

    def _after_commit(self, *, committed: bool, met_full: bool) -> None:
        if not committed:
            return
        if self.full and not met_full and not self._held:
            free = free_bytes(self.path)
            if free is None or free >= self.reserve:
                self._set_full(False)
        try:
            wal_size = os.stat(self._wal_path).st_size
        except OSError:
            return
        if wal_size > self.wal_limit_bytes:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy the WAL into the store and truncate it; a failure (readers in the way, a full
        disk) is logged and tried again after a later commit."""
        conn = self.conn
        try:
            # Do not wait long for readers: the writer would stall every commit meanwhile.
            conn.execute("PRAGMA busy_timeout = 100")
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            log.warning("checkpointing the WAL of %s failed: %s", self.path, exc)
            return
        if busy:
            log.info("the WAL of %s was not truncated: a reader is still using it", self.path)

    def _set_full(self, full: bool) -> None:
        if full == self.full:
            return
        self.full = full
        if full:
            log.error("the disk of the store %s is full", self.path)
        if self.on_full_changed is not None:
            try:
                self.on_full_changed(full)
            except Exception as exc:  # a listener's bug must not stop the writer
                log.error("reporting the disk state of %s failed: %s", self.path, exc)

    def _commit(self, batch: list[_Write]) -> None:
        """Apply and commit `batch`; each write gets its result or its error. After a write
        meets a full disk, the ones behind it are not tried (they fail the same way), so that
        held writes keep their order."""
        conn = self.conn
        # A savepoint per write lets one bad write fail alone; a batch of one needs none.
        isolate = len(batch) > 1
        full: BaseException | None = None
        for write in batch:
            write.error = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in batch:
                if full is not None:
                    write.error = self._full_error(write, full)
                    continue
                if isolate:
                    conn.execute("SAVEPOINT one_write")
                try:
                    write.result = write.apply(conn)
                except Exception as exc:
                    # Undo this write only; its caller gets the error, the batch carries on.
                    write.error = _as_store_error(exc, self.path, write.what)
                    if is_disk_full(exc):
                        full = exc
                    if not isolate:
                        self._rollback()
                        return
                    conn.execute("ROLLBACK TO one_write")
                if isolate:
                    conn.execute("RELEASE one_write")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            if is_disk_full(exc):
                full = full or exc
            for write in batch:
                if write.error is not None:
                    continue
                write.result = None
                if full is not None:
                    # SQLite rolled the transaction back for the full disk.
                    write.error = self._full_error(write, full)
                    continue
                write.error = StoreError(
                    f"Could not commit {write.what} to the store {self.path}: {exc}. It was "
                    "not saved; check file permissions, and free disk space."
                )
                write.error.__cause__ = exc

    def _full_error(self, write: _Write, exc: BaseException) -> StoreFull:
        error = disk_full_error(self.path, write.what, free=free_bytes(self.path))
        error.__cause__ = exc
        return error

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
            write.delivered = True
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
    if is_disk_full(exc):
        error: BaseException = disk_full_error(path, what, free=free_bytes(path))
        error.__cause__ = exc
        return error
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
