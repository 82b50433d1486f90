"""A runtime killed with SIGKILL takes the commands it started with it, sandboxed or not: a
foreground command, its children, and a `setsid` daemon that left its process group."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from process_probes import live_processes_matching
from wakeful.safety.sandbox import bwrap_works

pytestmark = pytest.mark.slow

RUNTIME = textwrap.dedent(
    """
    import sys
    import anyio
    from wakeful.events import user_input
    from wakeful.models import ScriptedModel, call, say, use
    from wakeful.runtime import Runtime
    from wakeful.safety.sandbox import SandboxSettings

    marker, backend, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    command = (
        f"setsid bash -c 'exec -a {marker}-daemon sleep 1000' & "
        f"(exec -a {marker}-child sleep 1000) & exec -a {marker}-fg sleep 1000"
    )

    async def main() -> None:
        model = ScriptedModel([use(call("run_shell", command=command, background=True)), say("")])
        async with Runtime(
            model=model,
            workdir=workdir,
            store_path=workdir + "/agent.db",
            settings=[SandboxSettings(backend=backend)],
        ) as rt:
            await rt.submit(user_input("start it"))
            await anyio.sleep(1000)

    anyio.run(main)
    """
)


def leftover_cgroups(pid: int) -> list[Path]:
    """The sandbox cgroups the runtime `pid` made that still exist (a walk that tolerates
    directories vanishing while it looks)."""
    prefix = f"wakeful-sandbox-{pid}-"
    found = []
    for controller in ("pids", "memory", "unified"):
        for top, dirs, _ in os.walk(Path("/sys/fs/cgroup", controller)):
            found += [Path(top, d) for d in dirs if d.startswith(prefix)]
    return found


def wait_for(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("backend", ["none", "bwrap"])
def test_commands_die_with_a_killed_runtime(backend: str, tmp_path: Path) -> None:
    if backend == "bwrap" and (shutil.which("bwrap") is None or not bwrap_works()):
        pytest.skip("bubblewrap cannot run here")
    marker = f"wakeful-death-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "runtime.py"
    script.write_text(RUNTIME)
    log = tmp_path / "runtime.log"
    with log.open("wb") as output:
        runtime = subprocess.Popen(
            [sys.executable, str(script), marker, backend, str(tmp_path)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        names = [f"{marker}-fg", f"{marker}-child"]
        if backend == "none" and os.geteuid() == 0:
            names.append(f"{marker}-daemon")  # caught by its cgroup, which root can make
        started = wait_for(lambda: all(live_processes_matching(n) for n in names), 30)
        assert started, log.read_text()
        runtime.send_signal(signal.SIGKILL)
        runtime.wait(timeout=10)

        assert wait_for(lambda: not live_processes_matching(marker), 5), [
            (n, live_processes_matching(n)) for n in names
        ]
        # The reaper removes the command's cgroups too, once they are empty.
        assert wait_for(lambda: not leftover_cgroups(runtime.pid), 5), leftover_cgroups(runtime.pid)
    finally:
        if runtime.poll() is None:
            runtime.kill()
        for pid in live_processes_matching(marker):
            os.kill(pid, signal.SIGKILL)
