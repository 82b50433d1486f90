"""A small, real disk for disk-full tests: a tmpfs the test mounts in a temp folder (root only,
as in CI), and a filler file that takes its space away and gives it back."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHUNK = 64 * 1024


@contextmanager
def small_tmpfs(where: Path, size_mb: int) -> Iterator[Path]:
    """Mount a tmpfs of `size_mb` MiB at `where` for the duration; always unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for a disk-full test needs root (CI runs the tests as root)")
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (no CAP_SYS_ADMIN?): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        # Lazy: a store a failed test left open must not keep the mount (and the next test) busy.
        subprocess.run(["umount", "-l", str(where)], check=True)


def free_bytes(where: Path) -> int:
    stat = os.statvfs(where)
    return stat.f_bavail * stat.f_frsize


def fill(where: Path, *, leave: int = 0, name: str = "filler") -> Path:
    """Take the free space of the file system at `where` with a filler file, leaving about
    `leave` bytes free; returns the filler (delete it to give the space back)."""
    filler = where / name
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = b"\0" * CHUNK
        while chunk:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk = chunk[: len(chunk) // 2]  # down to the last free bytes
    finally:
        os.close(fd)
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))
    return filler
