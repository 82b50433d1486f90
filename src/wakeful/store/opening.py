"""Opening a store for a runtime: telling what the file is before anything touches it.

In order: what is at the path (nothing: a new store; an empty file, a directory, something that
is not SQLite, a SQLite file of another program, a store of a newer wakeful: refused), whether
this user may write there (a permission problem is said to be one, not reported as damage), the
lock (one runtime per store, see :mod:`.lock`), an integrity check when the last runtime did not
shut down cleanly, and only then the write connection (WAL mode, migrations). Every refusal
leaves the file byte-for-byte as it was.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from pathlib import Path
from typing import Final

from ..errors import StoreError, StoreFull
from .disk_space import describe_bytes, free_bytes
from .lock import StoreLock
from .reader import StoreReader, open_reader
from .schema import (
    BUSY_TIMEOUT_MS,
    MIGRATIONS,
    apply_migrations,
    check_not_newer,
    connect,
    not_a_store,
    read_only_mode,
    read_schema_version,
)
from .writer import WAL_LIMIT_BYTES, WriteSync

__all__ = [
    "SQLITE_MAGIC",
    "connect_query_only",
    "damage_found",
    "open_store_files",
    "open_write_connection",
    "quick_check",
]

log = logging.getLogger(__name__)

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
# quick_check stops after this many problems; the first few are enough to say what is wrong.
_MAX_PROBLEMS: Final = 20
# Opening needs a little room (SQLite's -shm index, the lock file); below this, a failure to open
# is said to be the full disk's, not damage.
_ROOM_TO_OPEN: Final = 64 * 1024


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
        conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
        apply_migrations(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def open_store_files(
    path: str | Path, synchronous: WriteSync, *, initialise_empty_file: bool = False
) -> tuple[Path, sqlite3.Connection, StoreReader, StoreLock]:
    """The store's path (`~` expanded), its locked and checked write connection, its reader and
    its lock (blocking).

    `initialise_empty_file` lets a 0-byte file become a new store; without it such a file is
    refused, since a store truncated by a failure looks the same. On a disk too full to open
    it (SQLite needs a few pages), the StoreError is a StoreFull that says so.
    """
    path = Path(path).expanduser()
    try:
        return _open_checked(path, synchronous, initialise_empty_file)
    except StoreError as exc:
        free = free_bytes(path)
        if isinstance(exc, StoreFull) or free is None or free >= _ROOM_TO_OPEN:
            raise
        raise StoreFull(
            f"Cannot open the store {path}: its disk is full ({describe_bytes(free)} free), and "
            f"SQLite needs a little room to open it (about {describe_bytes(_ROOM_TO_OPEN)}: its "
            "-shm index and the lock file). This is not damage, and nothing was changed. Free "
            f"space on the disk of {path.parent}, then start again.",
            free_bytes=free,
        ) from exc


def _open_checked(
    path: Path, synchronous: WriteSync, initialise_empty_file: bool
) -> tuple[Path, sqlite3.Connection, StoreReader, StoreLock]:
    existing_version = _inspect_before_opening(path, initialise_empty_file)
    lock = StoreLock.acquire(path)
    clean = lock.last_shutdown_clean
    try:
        if existing_version and not clean:
            problems = quick_check(path, read_only=False)
            if problems:
                raise damage_found(path, problems, after_unclean_shutdown=True)
        writer = open_write_connection(path, synchronous)
        try:
            reader = open_reader(path, read_only_file=False)
        except BaseException:
            writer.close()
            raise
    except BaseException:
        # Nothing was written: leave the record of the last shutdown as it was.
        lock.release(clean=clean)
        raise
    if existing_version and not clean:
        log.warning(
            "the last runtime on the store %s did not shut down cleanly (%s); its integrity "
            "check passed",
            path,
            lock.previous.describe() if lock.previous else "no record of it",
        )
    return path, writer, reader, lock


def _inspect_before_opening(path: Path, initialise_empty_file: bool) -> int:
    """The schema version of the store at `path` (0: a new store), or a StoreError that says
    what is there instead. Reads only; creates nothing but the store's folder."""
    if path.is_dir():
        raise StoreError(
            f"{path} is a directory, not a store file. Give a file path such as "
            f"{path / 'wakeful.db'}."
        )
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot create the folder of the store {path}: {exc.strerror or exc}. Create "
                "it, or choose a writable location."
            ) from exc
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise StoreError(
                f"Cannot create the store {path}: its folder {path.parent} is not writable by "
                "this user. Make it writable, or choose another store path."
            )
        return 0
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except OSError as exc:
        raise _permission_problem(path, exc, version=None) from exc
    if not header:
        if initialise_empty_file:
            return 0
        raise StoreError(
            f"The store {path} is an empty file (0 bytes). A wakeful store is never empty once "
            "created, so this one was probably truncated (a full disk, an interrupted copy, a "
            "crash) and what it held is not in it any more. Nothing was changed. Restore it from "
            "a backup if you have one; to start a new, empty store at this path on purpose, "
            "delete the file first."
        )
    if not header.startswith(SQLITE_MAGIC):
        raise StoreError(
            f"{path} is not a SQLite database, so it is not a wakeful store (it begins with "
            f"{header[:16]!r}). Nothing in it was changed. If the path is wrong, point wakeful "
            "at the right file. If this was your wakeful store, its first page is damaged: keep "
            f"the file, and try to recover a copy with `sqlite3 {path} .recover`."
        )
    version = _readable_version(path)
    check_not_newer(version, path, len(MIGRATIONS))
    if not os.access(path, os.R_OK | os.W_OK):
        raise _permission_problem(path, None, version=version)
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise _permission_problem(path.parent, None, version=version, store=path)
    return version


