"""The SQLite store: events, trajectories, tasks and timers in one file that survives restarts.

One writer thread owns the write connection and commits writes in batches. Every awaited write
returns once the batch holding it is committed, and concurrent writers share one commit (group
commit), which is what allows thousands of events a second with fsync on. Reads use a second
connection on anyio's worker threads; WAL mode lets them run while the writer commits. The
schema is versioned and upgraded by ordered migrations; a file written by a newer wakeful, or a
file that is not a wakeful store, is refused with a :class:`StoreError` and left untouched.

Open it as an async context manager (``open`` is awaited first)::

    async with await Store.open("~/.wakeful/state.db") as store:
        await store.add_event(event)

CLI commands read the same file, running runtime or not, with the synchronous
``with Store.read_only(path) as reader: reader.recent_events()``.
"""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, NamedTuple, TypeVar, cast, get_args

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..channels.timers import TimerRecord
from ..errors import StoreError, UserError
from ..events import Event
from ..messages import Message, message_from_json, message_to_json
from ..tools.tasks import TaskRecord

__all__ = [
    "MIGRATIONS",
    "EventStatus",
    "Migration",
    "Store",
    "StoreReader",
    "StoredEvent",
    "apply_migrations",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
EventStatus = Literal["pending", "consumed"]
WriteSync = Literal["full", "normal"]

BUSY_TIMEOUT_MS: Final = 10_000
MAX_BATCH: Final = 1024


class Migration(NamedTuple):
    """One schema step: the statements that take the schema from version N-1 to N."""

    description: str
    statements: tuple[str, ...]


# Ordered: MIGRATIONS[i] produces schema version i + 1. Append new steps; never edit old ones.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        "events, trajectories, tasks, timers",
        (
            """CREATE TABLE schema_version (
                version INTEGER PRIMARY KEY,
                description TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )""",
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                session TEXT NOT NULL,
                kind TEXT NOT NULL,
                ts TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'consumed')),
                data TEXT NOT NULL
            )""",
            "CREATE INDEX events_by_status ON events (status, session, seq)",
            "CREATE INDEX events_by_session ON events (session, seq)",
            """CREATE TABLE trajectory (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                session TEXT NOT NULL,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX trajectory_by_session ON trajectory (session, seq)",
            """CREATE TABLE tasks (
                id TEXT PRIMARY KEY,
                session TEXT NOT NULL,
                state TEXT NOT NULL,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX tasks_by_state ON tasks (state)",
            """CREATE TABLE timers (
                id TEXT PRIMARY KEY,
                session TEXT NOT NULL,
                active INTEGER NOT NULL,
                next_fire TEXT,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX timers_by_next_fire ON timers (active, next_fire)",
        ),
    ),
)


class StoredEvent(NamedTuple):
    """An event as stored: its position in arrival order, its status, and the event."""

    rowid: int
    status: EventStatus
    event: Event


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _utc_key(when: datetime | None) -> str | None:
    """A UTC time as fixed-width text, so that text order is time order in SQL."""
    return when.astimezone(UTC).isoformat(timespec="microseconds") if when else None


