"""Readings of the host: disk, memory and CPU use, and the processes behind them.

Plain functions over `os.statvfs` and Linux's /proc, with no dependency (psutil is not
installed, and a few files say all we need). Each reading is blocking file I/O: call it through
`anyio.to_thread`. A whole /proc scan costs a few milliseconds per hundred processes, so the
system channel scans only when it has a reason: a task with processes to measure, or an alert
that names the top consumers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import UserError

__all__ = [
    "CpuTimes",
    "DiskReading",
    "HostUnreadable",
    "MemoryReading",
    "ProcessReading",
    "cpu_percent",
    "cpu_times",
    "disk_reading",
    "memory_reading",
    "process_command",
    "processes",
    "tree_of",
]

PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class HostUnreadable(UserError):
    """A reading the host does not offer (no /proc: not Linux), with what to do instead."""


@dataclass(frozen=True)
class DiskReading:
    """The file system holding `path`: where it is mounted and how full it is."""

    path: Path
    mount: Path
    device: int
    total_bytes: int
    free_bytes: int

    @property
    def used_percent(self) -> float:
        # What an unprivileged writer can still use counts as free (statvfs f_bavail), as df
        # reports it: the blocks reserved for root do not help the runtime.
        if self.total_bytes <= 0:
            return 0.0
        return 100.0 * (self.total_bytes - self.free_bytes) / self.total_bytes


@dataclass(frozen=True)
class MemoryReading:
    total_bytes: int
    available_bytes: int

    @property
    def used_percent(self) -> float:
        if self.total_bytes <= 0:
            return 0.0
        return 100.0 * (self.total_bytes - self.available_bytes) / self.total_bytes


@dataclass(frozen=True)
class CpuTimes:
    """The host's CPU time since boot, in ticks: busy and in all."""

    busy: int
    total: int


@dataclass(frozen=True)
class ProcessReading:
    """One process: its parent, its name, the CPU seconds it and its reaped children used,
    and its resident memory."""

    pid: int
    ppid: int
    name: str
    cpu_seconds: float
    rss_bytes: int


def disk_reading(path: Path) -> DiskReading:
    """How full the file system holding `path` is (OSError when `path` does not exist)."""
    stat = os.statvfs(path)
    return DiskReading(
        path=path,
        mount=_mount_point(path),
        device=os.stat(path).st_dev,
        total_bytes=stat.f_blocks * stat.f_frsize,
        free_bytes=stat.f_bavail * stat.f_frsize,
    )


def _mount_point(path: Path) -> Path:
    current = path.resolve()
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def memory_reading() -> MemoryReading:
    """The host's memory: total and available (MemAvailable: what can be had without
    swapping, counting reclaimable caches as available)."""
    values: dict[str, int] = {}
    for line in _read_proc("meminfo").splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[key] = int(fields[0]) * 1024
    return MemoryReading(values.get("MemTotal", 0), values.get("MemAvailable", 0))


def cpu_times() -> CpuTimes:
    """The host's CPU times since boot (the first line of /proc/stat)."""
    fields = [int(value) for value in _read_proc("stat").split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already in user and nice)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return CpuTimes(busy=total - idle, total=total)


def cpu_percent(before: CpuTimes, after: CpuTimes) -> float | None:
    """How busy the CPUs were between two readings, 0-100; None when no time passed."""
    elapsed = after.total - before.total
    if elapsed <= 0:
        return None
    return 100.0 * (after.busy - before.busy) / elapsed


def processes() -> dict[int, ProcessReading]:
    """Every process of the host, by pid (those that end during the scan are left out)."""
    found: dict[int, ProcessReading] = {}
    try:
        entries = os.scandir(PROC)
    except FileNotFoundError as exc:
        raise _no_proc() from exc
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_bytes()
            except OSError:
                continue  # it ended while we looked
            reading = _parse_stat(int(entry.name), stat)
            if reading is not None:
                found[reading.pid] = reading
    return found


def _parse_stat(pid: int, stat: bytes) -> ProcessReading | None:
    # "pid (comm) state ppid pgrp … utime stime cutime cstime … rss …": comm may hold spaces and
    # parentheses, so fields are counted from the last ")". Field n of proc(5) is rest[n - 3].
    close = stat.rfind(b")")
    if close < 0:
        return None
    name = stat[stat.find(b"(") + 1 : close].decode(errors="replace")
    rest = stat[close + 2 :].split()
    if len(rest) < 22:
        return None
    ticks = sum(int(value) for value in rest[11:15])  # utime stime cutime cstime
    return ProcessReading(
        pid=pid,
        ppid=int(rest[1]),
        name=name,
        cpu_seconds=ticks / _TICKS,
        rss_bytes=max(0, int(rest[21])) * _PAGE,
    )


def tree_of(roots: Iterable[int], table: Mapping[int, ProcessReading]) -> list[ProcessReading]:
    """The processes of `table` that are one of `roots` or descend from one."""
    children: dict[int, list[int]] = {}
    for reading in table.values():
        children.setdefault(reading.ppid, []).append(reading.pid)
    members: list[ProcessReading] = []
    seen: set[int] = set()
    stack = [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        members.append(table[pid])
        stack.extend(children.get(pid, ()))
    return members


def process_command(pid: int, limit: int = 200) -> str:
    """A process's command line on one line, cut to `limit` characters ("" once it ended)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    line = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _read_proc(name: str) -> str:
    try:
        return (PROC / name).read_text()
    except FileNotFoundError as exc:
        raise _no_proc() from exc


def _no_proc() -> HostUnreadable:
    return HostUnreadable(
        f"{PROC} is not there, so memory, CPU and process readings are unavailable (they need "
        "Linux). Leave only the disk checks on: set memory_percent, cpu_percent and the task "
        'limits to 0 in [[channels.system]], or monitors = ["user_inactive", "process_timeout"].'
    )
