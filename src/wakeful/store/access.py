"""What the store's repositories share: the one writer thread, the read connection, and the
checks every access passes (the store is open; a new write has room on the disk).

Writes go to the writer thread (see :mod:`.writer`), which commits them in batches; reads run
on anyio's worker threads, one at a time, on the reader's connection (see :mod:`.reader`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..errors import StoreError
from .disk_space import FreeSpaceGauge, disk_full_error
from .reader import StoreReader
from .writer import WriterThread

__all__ = ["StoreAccess"]

T = TypeVar("T")


class StoreAccess:
    """The writer thread and the reader of one open store file, shared by its repositories.

    It starts the writer thread; :meth:`close` finishes the queued writes and closes both
    connections.
    """

    def __init__(
        self, path: Path, writer: sqlite3.Connection, reader: StoreReader, *, reserve_bytes: int
    ) -> None:
        self.path = path
        self.reader = reader
        self._read_limiter = anyio.CapacityLimiter(1)
        self._space = FreeSpaceGauge(path, reserve_bytes)
        # Whether space is short, as last reported to the listeners of watch_space.
        self._short = False
        self._below_reserve = False
        self._space_listeners: list[Callable[[bool], None]] = []
        self._listeners_loop: anyio.lowlevel.EventLoopToken | None = None
        self._writer = WriterThread(
            writer, path, reserve=reserve_bytes, on_full_changed=self._writer_full_changed
        )
        self._writer.start()
        self.closed = False

    async def close(self) -> bool:
        """Finish every queued write and close both connections; return whether the writer
        thread was still alive (a writer that died mid-run is not a clean shutdown)."""
        self.closed = True
        await anyio.to_thread.run_sync(self.reader.close, limiter=self._read_limiter)
        clean = self._writer.is_alive()
        self._writer.stop()
        await anyio.to_thread.run_sync(self._writer.join)
        return clean

    def check_open(self) -> None:
        if self.closed:
            raise StoreError(
                f"The store {self.path} is closed. Keep it open for as long as the runtime runs: "
                "close it only after the task group that uses it has finished."
            )

    async def write(self, apply: Callable[[sqlite3.Connection], T], what: str) -> T:
        """Run `apply` on the writer thread; return its result once committed."""
        self.check_open()
        return cast(T, await self._writer.submit(apply, what))

    async def write_kept(self, apply: Callable[[sqlite3.Connection], None], what: str) -> None:
        """A write of work under way: on a full disk it is held and written later, in order."""
        self.check_open()
        await self._writer.submit(apply, what, keep=True)

    def write_nowait(
        self, apply: Callable[[sqlite3.Connection], object], what: str, *, keep: bool = False
    ) -> None:
        self.check_open()
        self._writer.submit_nowait(apply, what, keep=keep)

    async def read(self, read: Callable[[], T]) -> T:
        """Run `read` (a call on :attr:`reader`) on a worker thread, one read at a time."""
        self.check_open()
        return await anyio.to_thread.run_sync(read, limiter=self._read_limiter)

    async def flush(self) -> None:
        """Wait until every write queued so far is committed; see :meth:`Store.flush`."""
        self.check_open()
        await self._writer.submit(lambda conn: None, "a flush", retry_held=True)

    # -- disk space --

    @property
    def held_writes(self) -> int:
        """How many writes are held in memory until the full disk has room for them."""
        return self._writer.held_writes

    @property
    def space_short(self) -> bool:
        """Whether the store's disk is full (or below the reserve): new events are refused."""
        return self._writer.full or self._below_reserve or self._writer.held_writes > 0

    def watch_space(self, listener: Callable[[bool], None]) -> None:
        """Call `listener(True)` (in this event loop) when space becomes short, and
        `listener(False)` once it is back; see :meth:`Store.watch_space`."""
        self._listeners_loop = anyio.lowlevel.current_token()
        self._space_listeners.append(listener)

    def check_room(self, what: str) -> None:
        """Refuse a new write while the disk is below the reserve (measured at most once a
        second) or while writes of work under way wait for space."""
        if self._writer.held_writes or self._space.below_reserve():
            free = self._space.free()
            below = free is not None and free < self._space.reserve
            if below and not self._below_reserve:
                self._below_reserve = True
                self._space_changed()
            raise disk_full_error(
                self.path, what, free=free, reserve=self._space.reserve if below else None
            )
        if self._below_reserve:
            self._below_reserve = False
            self._space_changed()

    def _writer_full_changed(self, full: bool) -> None:
        """From the writer thread: the disk filled, or has room again."""
        self._space.forget()
        token = self._listeners_loop
        if token is None:
            return
        # RuntimeError: the event loop has ended, and nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(self._space_changed, full, token=token)

    def _space_changed(self, writer_full: bool | None = None) -> None:
        """Tell the listeners when space became short or came back (in the event loop)."""
        if writer_full is False:
            self._below_reserve = False  # the writer found the reserve free again
        short = self._writer.full or self._below_reserve
        if writer_full is True:
            short = True
        if short == self._short:
            return
        self._short = short
        for listener in self._space_listeners:
            listener(short)