def connect_query_only(path: Path, mode: str) -> sqlite3.Connection:
    """A connection that cannot write the database; `mode` is a SQLite URI option such as
    "mode=ro", "immutable=1", or "" (the file opened normally, e.g. to recover its WAL index)."""
    conn = sqlite3.connect(
        f"{path.resolve().as_uri()}{'?' + mode if mode else ''}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    conn.execute("PRAGMA query_only = ON")
    return conn


def _readable_version(path: Path) -> int:
    """The schema version of the SQLite file `path`; a StoreError for a foreign or damaged one.

    Read without changing anything: a file in a folder this user cannot write is read as
    immutable (SQLite cannot make its -shm file there), the rest read-only.
    """
    try:
        conn = connect_query_only(path, read_only_mode(path))
    except sqlite3.Error as exc:
        raise _permission_problem(path, exc, version=None) from exc
    try:
        return read_schema_version(conn, path)
    except sqlite3.DatabaseError as exc:
        raise damage_found(path, [str(exc)], after_unclean_shutdown=False) from exc
    finally:
        conn.close()


def quick_check(path: Path, *, read_only: bool = True) -> list[str]:
    """The problems `PRAGMA quick_check` finds in the store file (empty: none). Blocking.

    `read_only=False` opens the file normally (it still writes no data), which lets SQLite rebuild
    the WAL index a crashed runtime left behind; only the lock holder should do that.
    """
    try:
        conn = connect_query_only(path, read_only_mode(path) if read_only else "")
        try:
            rows = conn.execute(f"PRAGMA quick_check({_MAX_PROBLEMS})").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    found = [str(row[0]) for row in rows]
    return [] if found == ["ok"] else found


def damage_found(path: Path, problems: list[str], *, after_unclean_shutdown: bool) -> StoreError:
    """The error for a store SQLite finds damaged; it says what is damaged and what to do."""
    shown = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if problems[3:] else "")
    why = (
        " (checked because the last runtime on it did not shut down cleanly)"
        if after_unclean_shutdown
        else ""
    )
    return StoreError(
        f"The store {path} is damaged{why}: SQLite reports {shown}. Nothing was changed and "
        "the runtime did not start. Keep the file and do not write to it: copy it aside, "
        f"recover what is readable with `sqlite3 {path} .recover | sqlite3 recovered.db`, and "
        "point wakeful at recovered.db (or restore a backup). `wakeful doctor` shows the check "
        "again."
    )


def _permission_problem(
    path: Path, exc: BaseException | None, *, version: int | None, store: Path | None = None
) -> StoreError:
    """The error for a store this user may not write (or read): never advice to discard it."""
    store = store or path
    what = "folder" if store != path else "file"
    reason = (
        f"{exc.strerror}" if isinstance(exc, OSError) and exc.strerror else f"{exc}" if exc else ""
    )
    read_only_fs = isinstance(exc, OSError) and exc.errno == errno.EROFS
    if read_only_fs:
        problem = f"the {what} {path} is on a read-only file system"
    elif what == "folder":
        problem = (
            f"its folder {path} is read-only for this user (wakeful and SQLite create the lock, "
            "-wal and -shm files beside the store)"
        )
    else:
        problem = "the file is not readable and writable by this user" + (
            f" ({reason})" if reason else ""
        )
    state = (
        f"It is a wakeful store (schema version {version}) and this is not damage: its data is "
        "fine."
        if version
        else "This is a permission problem, not damage: nothing suggests its data is harmed."
    )
    return StoreError(
        f"Cannot open the store {store} for writing: {problem}. {state} Do not move it aside or "
        f"delete it. Make the {what} writable by this user (or run as its owner), or copy the "
        "store to a writable place and point wakeful there."
    )
