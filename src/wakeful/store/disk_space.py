"""Free space on the store's disk: telling a full disk from other failures, and saying so.

A full disk shows up two ways, and the store watches both. SQLite reports it on a write
(`SQLITE_FULL`, "database or disk is full"; the OS says `ENOSPC` or `EDQUOT`): that is the
ground truth, and writes of work under way are then held in memory (see :mod:`.writer`). And
before a new event is accepted, the free space of the store's file system is compared with a
reserve (`os.statvfs`, at most once a second): refusing new events while there is still a
little room keeps that room for the trajectories of sessions already running, which matter more
than events their senders can send again.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from pathlib import Path
from typing import Final

from ..errors import StoreFull

__all__ = [
    "DEFAULT_RESERVE_BYTES",
    "SQLITE_FULL",
    "FreeSpaceGauge",
    "describe_bytes",
    "disk_full_error",
    "free_bytes",
    "is_disk_full",
]

SQLITE_FULL: Final = 13
# New events are refused when less than this is free on the store's disk: room kept for the
# trajectories of running sessions, the WAL and a checkpoint. Small enough for any machine.
DEFAULT_RESERVE_BYTES: Final = 2 * 1024 * 1024
# How often the free space is measured at most (statvfs is cheap, but submit is a hot path).
_MEASURE_EVERY_S: Final = 1.0


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (from SQLite or the OS) says the disk is full."""
    if isinstance(exc, StoreFull):
        return True
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return isinstance(code, int) and code & 0xFF == SQLITE_FULL
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return False


def free_bytes(path: Path) -> int | None:
    """Bytes this user may still write on the file system of `path` (a file or folder that
    exists, or whose folder does); None when that cannot be told."""
    target = path if path.exists() else path.parent
    try:
        stat = os.statvfs(target)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def describe_bytes(count: int | None) -> str:
    """`1.5 MiB`, `812 KiB`, `0 bytes`; "an unknown amount" for None."""
    if count is None:
        return "an unknown amount"
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MiB"
    if count >= 1024:
        return f"{count // 1024} KiB"
    return f"{count} bytes"


def disk_full_error(
    path: Path, what: str, *, free: int | None, reserve: int | None = None
) -> StoreFull:
    """The error for `what` that the store cannot keep because its disk is (nearly) full."""
    if reserve is not None:
        why = (
            f"only {describe_bytes(free)} is free on its disk, less than the "
            f"{describe_bytes(reserve)} kept in reserve for the sessions already running"
        )
    else:
        why = f"its disk is full ({describe_bytes(free)} free)"
    return StoreFull(
        f"Could not store {what} in {path}: {why}. Nothing of it was stored. New events are "
        "refused until space is freed, while running sessions go on and their unsaved state is "
        f"written as soon as there is room. Free space on the disk of {path.parent} (or move "
        "the store to a larger disk), then send the event again.",
        free_bytes=free,
    )


class FreeSpaceGauge:
    """The free space on a store's disk, measured at most once a second."""

    def __init__(self, path: Path, reserve: int) -> None:
        self.path = path
        self.reserve = reserve
        self._measured_at: float | None = None
        self._free: int | None = None

    def free(self) -> int | None:
        now = time.monotonic()
        if self._measured_at is None or now - self._measured_at >= _MEASURE_EVERY_S:
            self._free = free_bytes(self.path)
            self._measured_at = now
        return self._free

    def forget(self) -> None:
        """Measure again next time (space was just found to be short, or to be back)."""
        self._measured_at = None

    def below_reserve(self) -> bool:
        free = self.free()
        return free is not None and free < self.reserve
