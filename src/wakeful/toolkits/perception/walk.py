"""Walking a directory tree under the root in a fixed order, without leaving it.

Both find_file and grep_file page through the same walk, so it must give the same order every
time: entries sorted by name, directories descended in place. The walk goes by descriptor: each
directory is listed through the descriptor it was opened as, and a subdirectory is opened
relative to its parent with O_NOFOLLOW, so a directory swapped for a symlink during the walk is
not descended into. Symlinked directories are not followed (a link can lead anywhere); symlinked
files are returned with a flag, and a caller that opens files resolves them beneath the root. A
few directories of tools and dependencies are skipped unless asked for, because they are huge
and rarely what a search is after.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from ...safety.beneath import READ, Opened, Root

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
    }
)
MAX_ENTRIES = 200_000
"""Entries visited at most in one walk; a bigger tree is reported as cut short."""


@dataclass
class WalkStats:
    skipped_dirs: int = 0
    visited: int = 0
    cut_short: bool = False


@dataclass(frozen=True, slots=True)
class Entry:
    relative: PurePosixPath
    """The entry's path relative to the root."""
    below: PurePosixPath
    """The entry's path relative to the top of the walk."""
    directory: int
    """The descriptor of the directory holding it; open only while the walk is at the entry."""
    is_dir: bool
    is_symlink: bool

    @property
    def name(self) -> str:
        return self.below.name


def walk(top: Opened, stats: WalkStats, *, include_skipped: bool = False) -> Iterator[Entry]:
    """Every entry under `top` (not `top` itself), depth first, sorted by name at each level."""
    yield from _walk(top.fd, top.relative, PurePosixPath(), stats, include_skipped)


def _walk(
    fd: int,
    relative: PurePosixPath,
    below: PurePosixPath,
    stats: WalkStats,
    include_skipped: bool,
) -> Iterator[Entry]:
    try:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError:
        return  # unreadable directory: nothing under it can be shown
    for entry in entries:
        if stats.visited >= MAX_ENTRIES:
            stats.cut_short = True
            return
        stats.visited += 1
        is_link = entry.is_symlink()
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and not include_skipped and entry.name in SKIPPED_DIRS:
            stats.skipped_dirs += 1
            continue
        yield Entry(relative / entry.name, below / entry.name, fd, is_dir, is_link)
        if is_dir:
            try:
                inner = os.open(entry.name, READ | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue  # gone, unreadable, or swapped for a symlink since it was listed
            try:
                yield from _walk(
                    inner, relative / entry.name, below / entry.name, stats, include_skipped
                )
            finally:
                os.close(inner)
            if stats.cut_short:
                return


def open_entry(entry: Entry, root: Root) -> int | None:
    """A file the walk found, opened to read; None for a symlink that leads out of the root.

    A plain entry is opened in its directory's descriptor with O_NOFOLLOW; a symlink is resolved
    beneath the root. OSError when it cannot be opened (gone, unreadable).
    """
    if not entry.is_symlink:
        return os.open(entry.name, READ | os.O_NOFOLLOW, dir_fd=entry.directory)
    try:
        return root.open_found(entry.relative.as_posix()).fd
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            return None
        raise


def skipped_note(stats: WalkStats) -> str:
    notes = []
    if stats.skipped_dirs:
        names = ", ".join(sorted(SKIPPED_DIRS))
        notes.append(
            f"Skipped {stats.skipped_dirs} director{'y' if stats.skipped_dirs == 1 else 'ies'} "
            f"of tools and dependencies ({names}); pass include_skipped=true to search them."
        )
    if stats.cut_short:
        notes.append(
            f"Stopped after {MAX_ENTRIES:,} entries: the tree is too big to search whole. "
            "Pass a narrower path."
        )
    return " ".join(notes)
