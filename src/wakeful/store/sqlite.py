"""The SQLite store: events, trajectories, tasks, timers and the safety records (idempotency keys,
confirmation tokens, the audit log) in one file that survives restarts.

:class:`Store` is the runtime's async view of the file. It owns the file, its lock, the writer
thread and the reader, and exposes one repository per group of tables (their interfaces are in
:mod:`wakeful.core.repositories`): ``store.events``, ``store.trajectories``,
``store.task_records``, ``store.timer_records``, ``store.idempotency_keys``,
``store.confirmations``, ``store.audit_log``, ``store.channel_cursors``,
``store.connected_channels``, ``store.messages`` (the messages to the user),
``store.subagents`` (child agents), ``store.cases`` (people's decisions) and
``store.human_requests`` (requests to a person). Its older
methods (``store.add_event`` …) delegate to them.

Its writes go to one writer thread that commits them in batches (see :mod:`.writer`); its reads
use a second connection on anyio's worker threads (see :mod:`.reader`), and WAL mode lets them run
while the writer commits (both shared by the repositories through :mod:`.access`). Opening the
file locks it for this runtime alone (see :mod:`.lock`) and creates or upgrades its schema (see
:mod:`.schema`); what is not a healthy wakeful store this user can write (a foreign or empty
file, a newer schema, damage found after an unclean shutdown, a read-only folder) is refused with
a :class:`StoreError` that says which, and left untouched (see :mod:`.opening`).

When its disk fills, the store refuses new events with :class:`StoreFull` (also once less than
`reserve_bytes` is free), and holds the writes of work under way (trajectories, event marks,
task and timer state, audit records) in memory until they can be written, in order (see
:mod:`.disk_space` and :mod:`.writer`); :meth:`Store.watch_space` reports the changes.

Open it as an async context manager (``open`` is awaited first)::

    async with await Store.open("~/.wakeful/state.db") as store:
        await store.events.add(event)

CLI commands read the same file, running runtime or not, with the synchronous
``with Store.read_only(path) as reader: reader.recent_events()``.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import get_args

import anyio.to_thread

from ..core.records import AuditRow, EventStatus, IdempotencyEntry, StoredConfirmation, StoredEvent
from ..errors import UserError
from .access import StoreAccess
from .audit import SqliteAuditLog
from .cases import SqliteCases
from .channel_cursors import SqliteChannelCursors, SqliteConnectedChannels
from .confirmations import SqliteConfirmations
from .delegation import RepositoryMethods
from .disk_space import DEFAULT_RESERVE_BYTES
from .events import SqliteEvents
from .human_requests import SqliteHumanRequests
from .idempotency import SqliteIdempotencyKeys
from .lock import StoreLock
from .messages import SqliteMessages
from .opening import open_store_files
from .reader import StoreReader, open_reader
from .schema import MIGRATIONS, Migration, apply_migrations
from .subagents import SqliteSubagents
from .tasks import SqliteTasks
from .timers import SqliteTimers
from .trajectories import SqliteTrajectories
from .writer import WriteSync

__all__ = [
    "MIGRATIONS",
    "AuditRow",
    "EventStatus",
    "IdempotencyEntry",
    "Migration",
    "Store",
    "StoreReader",
    "StoredConfirmation",
    "StoredEvent",
    "WriteSync",
    "apply_migrations",
]


class Store(RepositoryMethods):
    """The runtime's persistent state; open it with :meth:`open`, close it with :meth:`close`.

    Every write method returns after its write is committed. Writes to the store from one event
    loop are applied in the order they were made. The repositories are its attributes; the
    methods it inherits from :class:`RepositoryMethods` delegate to them.
    """

    def __init__(
        self,
        path: Path,
        writer: sqlite3.Connection,
        reader: StoreReader,
        lock: StoreLock | None = None,
        *,
        reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    ) -> None:
        """Use :meth:`Store.open`; this takes connections that are already set up, and the lock
        that makes this the only runtime on the file (released by :meth:`close`)."""
        self.path = path
        self._lock = lock
        self._access = StoreAccess(path, writer, reader, reserve_bytes=reserve_bytes)
        # Names this opening of the file: an idempotency claim made by another instance (one
        # that has since stopped or crashed) is known not to be running here.
        self.instance_id = secrets.token_hex(8)
        self.events = SqliteEvents(self._access)
        self.trajectories = SqliteTrajectories(self._access)
        self.task_records = SqliteTasks(self._access)
        self.timer_records = SqliteTimers(self._access)
        self.idempotency_keys = SqliteIdempotencyKeys(self._access, self.instance_id)
        self.confirmations = SqliteConfirmations(self._access)
        self.audit_log = SqliteAuditLog(self._access)
        self.channel_cursors = SqliteChannelCursors(self._access)
        self.connected_channels = SqliteConnectedChannels(self._access)
        self.subagents = SqliteSubagents(self._access)
        self.messages = SqliteMessages(self._access)
        self.cases = SqliteCases(self._access)
        self.human_requests = SqliteHumanRequests(self._access)

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        synchronous: WriteSync = "full",
        initialise_empty_file: bool = False,
        reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    ) -> Store:
        """Open the store at `path` for this runtime alone, creating it if the path does not
        exist and upgrading its schema if needed.

        The store is locked until :meth:`close` (a second runtime on it gets a StoreError naming
        this one), and checked for damage when the last runtime on it did not shut down cleanly.
        What is not a healthy wakeful store this user can write is refused, untouched, with a
        StoreError that says what was found. A 0-byte file is refused as a truncated store
        unless `initialise_empty_file` (for a placeholder made on purpose, e.g. by mkstemp).

        `synchronous="full"` fsyncs every commit, so a committed write survives power loss;
        `"normal"` survives a crash of the process but may lose the last commits on power loss.

        New events are refused (:class:`StoreFull`) while less than `reserve_bytes` is free on
        the store's disk, keeping that room for the sessions already running.
        """
        if synchronous not in get_args(WriteSync):
            raise UserError(f"synchronous must be 'full' or 'normal', got {synchronous!r}.")
        resolved, writer, reader, lock = await anyio.to_thread.run_sync(
            partial(
                open_store_files,
                path,
                synchronous,
                initialise_empty_file=initialise_empty_file,
            )
        )
        return cls(resolved, writer, reader, lock, reserve_bytes=reserve_bytes)

    @staticmethod
    def read_only(path: str | Path) -> StoreReader:
        """A synchronous, read-only view of the store at `path`, for CLI commands.

        It never creates, upgrades or changes the file.
        """
        return open_reader(Path(path).expanduser(), read_only_file=True)

    @property
    def where(self) -> str:
        """Where the store is, for messages: its file."""
        return str(self.path)

    @property
    def closed(self) -> bool:
        return self._access.closed

    async def close(self) -> None:
        """Finish every queued write, close both connections, then record a clean shutdown and
        release the lock. Safe to call twice."""
        if self._access.closed:
            return
        # A writer thread that died mid-run is not a clean shutdown: check the file next time.
        clean = await self._access.close()
        if self._lock is not None:
            await anyio.to_thread.run_sync(partial(self._lock.release, clean=clean))

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- disk space --

    @property
    def held_writes(self) -> int:
        """How many writes are held in memory until the full disk has room for them."""
        return self._access.held_writes

    @property
    def space_short(self) -> bool:
        """Whether the store's disk is full (or below the reserve): new events are refused."""
        return self._access.space_short

    def watch_space(self, listener: Callable[[bool], None]) -> None:
        """Call `listener(True)` (in this event loop) when the store's disk fills or falls below
        the reserve, and `listener(False)` once it has room again and every held write is
        stored: once per change, not once per write."""
        self._access.watch_space(listener)

    async def flush(self) -> None:
        """Wait until every write queued so far (including `*_nowait` ones) is committed.

        Writes held for a full disk are tried again now; while they still cannot be written,
        this raises StoreFull.
        """
        await self._access.flush()
