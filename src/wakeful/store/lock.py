"""One runtime per store: an exclusive advisory lock on a sidecar file next to the store.

The lock is ``flock`` on ``<store>.lock`` (``wakeful.db`` → ``wakeful.db.lock``), held from before
the store is first written until it is closed. The kernel drops it when its holder dies, even by
SIGKILL, so a lock file left behind by a dead runtime is taken over silently. The file records who
holds it (pid, host, start time) for the error a second runtime gets, and whether its last holder
closed the store cleanly, so that an unclean shutdown can be followed by an integrity check.

Readers (`wakeful events tail`, `wakeful doctor`, …) never take the lock: WAL lets them read while
a runtime writes.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from ..errors import StoreError

__all__ = ["LockHolder", "StoreLock", "lock_is_held", "lock_path_of", "read_holder"]

log = logging.getLogger(__name__)

# How long a second opener retries before giving up: long enough to ride out `wakeful doctor`
# probing the lock for a moment, short enough that a real conflict fails at once.
_RETRY_FOR_S: Final = 0.5
_RETRY_EVERY_S: Final = 0.02

ShutdownState = Literal["running", "clean"]


def lock_path_of(store_path: Path) -> Path:
    """The lock file of the store at `store_path`: the same name with ``.lock`` appended."""
    return store_path.with_name(store_path.name + ".lock")


@dataclass(frozen=True)
class LockHolder:
    """What a lock file says about the runtime that holds (or last held) the store."""

    pid: int | None
    host: str | None
    started_at: str | None
    state: ShutdownState | None
    closed_at: str | None = None

    def describe(self) -> str:
        """`pid 123 on host "box", started 2026-…`, with what is known."""
        who = f"pid {self.pid}" if self.pid is not None else "an unknown process"
        if self.host:
            who += f" on host {self.host!r}"
        if self.started_at:
            who += f", started {self.started_at}"
        return who


def _decode_holder(text: str) -> LockHolder | None:
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    pid = data.get("pid")
    state = data.get("state")
    return LockHolder(
        pid=pid if isinstance(pid, int) else None,
        host=str(data["host"]) if isinstance(data.get("host"), str) else None,
        started_at=str(data["started_at"]) if isinstance(data.get("started_at"), str) else None,
        state=state if state in ("running", "clean") else None,
        closed_at=str(data["closed_at"]) if isinstance(data.get("closed_at"), str) else None,
    )


def _read_fd(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def read_holder(store_path: Path) -> LockHolder | None:
    """What the lock file of `store_path` says, without taking the lock; None without one."""
    try:
        text = lock_path_of(store_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return _decode_holder(text)


def lock_is_held(store_path: Path) -> bool | None:
    """Whether a process holds the store's lock now; None when that cannot be told.

    It tries a shared lock for an instant, so a runtime starting at that very moment retries
    briefly instead of failing (see `_RETRY_FOR_S`).
    """
    try:
        fd = os.open(lock_path_of(store_path), os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)
    return False


class StoreLock:
    """The exclusive lock of one store file, held by this process until :meth:`release`."""

    def __init__(self, store_path: Path, fd: int, previous: LockHolder | None) -> None:
        """Use :meth:`acquire`."""
        self.store_path = store_path
        self.path = lock_path_of(store_path)
        self._fd: int | None = fd
        # What the file said before this process took it: did the last holder close cleanly?
        self.previous = previous
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")

    @property
    def last_shutdown_clean(self) -> bool:
        """Whether the last runtime on this store closed it; False when unknown (no record)."""
        return self.previous is not None and self.previous.state == "clean"

    @classmethod
    def acquire(cls, store_path: Path) -> StoreLock:
        """Take the lock of `store_path`, or raise a StoreError naming the runtime holding it.

        Blocking (a short retry): call it from a worker thread.
        """
        path = lock_path_of(store_path)
        try:
            # Not inherited by child processes (os.open's default): a shell command the runtime
            # started must not keep the store locked after the runtime has ended.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _cannot_create(path, exc) from exc
        try:
            deadline = time.monotonic() + _RETRY_FOR_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise _held_by(store_path, _decode_holder(_read_fd(fd))) from None
                    time.sleep(_RETRY_EVERY_S)
                except OSError as exc:
                    raise StoreError(
                        f"Cannot lock the store {store_path} through {path}: {exc}. The file "
                        "system may not support locks (a network share?); put the store on a "
                        "local disk."
                    ) from exc
            lock = cls(store_path, fd, _decode_holder(_read_fd(fd)))
            lock._record("running")
        except BaseException:
            os.close(fd)
            raise
        return lock

    def _record(self, state: ShutdownState) -> None:
        assert self._fd is not None
        record: dict[str, object] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": self.started_at,
            "state": state,
        }
        if state == "clean":
            record["closed_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        data = (json.dumps(record) + "\n").encode()
        # Overwrite, then cut to length (never truncate first): a record rewritten in place
        # takes no new disk space, so the lock is recorded on a full disk too.
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))
        os.fsync(self._fd)

    def release(self, *, clean: bool) -> None:
        """Record whether the store was closed cleanly, then let the lock go. Safe to call twice.

        Blocking (an fsync): call it from a worker thread.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if clean:
                self._fd = fd
                try:
                    self._record("clean")
                except OSError as exc:
                    # The data is safe either way; the next start merely re-checks the file.
                    log.warning("could not record the clean shutdown in %s: %s", self.path, exc)
                finally:
                    self._fd = None
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None


def _held_by(store_path: Path, holder: LockHolder | None) -> StoreError:
    who = holder.describe() if holder is not None else "another process"
    same = holder is not None and holder.pid == os.getpid()
    where = (
        f"{who}, which is this very process (another Runtime or Store.open on the same file "
        "that is still open)"
        if same
        else who
    )
    stop = (
        "close the other Store (or leave its `async with Runtime(...)` block) first"
        if same
        else f"stop it first (e.g. `kill {holder.pid}`)"
        if holder is not None and holder.pid is not None
        else "stop it first"
    )
    return StoreError(
        f"The store {store_path} is in use by {where}: only one runtime may use a store at a "
        f"time, or events would be handled twice. To use this store, {stop}; to run a second "
        f"runtime, give it another store path. (Lock file: {lock_path_of(store_path)}.)"
    )


def _cannot_create(path: Path, exc: OSError) -> StoreError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StoreError(
            f"Cannot create the lock file {path}: {exc.strerror}. The folder {path.parent} is "
            "not writable by this user, and wakeful (and SQLite) need to create files beside the "
            "store. The store itself was not changed and this does not mean it is damaged. Make "
            "the folder writable, run as the user who owns it, or copy the store to a writable "
            "place and point wakeful there."
        )
    return StoreError(
        f"Cannot create the lock file {path}: {exc}. Check that its folder exists and is writable."
    )
