"""Per-command cgroups: a pids limit that holds for root too, a memory limit, and a clean kill.

RLIMIT_NPROC does not bind root (and counts every process of a user otherwise), so a fork bomb is
only contained by a pids cgroup. Each command gets a fresh child of the runtime's own cgroup (so
limits the runtime runs under still apply), joins it before it starts (see :meth:`join_argv`), and
everything left in it afterwards is killed before the cgroup is removed. cgroup v1 (a hierarchy
per controller) and v2 (one unified hierarchy, controllers delegated to the runtime's cgroup) are
both used when writable; where neither is, the limits fall back to rlimits and say so.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shlex
import signal
from dataclasses import dataclass, field
from pathlib import Path

import anyio

log = logging.getLogger(__name__)

_V1_ROOT = Path("/sys/fs/cgroup")
_KILL_WAIT_SECONDS = 2.0
_POLL_SECONDS = 0.01
_counter = itertools.count(1)


@dataclass
class CgroupLimits:
    """The cgroups one command runs in; empty when the machine offers none we may write."""

    directories: list[Path] = field(default_factory=list)
    controllers: list[str] = field(default_factory=list)  # "pids", "memory"

    @classmethod
    def create(cls, *, max_processes: int, memory_bytes: int) -> CgroupLimits:
        """Make the cgroups and set their limits; a controller that cannot be used is skipped."""
        limits = cls()
        name = f"wakeful-sandbox-{os.getpid()}-{next(_counter)}"
        wanted = {
            "pids": {"pids.max": str(max_processes)},
            "memory": {"memory.limit_in_bytes": str(memory_bytes)},
        }
        for controller, values in wanted.items():
            parent = _v1_own_cgroup(controller)
            if parent is None:
                continue
            directory = parent / name
            if _make(directory, values):
                limits.directories.append(directory)
                limits.controllers.append(controller)
        if not limits.directories:
            limits._create_v2(name, max_processes, memory_bytes)
        return limits

    def _create_v2(self, name: str, max_processes: int, memory_bytes: int) -> None:
        parent = _v2_own_cgroup()
        if parent is None:
            return
        try:
            delegated = (parent / "cgroup.subtree_control").read_text().split()
        except OSError:
            return
        values = {}
        if "pids" in delegated:
            values["pids.max"] = str(max_processes)
        if "memory" in delegated:
            values["memory.max"] = str(memory_bytes)
        if values and _make(parent / name, values):
            self.directories.append(parent / name)
            self.controllers.extend(v.split(".")[0] for v in values)

    def join_argv(self, argv: list[str]) -> list[str]:
        """`argv` wrapped so the process moves itself into the cgroups, then execs `argv`.

        The move happens before the command starts, so even its first fork is counted (a pid
        written after the start would leave children already forked outside).
        """
        if not self.directories:
            return argv
        procs = " ".join(shlex.quote(str(d / "cgroup.procs")) for d in self.directories)
        script = f'for f in {procs}; do echo $$ > "$f" || exit 126; done; exec "$@"'
        return ["/bin/sh", "-c", script, "sandbox-join", *argv]

    def describe(self) -> str:
        return "+".join(self.controllers) + " cgroup" if self.controllers else "no cgroup"

    def hit_limits(self) -> list[str]:
        """Which limits the command ran into ("processes", "memory"), read before cleanup."""
        hit = []
        for directory in self.directories:
            if _counter_of(directory / "pids.events", "max") > 0:
                hit.append("processes")
            if _read_int(directory / "memory.failcnt") > 0:
                hit.append("memory")
            if _counter_of(directory / "memory.events", "max") > 0:
                hit.append("memory")
        return hit

    async def remove(self) -> None:
        """Kill whatever still runs in the cgroups, then remove them."""
        for directory in self.directories:
            await _kill_all(directory)
            try:
                directory.rmdir()
            except OSError as exc:
                log.warning("could not remove the sandbox cgroup %s: %s", directory, exc)
        self.directories.clear()


def _make(directory: Path, values: dict[str, str]) -> bool:
    try:
        directory.mkdir()
    except OSError:
        return False
    try:
        for name, value in values.items():
            (directory / name).write_text(value)
    except OSError as exc:
        log.info("cgroup %s cannot take its limits (%s); not using it", directory, exc)
        directory.rmdir()
        return False
    return True


async def _kill_all(directory: Path) -> None:
    # A fork bomb can fork between reading the list and the kill; repeat until it is empty.
    with anyio.move_on_after(_KILL_WAIT_SECONDS):
        while pids := _members(directory):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
            await anyio.sleep(_POLL_SECONDS)


def _members(directory: Path) -> list[int]:
    try:
        return [int(line) for line in (directory / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _v1_own_cgroup(controller: str) -> Path | None:
    mount = _V1_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    for line in _own_cgroup_lines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return mount / path.lstrip("/")
    return None


def _v2_own_cgroup() -> Path | None:
    mount = _cgroup2_mount()
    if mount is None:
        return None
    for line in _own_cgroup_lines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            return mount / path.lstrip("/")
    return None


def _cgroup2_mount() -> Path | None:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _own_cgroup_lines() -> list[str]:
    try:
        return Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _counter_of(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0