# --- opening, checking and migrating -------------------------------------------------------------


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """A connection to `path` whose first read proves the file is a SQLite database."""
    if read_only:
        if not path.is_file():
            raise StoreError(
                f"There is no wakeful store at {path}. Check the path (or --data-dir), or start "
                "the runtime once to create it."
            )
        target, uri = f"{path.resolve().as_uri()}?mode=ro", True
    else:
        if path.is_dir():
            raise StoreError(
                f"{path} is a directory, not a store file. Give a file path such as "
                f"{path / 'wakeful.db'}."
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot create the directory for the store {path}: {exc}. Create it, or choose "
                "a writable location."
            ) from exc
        target, uri = str(path), False
    try:
        conn = sqlite3.connect(
            target,
            uri=uri,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
    except sqlite3.Error as exc:
        raise StoreError(
            f"Cannot open the store {path}: {exc}. Check that the path exists and is readable "
            "and writable by this user."
        ) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _not_a_store(path, exc) from exc
    return conn


def _not_a_store(path: Path, exc: sqlite3.Error) -> StoreError:
    return StoreError(
        f"{path} is not a readable wakeful store (SQLite says: {exc}). It is either not a SQLite "
        "database or it is damaged. Nothing in it was changed. If the path is wrong, fix it; if "
        "the file is damaged, move it aside (it may still be recoverable with `sqlite3 <file> "
        '".recover"`) and wakeful will start a new, empty store.'
    )


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version: 0 for an empty database; StoreError for a foreign one."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" not in tables:
        foreign = sorted(t for t in tables if not t.startswith("sqlite_"))
        if foreign:
            raise StoreError(
                f"{path} is a SQLite database but not a wakeful store (it has the tables "
                f"{', '.join(foreign)} and no schema_version). Nothing in it was changed. Point "
                "wakeful at another file."
            )
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def _check_not_newer(version: int, path: Path, known: int) -> None:
    if version > known:
        raise StoreError(
            f"The store {path} has schema version {version}, written by a newer wakeful; this "
            f"version understands up to {known}. Upgrade wakeful, or point it at another file. "
            "Nothing in the store was changed."
        )


def apply_migrations(
    conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Bring the schema of `conn` up to date, one transaction per step; return the new version.

    A step that fails is rolled back whole, so the file stays at the last good version and keeps
    everything it held.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        version: int | None = None
        try:
            # Read the version inside the write lock: another process may have migrated meanwhile.
            version = _schema_version(conn, path)
            _check_not_newer(version, path, len(migrations))
            if version == len(migrations):
                conn.execute("COMMIT")
                return version
            step = migrations[version]
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                (version + 1, step.description, _now_iso()),
            )
            if version == 0:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('created_at', ?)", (_now_iso(),)
                )
            conn.execute("COMMIT")
            log.info(
                "store %s migrated to schema version %d (%s)", path, version + 1, step.description
            )
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            if version is None:
                raise _not_a_store(path, exc) from exc
            raise StoreError(
                f"Upgrading the store {path} to schema version {version + 1} failed: {exc}. The "
                f"store was left at version {version}, unchanged. Report this as a wakeful bug."
            ) from exc
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _open_writer(path: Path, synchronous: WriteSync) -> sqlite3.Connection:
    conn = _connect(path, read_only=False)
    try:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise _not_a_store(path, exc) from exc
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


def _open_connections(
    path: str | Path, synchronous: WriteSync
) -> tuple[Path, sqlite3.Connection, StoreReader]:
    resolved = Path(path).expanduser()
    writer = _open_writer(resolved, synchronous)
    try:
        reader = _open_reader(resolved, read_only_file=False)
    except BaseException:
        writer.close()
        raise
    return resolved, writer, reader


def _open_reader(path: Path, *, read_only_file: bool) -> StoreReader:
    conn = _connect(path, read_only=read_only_file)
    try:
        conn.execute("PRAGMA query_only = ON")
        version = _schema_version(conn, path)
        _check_not_newer(version, path, len(MIGRATIONS))
        if version < len(MIGRATIONS):
            raise StoreError(
                f"The store {path} has schema version {version} and this wakeful needs "
                f"{len(MIGRATIONS)}. Start the runtime once on it to upgrade it, then retry."
            )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _not_a_store(path, exc) from exc
    except BaseException:
        conn.close()
        raise
    return StoreReader(conn, path)


# --- decoding rows -------------------------------------------------------------------------------


def _decode(path: Path, what: str, decode: Callable[[], T]) -> T:
    """Run `decode` on a stored row, turning a malformed row into a StoreError that names it."""
    try:
        return decode()
    except (ValueError, KeyError, TypeError, UserError) as exc:
        raise StoreError(
            f"The {what} stored in {path} cannot be read ({exc}). The row was left as it is; "
            "it was probably written by a different wakeful version or edited by hand."
        ) from exc


# --- reading -------------------------------------------------------------------------------------


