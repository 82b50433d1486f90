"""Processes the runtime starts die with it, even when it is killed with SIGKILL.

A runtime that stops cleanly stops its commands itself (see :mod:`.process`). One that is killed
cannot, and without bubblewrap (whose `--die-with-parent` ends the sandbox) its commands would
run on: a test watcher, a server, a `setsid` daemon, with nobody to report them to. So each
runtime process has one **reaper**: a small Python process started once, in a session of its own
(a Ctrl-C or a signal to the runtime's process group does not reach it), that reads a pipe whose
only writer is the runtime. The runtime tells it which process groups and cgroups its commands
run in; when the pipe closes — the runtime has exited, however it died, since the kernel closes
its descriptors — the reaper kills every group and every process of every cgroup still on its
list, then exits.

Why a pipe rather than a parent-death signal (`PR_SET_PDEATHSIG`): that signal reaches only the
direct child, it is cleared on fork, so a command's own children would survive; and it fires
when the *thread* that forked exits, not the process. Why process groups and cgroups: every
command runs as the leader of its own group, which reaches everything it started unless a child
left the group on purpose (`setsid`); the per-command cgroup (where the machine lets the runtime
make one) reaches those too. What it cannot reach: a `setsid` daemon of a command that runs with
no cgroup, on a machine without writable cgroups and without bubblewrap.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio

log = logging.getLogger(__name__)

REAPER_SOURCE = r"""
import os, signal, sys, time
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(number, signal.SIG_IGN)
groups, cgroups = set(), set()
for line in sys.stdin:
    op, _, arg = line.rstrip("\n").partition(" ")
    if op == "+g":
        groups.add(int(arg))
    elif op == "-g":
        groups.discard(int(arg))
    elif op == "+c":
        cgroups.add(arg)
    elif op == "-c":
        cgroups.discard(arg)
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
for cgroup in cgroups:
    for _ in range(100):
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as file:
                pids = [int(p) for p in file.read().split()]
        except OSError:
            break
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    try:
        os.rmdir(cgroup)  # empty now; a cgroup left behind would outlive the runtime
    except OSError:
        pass
"""


class Reaper:
    """The runtime process's reaper: register what its commands run in, for as long as they do.

    Registering is a line written to a pipe (microseconds). Where the reaper cannot be started
    (no Python executable to run, a process limit), commands still run and :attr:`active` is
    False; the reason is logged once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._failed = False
        self._pid = os.getpid()

    @property
    def active(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def watch_group(self, pgid: int) -> None:
        """Kill process group `pgid` if the runtime dies before :meth:`forget_group`."""
        self._send(f"+g {pgid}")

    def forget_group(self, pgid: int) -> None:
        self._send(f"-g {pgid}")

    def watch_cgroup(self, directory: Path) -> None:
        """Kill every process in the cgroup `directory` if the runtime dies before
        :meth:`forget_cgroup`."""
        self._send(f"+c {directory}")

    def forget_cgroup(self, directory: Path) -> None:
        self._send(f"-c {directory}")

    def _send(self, line: str) -> None:
        with self._lock:
            process = self._started()
            if process is None or process.stdin is None:
                return
            try:
                process.stdin.write(line.encode() + b"\n")
                process.stdin.flush()
            except OSError as exc:  # it died (killed by someone): start another next time
                log.warning("the process reaper stopped (%s); starting a new one", exc)
                self._process = None

    def start(self) -> None:
        """Start the reaper now if it is not running (blocking, a few milliseconds: call it
        from a worker thread)."""
        with self._lock:
            self._started()

    def _started(self) -> subprocess.Popen[bytes] | None:
        if os.getpid() != self._pid:  # a forked child: the parent's reaper is not its own
            self._pid, self._process, self._failed = os.getpid(), None, False
        if self._process is not None and self._process.poll() is None:
            return self._process
        if self._failed:
            return None
        try:
            self._process = subprocess.Popen(  # once per runtime process, a few milliseconds
                [sys.executable, "-I", "-S", "-c", REAPER_SOURCE],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            self._failed = True
            log.warning(
                "could not start the process reaper (%s): commands will not be stopped if the "
                "runtime is killed",
                exc,
            )
            return None
        atexit.register(self.close)  # at a normal exit, let it go (and reap it) ourselves
        return self._process

    def close(self) -> None:
        """Let the reaper exit (it kills whatever is still registered, normally nothing)."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


reaper = Reaper()
"""The reaper of this process (started on the first command)."""


async def start_reaper() -> None:
    """Start this process's reaper if it is not running, off the event loop."""
    if not reaper.active:
        await anyio.to_thread.run_sync(reaper.start)
