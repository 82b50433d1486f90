"""Resource limits set with `prlimit` on the command it execs (anyio has no preexec hook)."""

from __future__ import annotations

import os
from pathlib import Path

MB = 1024 * 1024


def prlimit_argv(
    argv: list[str], *, cpu_seconds: int, memory_mb: int, max_processes: int, file_size_mb: int
) -> list[str]:
    """`prlimit … -- argv`: CPU seconds, address space, file size and (for non-root) processes.

    RLIMIT_NPROC counts every process of the user, not just this command's, so it is set to the
    user's current count plus the allowance; root is exempt from it (a pids cgroup covers root).
    """
    limits = [
        f"--cpu={cpu_seconds}",
        f"--as={memory_mb * MB}",
        f"--fsize={file_size_mb * MB}",
        "--core=0",
    ]
    if os.geteuid() != 0:
        limits.append(f"--nproc={_processes_of(os.geteuid()) + max_processes}")
    return ["prlimit", *limits, "--", *argv]


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue  # it ended while we counted
    return count
