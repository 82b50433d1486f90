"""Walking a directory tree under the root in a fixed order, without leaving it.

Both find_file and grep_file page through the same walk, so it must give the same order every
time: entries sorted by name, directories descended in place. Symlinked directories are not
followed (a link can lead anywhere); symlinked files are returned with a flag, and a caller that
opens files checks where they lead. A few directories of tools and dependencies are skipped
unless asked for, because they are huge and rarely what a search is after.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
    path: Path
    is_dir: bool
    is_symlink: bool


def walk(top: Path, stats: WalkStats, *, include_skipped: bool = False) -> Iterator[Entry]:
    """Every entry under `top` (not `top` itself), depth first, sorted by name at each level."""
    try:
        with os.scandir(top) as listing:
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
        yield Entry(Path(entry.path), is_dir, is_link)
        if is_dir:
            yield from walk(Path(entry.path), stats, include_skipped=include_skipped)
            if stats.cut_short:
                return


def leads_inside(path: Path, root: Path) -> bool:
    """Whether a path (a symlink, maybe) resolves to somewhere under the resolved root."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    return resolved == root or resolved.is_relative_to(root)


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