class StoreReader:
    """Synchronous reads of a store file; what CLI commands use, and the store's own read side.

    Open one with :meth:`Store.read_only`; it sees everything committed, also while a runtime is
    writing to the file. Close it (or use it as a context manager) when done.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Reading the store {self.path} failed: {exc}. If this repeats, the file may be "
                "damaged; copy it aside before trying to repair it."
            ) from exc

    def schema_version(self) -> int:
        return _schema_version(self._conn, self.path)

    def _event(self, seq: int, data: str) -> Event:
        return _decode(self.path, f"event #{seq}", lambda: Event.from_json(data))

    def pending_events(self, session: str | None = None) -> list[Event]:
        """Events not yet consumed, in arrival order."""
        sql = "SELECT seq, data FROM events WHERE status = 'pending'"
        params: list[Any] = []
        if session is not None:
            sql += " AND session = ?"
            params.append(session)
        return [self._event(seq, data) for seq, data in self._rows(sql + " ORDER BY seq", params)]

    def recent_events(
        self, limit: int = 50, session: str | None = None, after_rowid: int | None = None
    ) -> list[StoredEvent]:
        """Events in arrival order: the last `limit`, or the first `limit` after `after_rowid`.

        To tail, pass the rowid of the last event you saw as `after_rowid`.
        """
        where: list[str] = []
        params: list[Any] = []
        if session is not None:
            where.append("session = ?")
            params.append(session)
        if after_rowid is not None:
            where.append("seq > ?")
            params.append(after_rowid)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        order = "ASC" if after_rowid is not None else "DESC"
        rows = self._rows(
            f"SELECT seq, status, data FROM events{clause} ORDER BY seq {order} LIMIT ?",
            [*params, max(0, limit)],
        )
        if after_rowid is None:
            rows.reverse()
        return [StoredEvent(seq, status, self._event(seq, data)) for seq, status, data in rows]

    def load_trajectory(self, session: str) -> list[Message]:
        """The session's trajectory messages, in the order they were appended."""
        rows = self._rows(
            "SELECT seq, data FROM trajectory WHERE session = ? ORDER BY seq", (session,)
        )
        return [
            _decode(self.path, f"trajectory message #{seq}", partial(message_from_json, data))
            for seq, data in rows
        ]

    def sessions(self) -> list[str]:
        """Every session with a trajectory or an event, sorted by name."""
        rows = self._rows(
            "SELECT session FROM trajectory UNION SELECT session FROM events ORDER BY session"
        )
        return [row[0] for row in rows]

    def tasks(self, session: str | None = None) -> list[TaskRecord]:
        """Stored task records, in the order they were first saved."""
        sql, params = "SELECT id, data FROM tasks", []
        if session is not None:
            sql, params = sql + " WHERE session = ?", [session]
        return [
            _decode(self.path, f"task {task_id}", partial(_task_from_json, data))
            for task_id, data in self._rows(sql + " ORDER BY rowid", params)
        ]

    def timers(self, session: str | None = None, *, active_only: bool = False) -> list[TimerRecord]:
        """Stored timers, active ones soonest first, then finished ones."""
        where: list[str] = []
        params: list[Any] = []
        if session is not None:
            where.append("session = ?")
            params.append(session)
        if active_only:
            where.append("active = 1")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._rows(
            f"SELECT id, data FROM timers{clause} "
            "ORDER BY active DESC, next_fire IS NULL, next_fire, rowid",
            params,
        )
        return [
            _decode(self.path, f"timer {timer_id}", partial(_timer_from_json, data))
            for timer_id, data in rows
        ]


def _task_from_json(data: str) -> TaskRecord:
    return TaskRecord.from_dict(json.loads(data))


def _timer_from_json(data: str) -> TimerRecord:
    return TimerRecord.from_dict(json.loads(data))


# --- writing -------------------------------------------------------------------------------------


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


