"""The SQLite store: events, trajectories, tasks, timers and the safety records (idempotency keys,
confirmation tokens, the audit log) in one file that survives restarts.

:class:`Store` is the runtime's async view of the file. Its writes go to one writer thread that
commits them in batches (see :mod:`.writer`); its reads use a second connection on anyio's worker
threads (see :mod:`.reader`), and WAL mode lets them run while the writer commits. Opening the
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
        await store.add_event(event)

CLI commands read the same file, running runtime or not, with the synchronous
``with Store.read_only(path) as reader: reader.recent_events()``.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast, get_args

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..channels.timer_schedules import TimerRecord
from ..errors import StoreError, UserError
from ..events import Event
from ..messages import Message, message_to_json
from ..tools.tasks import TaskRecord
from .disk_space import DEFAULT_RESERVE_BYTES, FreeSpaceGauge, disk_full_error
from .lock import StoreLock
from .opening import open_store_files
from .reader import (
    CONFIRMATION_COLUMNS,
    IDEMPOTENCY_COLUMNS,
    AuditRow,
    EventStatus,
    IdempotencyEntry,
    StoredConfirmation,
    StoredEvent,
    StoreReader,
    confirmation_from_row,
    decode_row,
    open_reader,
    task_from_json,
)
from .schema import MIGRATIONS, Migration, apply_migrations
from .writer import WriterThread, WriteSync

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

T = TypeVar("T")


def _utc_key(when: datetime | None) -> str | None:
    """A UTC time as fixed-width text, so that text order is time order in SQL."""
    return when.astimezone(UTC).isoformat(timespec="microseconds") if when else None


class Store:
    """The runtime's persistent state; open it with :meth:`open`, close it with :meth:`close`.

    Every write method returns after its write is committed. Writes to the store from one event
    loop are applied in the order they were made.
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
        self._reader = reader
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
        self._closed = False
        # Names this opening of the file: an idempotency claim made by another instance (one
        # that has since stopped or crashed) is known not to be running here.
        self.instance_id = secrets.token_hex(8)

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
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Finish every queued write, close both connections, then record a clean shutdown and
        release the lock. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await anyio.to_thread.run_sync(self._reader.close, limiter=self._read_limiter)
        # A writer thread that died mid-run is not a clean shutdown: check the file next time.
        clean = self._writer.is_alive()
        self._writer.stop()
        await anyio.to_thread.run_sync(self._writer.join)
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

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(
                f"The store {self.path} is closed. Keep it open for as long as the runtime runs: "
                "close it only after the task group that uses it has finished."
            )

    async def _write(self, apply: Callable[[sqlite3.Connection], T], what: str) -> T:
        self._check_open()
        return cast(T, await self._writer.submit(apply, what))

    async def _write_kept(self, apply: Callable[[sqlite3.Connection], None], what: str) -> None:
        """A write of work under way: on a full disk it is held and written later, in order."""
        self._check_open()
        await self._writer.submit(apply, what, keep=True)

    def _write_nowait(
        self, apply: Callable[[sqlite3.Connection], object], what: str, *, keep: bool = False
    ) -> None:
        self._check_open()
        self._writer.submit_nowait(apply, what, keep=keep)

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
        """Call `listener(True)` (in this event loop) when the store's disk fills or falls below
        the reserve, and `listener(False)` once it has room again and every held write is
        stored: once per change, not once per write."""
        self._listeners_loop = anyio.lowlevel.current_token()
        self._space_listeners.append(listener)

    def _check_room(self, what: str) -> None:
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

    async def _read(self, read: Callable[[], T]) -> T:
        self._check_open()
        return await anyio.to_thread.run_sync(read, limiter=self._read_limiter)

    async def flush(self) -> None:
        """Wait until every write queued so far (including `*_nowait` ones) is committed.

        Writes held for a full disk are tried again now; while they still cannot be written,
        this raises StoreFull.
        """
        self._check_open()
        await self._writer.submit(lambda conn: None, "a flush", retry_held=True)

    # -- events --

    async def add_event(self, event: Event, status: EventStatus = "pending") -> int:
        """Store a new event; return its rowid (its position in arrival order).

        It is refused with StoreFull while space is short (see :meth:`keep_event` for events
        about work already done).
        """
        _check_status(status)
        row = (event.id, event.session, event.kind, _utc_key(event.ts), status, event.to_json())
        self._check_room(f"event {event.id}")

        def apply(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO events (id, session, kind, ts, status, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )
            return cast(int, cursor.lastrowid)

        return await self._write(apply, f"event {event.id}")

    async def keep_event(self, event: Event, status: EventStatus = "pending") -> None:
        """Store an event about work already done (a task's result, an operator alert): on a
        full disk it is not refused but held in memory, and written, in order, once space
        returns."""
        _check_status(status)
        row = (event.id, event.session, event.kind, _utc_key(event.ts), status, event.to_json())

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO events (id, session, kind, ts, status, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._write_kept(apply, f"event {event.id}")

    async def add_events(
        self, events: Sequence[Event], status: EventStatus = "pending"
    ) -> list[int]:
        """Store several events in one write, all or none; return their rowids in order."""
        _check_status(status)
        rows = [(e.id, e.session, e.kind, _utc_key(e.ts), status, e.to_json()) for e in events]
        if rows:
            self._check_room(f"{len(rows)} events")

        def apply(conn: sqlite3.Connection) -> list[int]:
            rowids = []
            for row in rows:
                try:
                    cursor = conn.execute(
                        "INSERT INTO events (id, session, kind, ts, status, data) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        row,
                    )
                except sqlite3.IntegrityError as exc:
                    raise StoreError(
                        f"Could not save {len(rows)} events in {self.path}: event {row[0]} is "
                        "already stored, so none of them was saved. Give it a fresh id."
                    ) from exc
                rowids.append(cast(int, cursor.lastrowid))
            return rowids

        return await self._write(apply, f"{len(rows)} events")

    async def mark_events(self, ids: Iterable[str], status: str) -> None:
        """Set the status ('pending' or 'consumed') of the events with these ids.

        Unknown ids are ignored: marking is idempotent.
        """
        _check_status(status)
        params = [(status, event_id) for event_id in ids]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany("UPDATE events SET status = ? WHERE id = ?", params)

        await self._write_kept(apply, f"the status of {len(params)} event(s)")

    async def pending_events(self, session: str | None = None) -> list[Event]:
        """Events not yet consumed, in arrival order."""
        return await self._read(partial(self._reader.pending_events, session))

    async def recent_events(
        self, limit: int = 50, session: str | None = None, after_rowid: int | None = None
    ) -> list[StoredEvent]:
        """See :meth:`StoreReader.recent_events`."""
        return await self._read(partial(self._reader.recent_events, limit, session, after_rowid))

    # -- trajectories --

    async def append_messages(self, session: str, messages: Sequence[Message]) -> None:
        """Append messages to a session's trajectory, all or none. On a full disk they are
        held in memory and written, in order, when space returns (see the module docstring)."""
        rows = [(session, message_to_json(m)) for m in messages]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT INTO trajectory (session, data) VALUES (?, ?)", rows)

        await self._write_kept(apply, f"{len(rows)} trajectory message(s) of session {session!r}")

    async def load_trajectory(self, session: str) -> list[Message]:
        return await self._read(partial(self._reader.load_trajectory, session))

    async def sessions(self) -> list[str]:
        return await self._read(self._reader.sessions)

    async def sessions_to_resume(self) -> list[str]:
        """See :meth:`StoreReader.sessions_to_resume`."""
        return await self._read(self._reader.sessions_to_resume)

    # -- tasks --

    async def save_task(self, record: TaskRecord) -> None:
        """Insert or update a task record."""
        await self._write_kept(_upsert_task(record), f"task {record.id}")

    def save_task_nowait(self, record: TaskRecord) -> None:
        """Queue a task save without waiting; for TaskManager's synchronous `on_change`.

        Saves are applied in order; a failure is logged. Await :meth:`flush` to wait for them.
        """
        self._write_nowait(_upsert_task(record), f"task {record.id}", keep=True)

    def save_stopped_task_nowait(self, record: TaskRecord, note: Event) -> None:
        """Queue, as one transaction, the record of a task the runtime's stop cut off and the
        pending event (`note`) that tells its session at the next start, so that neither is
        stored without the other."""
        upsert = _upsert_task(record)
        row = (note.id, note.session, note.kind, _utc_key(note.ts), "pending", note.to_json())

        def apply(conn: sqlite3.Connection) -> None:
            upsert(conn)
            conn.execute(
                "INSERT INTO events (id, session, kind, ts, status, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

        self._write_nowait(apply, f"task {record.id}, stopped with the runtime", keep=True)

    async def tasks(self, session: str | None = None) -> list[TaskRecord]:
        return await self._read(partial(self._reader.tasks, session))

    async def mark_running_tasks_lost(self) -> list[TaskRecord]:
        """Mark every task stored as running as lost, and return those records.

        Called at start-up: a task still running in the store was cut off by the last shutdown
        or crash, and its result will never come.
        """
        path = self.path

        def apply(conn: sqlite3.Connection) -> list[TaskRecord]:
            rows = conn.execute(
                "SELECT id, data FROM tasks WHERE state = 'running' ORDER BY rowid"
            ).fetchall()
            ended = datetime.now(UTC)
            lost = []
            for task_id, data in rows:
                record = decode_row(path, f"task {task_id}", partial(task_from_json, data))
                record.state = "lost"
                record.ended_at = ended
                lost.append(record)
            conn.executemany(
                "UPDATE tasks SET state = 'lost', data = ? WHERE id = ?",
                [(json.dumps(r.to_dict()), r.id) for r in lost],
            )
            return lost

        return await self._write(apply, "the marking of running tasks as lost")

    # -- timers --

    async def save_timer(self, record: TimerRecord) -> None:
        """Insert or update a timer."""
        await self.save_timers([record])

    async def save_timers(self, records: Sequence[TimerRecord]) -> None:
        """Insert or update several timers in one transaction."""
        rows = [_timer_row(r) for r in records]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(_UPSERT_TIMER, rows)

        await self._write_kept(apply, f"{len(rows)} timer(s)")

    async def record_timer_fires(
        self, fires: Sequence[Event], timers: Sequence[TimerRecord]
    ) -> None:
        """Store the `timer.trigger` events of due timers (as pending) and the timers' new state
        (next fire time, or inactive for a one-shot that is done) in one transaction.

        Either both are stored or neither: a crash can neither lose a recorded fire nor fire a
        timer again for an occurrence whose fire is already stored.
        """
        events = [(e.id, e.session, e.kind, _utc_key(e.ts), "pending", e.to_json()) for e in fires]
        rows = [_timer_row(r) for r in timers]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO events (id, session, kind, ts, status, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                events,
            )
            conn.executemany(_UPSERT_TIMER, rows)

        await self._write_kept(apply, f"{len(events)} timer fire(s) and {len(rows)} timer(s)")

    async def delete_timer(self, timer_id: str) -> bool:
        """Delete a timer; return whether it was stored."""

        def apply(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM timers WHERE id = ?", (timer_id,)).rowcount > 0

        return await self._write(apply, f"the deletion of timer {timer_id}")

    async def timers(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        return await self._read(partial(self._reader.timers, session, active_only=active_only))

    # -- idempotency keys --

    async def claim_idempotency_key(
        self, tool: str, key: str, arguments_hash: str, started_at: datetime
    ) -> IdempotencyEntry | None:
        """Claim (tool, key) for a run by this store instance; None when claimed now.

        When the key is already stored, nothing changes and its entry is returned: the claim and
        the check are one write, so two calls with one key cannot both claim it.
        """
        row = (tool, key, arguments_hash, self.instance_id, _utc_key(started_at))

        def apply(conn: sqlite3.Connection) -> IdempotencyEntry | None:
            found = conn.execute(
                f"SELECT {IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE tool = ? AND key = ?",
                (tool, key),
            ).fetchone()
            if found is not None:
                return IdempotencyEntry(*found)
            conn.execute(
                "INSERT INTO idempotency_keys (tool, key, arguments_hash, state, owner, "
                "started_at) VALUES (?, ?, ?, 'running', ?, ?)",
                row,
            )
            return None

        return await self._write(apply, f"the idempotency key {key!r} of {tool}")

    async def finish_idempotency_key(
        self,
        tool: str,
        key: str,
        finished_at: datetime,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of a claimed key: `result` (JSON) when done, else `error`."""
        state = "done" if result is not None else "failed"
        params = (state, _utc_key(finished_at), result, error, tool, key)

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE idempotency_keys SET state = ?, finished_at = ?, result = ?, error = ? "
                "WHERE tool = ? AND key = ?",
                params,
            )

        await self._write(apply, f"the outcome of idempotency key {key!r} of {tool}")

    async def release_idempotency_key(self, tool: str, key: str) -> None:
        """Forget a claim whose action did not start, so the key can be used again."""

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM idempotency_keys WHERE tool = ? AND key = ?", (tool, key))

        await self._write(apply, f"the release of idempotency key {key!r} of {tool}")

    async def idempotency_entry(self, tool: str, key: str) -> IdempotencyEntry | None:
        return await self._read(partial(self._reader.idempotency_entry, tool, key))

    # -- confirmation tokens --

    async def add_confirmation(self, entry: StoredConfirmation) -> None:
        """Store a newly issued confirmation token."""
        row = (
            entry.token,
            entry.tool,
            entry.arguments_hash,
            json.dumps(entry.field_hashes, sort_keys=True),
            json.dumps(entry.preview, ensure_ascii=False, default=str),
            entry.issued_at,
            entry.expires_at,
            entry.state,
        )

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO confirmations (token, tool, arguments_hash, field_hashes, preview, "
                "issued_at, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._write(apply, f"a confirmation token of {entry.tool}")

    async def use_confirmation(
        self,
        token: str,
        check: Callable[[StoredConfirmation | None], None],
        used_at: datetime,
    ) -> None:
        """Mark `token` used if `check` (run on the stored token, or None) raises nothing.

        Check and mark are one write, so a token is used at most once even under concurrency.
        """
        path = self.path

        def apply(conn: sqlite3.Connection) -> None:
            found = conn.execute(
                f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE token = ?", (token,)
            ).fetchone()
            check(confirmation_from_row(path, found) if found is not None else None)
            conn.execute(
                "UPDATE confirmations SET state = 'used', used_at = ? WHERE token = ?",
                (_utc_key(used_at), token),
            )

        await self._write(apply, "the use of a confirmation token")

    async def fail_confirmation(self, token: str, error: str) -> bool:
        """Record that the action a token confirmed failed; return whether the token is stored."""

        def apply(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE confirmations SET state = 'failed', error = ? WHERE token = ?",
                (error, token),
            )
            return cursor.rowcount > 0

        return await self._write(apply, "the failure of a confirmed action")

    async def confirmation(self, token: str) -> StoredConfirmation | None:
        return await self._read(partial(self._reader.confirmation, token))

    # -- audit log --

    def add_audit_nowait(
        self,
        *,
        ts: datetime,
        session: str,
        tool: str,
        call_id: str,
        status: str,
        duration_ms: float,
        data: dict[str, Any],
    ) -> None:
        """Queue one audited call without waiting for its commit; await :meth:`flush` to wait."""
        row = (
            _utc_key(ts),
            session,
            tool,
            call_id,
            status,
            duration_ms,
            json.dumps(data, ensure_ascii=False, default=str),
        )

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO audit (ts, session, tool, call_id, status, duration_ms, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        self._write_nowait(apply, f"the audit record of call {call_id}", keep=True)

    async def audit_rows(
        self,
        *,
        since: datetime | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        """See :meth:`StoreReader.audit_rows`."""
        read = partial(
            self._reader.audit_rows,
            since=_utc_key(since),
            session=session,
            tool=tool,
            after_seq=after_seq,
            limit=limit,
        )
        return await self._read(read)


def utc_key(when: datetime) -> str:
    """A UTC time as the store writes it: fixed-width ISO text whose order is time order."""
    return when.astimezone(UTC).isoformat(timespec="microseconds")


def _check_status(status: str) -> None:
    if status not in get_args(EventStatus):
        raise UserError(f"An event status is 'pending' or 'consumed', got {status!r}.")


_UPSERT_TIMER = (
    "INSERT INTO timers (id, session, active, next_fire, data) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET session = excluded.session, "
    "active = excluded.active, next_fire = excluded.next_fire, data = excluded.data"
)


def _timer_row(record: TimerRecord) -> tuple[str, str, int, str | None, str]:
    return (
        record.id,
        record.session,
        int(record.active),
        _utc_key(record.next_fire),
        json.dumps(record.to_dict()),
    )


def _upsert_task(record: TaskRecord) -> Callable[[sqlite3.Connection], None]:
    row = (record.id, record.session, record.state, json.dumps(record.to_dict()))

    def apply(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO tasks (id, session, state, data) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET session = excluded.session, state = excluded.state, "
            "data = excluded.data",
            row,
        )

    return apply
