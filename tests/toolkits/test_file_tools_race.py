"""The swap race: a directory and a symlink to the host exchanged in a tight loop under the tools.

A background process swaps `root/d` (a real directory) with `root/l` (a symlink to a directory
outside the root) with `renameat2(RENAME_EXCHANGE)`, as fast as it can, while read_file,
list_dir, write_file and edit_file run hundreds of times on paths through `d`. A tool that checks
a path and then opens it by name again loses this race often; one that opens beneath a root
descriptor never leaves the root. Refusals ("a symlink to a place outside the root") are the
expected outcome when the swap is caught in the middle; reading, listing or writing the host is
the failure.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tool_services import call
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.execution.files import edit_file, write_file
from wakeful.toolkits.perception.list_dir import list_dir
from wakeful.toolkits.perception.read_file import read_file
from wakeful.tools.spec import Tool

_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}.get(platform.machine())
ROUNDS = 300
"""Calls of each tool; together they take about a second per resolver."""

# The swapper: exchanges its two arguments until killed, without a moment's pause.
_SWAPPER = f"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (ctypes.c_char_p(p.encode()) for p in sys.argv[1:3])
print("ready", flush=True)
while True:
    libc.syscall({_RENAMEAT2}, -100, a, -100, b, 2)
"""

pytestmark = pytest.mark.skipif(
    _RENAMEAT2 is None or sys.platform != "linux", reason="renameat2 is a Linux x86_64/aarch64 call"
)


@pytest.fixture
def canary() -> str:
    return f"CANARY-{uuid.uuid4().hex}"


@pytest.fixture
def root(tmp_path: Path, canary: str) -> Path:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("inside\n")
    host = tmp_path / "host"
    host.mkdir()
    # The same names as inside, so a lost race would succeed rather than fail: f.txt even holds
    # the text edit_file replaces.
    (host / "f.txt").write_text(f"inside {canary}\n")
    (host / f"host-only-{canary}.txt").write_text("x\n")
    (root / "l").symlink_to(host)
    return root


@pytest.fixture
def swapping(root: Path) -> Iterator[Callable[[], None]]:
    """Starts the swapper; the test calls what it yields to stop it before looking at the tree."""
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(root / "d"), str(root / "l")],
        stdout=subprocess.PIPE,
        text=True,
    )

    def stop() -> None:
        if swapper.returncode is None:
            swapper.kill()
            swapper.wait()
        if swapper.stdout is not None:
            swapper.stdout.close()

    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        yield stop
    finally:
        stop()


def written_names(root: Path) -> set[str]:
    return {p.name for p in root.rglob("new-*.txt")}


def host_state(host: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(host.iterdir())}


async def attempt(services: Services, tool: Tool, **arguments: object) -> str | None:
    """The result text, or None when the tool refused (the expected answer mid-swap)."""
    try:
        result = await call(services, tool, **arguments)
    except ToolError as exc:
        message = str(exc)
        assert "host-only" not in message and "CANARY" not in message
        return None
    return str(result.content) + repr(result.structured)


@pytest.mark.anyio
async def test_the_file_tools_never_leave_the_root_while_a_symlink_is_swapped_in(
    services: Services,
    root: Path,
    tmp_path: Path,
    canary: str,
    resolution: str,
    swapping: Callable[[], None],
) -> None:
    host = tmp_path / "host"
    before = host_state(host)
    succeeded = {"read_file": 0, "list_dir": 0, "write_file": 0, "edit_file": 0}
    started = time.monotonic()
    for n in range(ROUNDS):
        text = await attempt(services, read_file, path="d/f.txt")
        if text is not None:
            assert canary not in text, "read_file returned a file outside the root"
            succeeded["read_file"] += 1
        text = await attempt(services, list_dir, path="d")
        if text is not None:
            assert "host-only" not in text, "list_dir listed a directory outside the root"
            succeeded["list_dir"] += 1
        text = await attempt(services, write_file, path=f"d/new-{n}.txt", content="written\n")
        succeeded["write_file"] += text is not None
        text = await attempt(services, edit_file, path="d/f.txt", old="inside", new="inside")
        assert text is None  # old == new is refused before any file is touched
        text = await attempt(services, edit_file, path="d/f.txt", old="inside", new="in side")
        if text is not None:
            succeeded["edit_file"] += 1
            for _ in range(1_000):  # put the text back, for the next round's edit to find
                if await attempt(services, write_file, path="d/f.txt", content="inside\n"):
                    break
    elapsed = time.monotonic() - started
    swapping()

    assert host_state(host) == before, "a tool wrote outside the root"
    assert not list(host.glob(".wakeful-*")), "a temporary file was left outside the root"
    # The swap really raced the tools: some calls went through, and some were refused.
    assert all(count > 0 for count in succeeded.values()), succeeded
    assert len(written_names(root)) == succeeded["write_file"]
    assert elapsed < 30, f"{elapsed:.1f} s for {ROUNDS} rounds"


def test_the_swapper_really_swaps(root: Path, swapping: Callable[[], None]) -> None:
    """Sanity check of the setup: `d` is seen as both a directory and a symlink."""
    seen: set[bool] = set()
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        seen.add(os.path.islink(root / "d"))
    assert seen == {True, False}
