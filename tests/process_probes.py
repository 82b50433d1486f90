"""Looking at real processes from tests, through /proc (Linux only)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _stat_fields(stat: Path) -> list[str] | None:
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def live_group_members(pgid: int) -> list[int]:
    """Pids in the process group that are not zombies (PID 1 may never reap orphans here)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def live_processes_matching(fragment: str) -> list[int]:
    """Pids (not zombies, not this process) whose command line contains `fragment`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = _stat_fields(entry / "stat")
        if fragment in cmdline and fields and fields[0] not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def end_process(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Kill `proc` if it still runs, reap it, and close the pipes a test opened to it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