class _Writer(threading.Thread):
    """The one thread that writes: drains the queue, commits each batch in one transaction."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        super().__init__(name=f"wakeful store writer ({path.name})", daemon=True)
        self.conn = conn
        self.path = path
        self.queue: queue.SimpleQueue[_Write | object] = queue.SimpleQueue()

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
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in batch:
                conn.execute("SAVEPOINT one_write")
                try:
                    write.result = write.apply(conn)
                except Exception as exc:
                    # Undo this write only; its caller gets the error, the batch carries on.
                    conn.execute("ROLLBACK TO one_write")
                    write.error = _as_store_error(exc, self.path, write.what)
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


# --- the store -----------------------------------------------------------------------------------


class Store:
    """The runtime's persistent state; open it with :meth:`open`, close it with :meth:`close`.

    Every write method returns after its write is committed. Writes to the store from one event
    loop are applied in the order they were made.
    """

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: StoreReader) -> None:
        """Use :meth:`Store.open`; this takes connections that are already set up."""
        self.path = path
        self._reader = reader
        self._read_limiter = anyio.CapacityLimiter(1)
        self._writer = _Writer(writer, path)
        self._writer.start()
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, *, synchronous: WriteSync = "full") -> Store:
        """Open (creating or upgrading if needed) the store at `path`.

        `synchronous="full"` fsyncs every commit, so a committed write survives power loss;
        `"normal"` survives a crash of the process but may lose the last commits on power loss.
        """
        if synchronous not in get_args(WriteSync):
            raise UserError(f"synchronous must be 'full' or 'normal', got {synchronous!r}.")
        resolved, writer, reader = await anyio.to_thread.run_sync(
            _open_connections, path, synchronous
        )
        return cls(resolved, writer, reader)

    @staticmethod
    def read_only(path: str | Path) -> StoreReader:
        """A synchronous, read-only view of the store at `path`, for CLI commands.

        It never creates, upgrades or changes the file.
        """
        return _open_reader(Path(path).expanduser(), read_only_file=True)

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Finish every queued write, then close both connections. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await anyio.to_thread.run_sync(self._reader.close, limiter=self._read_limiter)
        self._writer.queue.put(_STOP)
        await anyio.to_thread.run_sync(self._writer.join)

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
        if not self._writer.is_alive():
            raise StoreError(
                f"The writer thread of the store {self.path} has stopped (see the log for why). "
                "Restart the runtime."
            )
        write = _Write(apply, what, anyio.lowlevel.current_token(), anyio.Event())
        self._writer.queue.put(write)
        assert write.done is not None
        # The write happens whether or not the caller is cancelled, so wait for its outcome.
        with anyio.CancelScope(shield=True):
            await write.done.wait()
        if write.error is not None:
            raise write.error
        return cast(T, write.result)

    def _write_nowait(self, apply: Callable[[sqlite3.Connection], object], what: str) -> None:
        self._check_open()
        self._writer.queue.put(_Write(apply, what, None, None))

    async def _read(self, read: Callable[[], T]) -> T:
        self._check_open()
        return await anyio.to_thread.run_sync(read, limiter=self._read_limiter)

    async def flush(self) -> None:
        """Wait until every write queued so far (including `*_nowait` ones) is committed."""
        await self._write(lambda conn: None, "a flush")

    # -- events --

    async def add_event(self, event: Event, status: EventStatus = "pending") -> int:
        """Store an event; return its rowid (its position in arrival order)."""
        _check_status(status)
        row = (event.id, event.session, event.kind, _utc_key(event.ts), status, event.to_json())

        def apply(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO events (id, session, kind, ts, status, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )
            return cast(int, cursor.lastrowid)

        return await self._write(apply, f"event {event.id}")

    async def mark_events(self, ids: Iterable[str], status: str) -> None:
        """Set the status ('pending' or 'consumed') of the events with these ids.

        Unknown ids are ignored: marking is idempotent.
        """
        _check_status(status)
        params = [(status, event_id) for event_id in ids]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany("UPDATE events SET status = ? WHERE id = ?", params)

        await self._write(apply, f"the status of {len(params)} event(s)")

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
        """Append messages to a session's trajectory, all or none."""
        rows = [(session, message_to_json(m)) for m in messages]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT INTO trajectory (session, data) VALUES (?, ?)", rows)

        await self._write(apply, f"{len(rows)} trajectory message(s) of session {session!r}")

    async def load_trajectory(self, session: str) -> list[Message]:
        return await self._read(partial(self._reader.load_trajectory, session))

    async def sessions(self) -> list[str]:
        return await self._read(self._reader.sessions)

    # -- tasks --

    async def save_task(self, record: TaskRecord) -> None:
        """Insert or update a task record."""
        await self._write(_upsert_task(record), f"task {record.id}")

    def save_task_nowait(self, record: TaskRecord) -> None:
        """Queue a task save without waiting; for TaskManager's synchronous `on_change`.

        Saves are applied in order; a failure is logged. Await :meth:`flush` to wait for them.
        """
        self._write_nowait(_upsert_task(record), f"task {record.id}")

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
                record = _decode(path, f"task {task_id}", partial(_task_from_json, data))
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
        rows = [
            (r.id, r.session, int(r.active), _utc_key(r.next_fire), json.dumps(r.to_dict()))
            for r in records
        ]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO timers (id, session, active, next_fire, data) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET session = excluded.session, "
                "active = excluded.active, next_fire = excluded.next_fire, data = excluded.data",
                rows,
            )

        await self._write(apply, f"{len(rows)} timer(s)")

    async def delete_timer(self, timer_id: str) -> bool:
        """Delete a timer; return whether it was stored."""

        def apply(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM timers WHERE id = ?", (timer_id,)).rowcount > 0

        return await self._write(apply, f"the deletion of timer {timer_id}")

    async def timers(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        return await self._read(partial(self._reader.timers, session, active_only=active_only))


def _check_status(status: str) -> None:
    if status not in get_args(EventStatus):
        raise UserError(f"An event status is 'pending' or 'consumed', got {status!r}.")


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
