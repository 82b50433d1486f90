"""The workspace's disk quota: how much sandboxed commands may make it grow, watched while they run.

A per-file size limit (RLIMIT_FSIZE) does not stop a command from writing a thousand files of
that size. So the workspace's disk use is measured the first time this process runs a sandboxed
command in it (the baseline) and again while each command runs; a command that makes it grow
past `baseline + quota` is stopped at once, and one that starts while it is already past is
stopped at its first measurement.

What this guarantees, plainly: usage is measured by walking the workspace (allocated blocks, so a
sparse file counts what it really uses; hard links once; other file systems mounted inside are
not entered), every 0.5 s or less often in a big workspace (five times as long as a walk takes).
A command can write for one interval before it is stopped, each file at most the per-file limit,
so the workspace can end past its quota by what can be written in that time. The private /tmp
is different: a size-limited tmpfs, a hard limit (writes past it fail with "No space left").
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .cgroups import CgroupLimits

log = logging.getLogger(__name__)

MIN_INTERVAL_SECONDS = 0.5
_WALK_COST_FACTOR = 5.0
_KILL_INTERVAL_SECONDS = 0.05
_baselines: dict[Path, int] = {}
_baselines_lock = threading.Lock()


def disk_usage(root: Path) -> int:
    """Bytes allocated to files and folders under `root`, on its file system, not following
    symlinks, each hard-linked file once. Files that vanish during the walk are skipped."""
    try:
        device = os.lstat(root).st_dev
    except OSError:
        return 0
    seen: set[tuple[int, int]] = set()
    total = 0
    pending = [str(root)]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_dev != device:
                continue
            if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                key = (info.st_dev, info.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                pending.append(entry.path)
    return total


def baseline_of(workspace: Path) -> int:
    """The workspace's usage when this process first measured it (measured now if never)."""
    with _baselines_lock:
        known = _baselines.get(workspace)
    if known is not None:
        return known
    usage = disk_usage(workspace)
    with _baselines_lock:
        return _baselines.setdefault(workspace, usage)


@dataclass
class QuotaWatch:
    """Watches one command from a thread of its own: kills it when the workspace grows past
    its quota. Started and stopped by :meth:`Sandbox.prepare`, around the command's run.

    A thread rather than a task: the prepared command may be entered in one task and left in
    another (a long-lived interpreter is), which a task group around it would not allow; the
    thread holds no event loop and only walks the disk, sleeps and kills.
    """

    workspace: Path
    limit_bytes: int
    marker: str
    """A word in the command line of the command's bubblewrap processes, to find them."""
    cgroups: CgroupLimits = field(default_factory=CgroupLimits)
    exceeded: bool = False
    growth_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="wakeful-quota", daemon=True)
        self._thread.start()

    async def stop(self, *, final_measure: bool = True) -> None:
        """Stop watching, wait for the thread (at most one walk of the workspace), then measure
        once more: a command that wrote past the quota faster than a walk still counts.

        Without `final_measure` (the command was cancelled: its result says so, not how much
        it wrote) return at once: a walk of a large workspace takes up to a second, which an
        interrupted session must not wait for. The thread ends after the walk it is in; the
        next command's watch measures the workspace again from its start."""
        self._stop.set()
        if not final_measure:
            return
        thread = self._thread
        if thread is not None:
            await anyio.to_thread.run_sync(thread.join)
        if not self.exceeded:
            await anyio.to_thread.run_sync(self._measure)

    def _measure(self) -> bool:
        """Measure the growth now; True (and `exceeded` set) when it is past the limit."""
        usage = disk_usage(self.workspace)
        self.growth_bytes = max(0, usage - baseline_of(self.workspace))
        if self.growth_bytes > self.limit_bytes:
            self.exceeded = True
        return self.exceeded

    def _watch(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            if self._measure():
                log.warning(
                    "a sandboxed command in %s grew it by %d bytes, past its quota of %d; "
                    "stopping it",
                    self.workspace,
                    self.growth_bytes,
                    self.limit_bytes,
                )
                # Until the command's block ends: it may not have started yet (the workspace
                # was already past the quota), or may still be starting processes.
                while not self._stop.is_set():
                    self._kill()
                    self._stop.wait(_KILL_INTERVAL_SECONDS)
                return
            spent = time.monotonic() - started
            self._stop.wait(max(MIN_INTERVAL_SECONDS, spent * _WALK_COST_FACTOR))

    def _kill(self) -> None:
        for pid in [*_members(self.cgroups), *_processes_with(self.marker)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                continue


def _members(cgroups: CgroupLimits) -> list[int]:
    pids: list[int] = []
    for directory in cgroups.directories:
        try:
            pids += [int(line) for line in (directory / "cgroup.procs").read_text().split()]
        except OSError:
            continue
    return pids


def _processes_with(marker: str) -> list[int]:
    wanted = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in arguments:
            found.append(int(entry.name))
    return found
