"""The seccomp filter's program, read back instruction by instruction, and run under bubblewrap
where that works: the calls it lists fail, another architecture's calls are refused."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest

from wakeful.safety.sandbox.bwrap import bwrap_features, seccomp_wrapper
from wakeful.safety.sandbox.seccomp import filter_file, filter_program, seccomp_supported

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    assert len(program) % 8 == 0
    return [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_program_checks_the_architecture_first_and_ends_allowing(machine: str) -> None:
    ops = instructions(filter_program(machine))

    assert ops[0] == (0x20, 0, 0, 4)  # load the architecture
    assert ops[1] == (0x15, 1, 0, AUDIT_ARCH[machine])  # equal: skip the kill
    assert ops[2] == (0x06, 0, 0, 0x80000000)  # SECCOMP_RET_KILL_PROCESS
    assert ops[-1] == (0x06, 0, 0, 0x7FFF0000)  # SECCOMP_RET_ALLOW
    assert len(ops) < 4096  # the kernel's limit on a filter's length
    # every jump lands inside the program
    for index, (code, jt, jf, _) in enumerate(ops):
        if code & 0x07 == 0x05:
            assert index + 1 + max(jt, jf) < len(ops)


@pytest.mark.parametrize(
    ("machine", "mount", "ptrace"), [("x86_64", 165, 101), ("aarch64", 40, 117)]
)
def test_mount_and_ptrace_are_refused_with_eperm(machine: str, mount: int, ptrace: int) -> None:
    ops = instructions(filter_program(machine))
    for number in (mount, ptrace):
        at = ops.index((0x15, 0, 1, number))
        assert ops[at + 1] == (0x06, 0, 0, 0x00050001)  # SECCOMP_RET_ERRNO | EPERM


def test_an_unknown_architecture_has_no_filter() -> None:
    assert not seccomp_supported("riscv64")
    with pytest.raises(ValueError, match="riscv64"):
        filter_program("riscv64")


def test_the_filter_file_is_private_and_comes_back_if_removed() -> None:
    if not seccomp_supported():
        pytest.skip("no filter for this architecture")
    path = filter_file()
    assert path is not None and path.read_bytes() == filter_program()
    assert path.stat().st_mode & 0o077 == 0
    path.unlink()
    again = filter_file()
    assert again is not None and again.read_bytes() == filter_program()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the x32 ABI exists on x86_64 only")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_x32_system_calls_are_refused_under_bubblewrap() -> None:
    features = bwrap_features()
    if features is None or not features.seccomp:
        pytest.skip("bubblewrap cannot load a seccomp filter here")
    code = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.syscall(0x40000000 | 39); print(r, ctypes.get_errno())"  # x32 getpid
    )
    argv = [
        *seccomp_wrapper(features),
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-all",
        "--seccomp",
        "3",
        sys.executable,
        "-c",
        code,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.split() == ["-1", "1"], done.stderr  # EPERM, not the pid
