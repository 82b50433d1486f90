"""The seccomp filter every sandboxed command runs under: system calls no workspace task needs.

Capabilities are dropped and the sandbox has its own user namespace, so most of these calls
would fail anyway; the filter is the second wall, for the day a kernel bug or a missed capability
lets one through. It refuses (with EPERM, so programs report an ordinary error) what container
runtimes and coding-agent sandboxes refuse, for the same reasons:

- changing mounts: ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API
  (``open_tree``, ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``,
  ``mount_setattr``): the sandbox's view of the file system is the only one it may have;
- new namespaces: ``unshare``, ``setns``, and ``clone`` with a ``CLONE_NEW*`` flag. ``clone3``
  passes its flags in memory a filter cannot read, so it fails with ENOSYS and the C library
  falls back to ``clone``;
- other processes' memory and the kernel: ``ptrace``, ``process_vm_readv``/``writev``,
  ``kcmp``, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*`` (a second system
  call interface the filter cannot see into), the kernel keyring (``keyctl``, ``add_key``,
  ``request_key``), file handles that bypass paths (``open_by_handle_at``,
  ``name_to_handle_at``);
- the machine: modules, ``kexec``, ``reboot``, swap, the clock, the host name, ``acct``,
  ``quotactl``, ``syslog``, ``iopl``/``ioperm``, and the ``TIOCSTI``/``TIOCLINUX`` ioctls that
  type into a terminal.

A process of another architecture (a 32-bit or x32 binary on x86_64) would use other system
call numbers, so it is killed. The filter is generated here as classic BPF for x86_64 and
aarch64; on other machines there is none, and :func:`seccomp_supported` says so.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_SPECIAL: Final = frozenset({"clone", "clone3", "ioctl"})
"""Calls judged on their arguments (or made to fail with ENOSYS); every other call in the table
below is refused with EPERM."""

_NUMBERS: Final[dict[str, dict[str, int]]] = {
    "x86_64": {
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 272, "setns": 308, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
        "request_key": 249, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "sethostname": 170, "setdomainname": 171, "acct": 163, "quotactl": 179,
        "quotactl_fd": 443, "syslog": 103, "lookup_dcookie": 212, "nfsservctl": 180,
        "iopl": 172, "ioperm": 173, "uselib": 134, "create_module": 174, "_sysctl": 156,
        "clone": 56, "clone3": 435, "ioctl": 16,
    },
    "aarch64": {
        "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 97, "setns": 268, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217,
        "request_key": 218, "open_by_handle_at": 265, "name_to_handle_at": 264,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
        "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
        "sethostname": 161, "setdomainname": 162, "acct": 89, "quotactl": 60,
        "quotactl_fd": 443, "syslog": 116, "lookup_dcookie": 18, "nfsservctl": 42,
        "clone": 220, "clone3": 435, "ioctl": 29,
    },
}  # fmt: skip
_AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT: Final = 0x40000000

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64 each).
_NR, _ARCH, _ARGS = 0, 4, 16
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW: Final = 0x7FFF0000
_RET_KILL_PROCESS: Final = 0x80000000
_RET_ERRNO: Final = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_NEW_NAMESPACES: Final = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C


@dataclass(frozen=True, slots=True)
class _Op:
    code: int
    k: int
    jt: int = 0
    jf: int = 0

    def pack(self) -> bytes:
        return struct.pack("<HBBI", self.code, self.jt, self.jf, self.k)


def seccomp_supported(machine: str | None = None) -> bool:
    """Whether a filter exists for this machine's architecture (x86_64 and aarch64)."""
    return (machine or platform.machine()) in _NUMBERS


def filter_program(machine: str | None = None) -> bytes:
    """The filter as the bytes of a `struct sock_filter` array, as `bwrap --seccomp` reads it."""
    machine = machine or platform.machine()
    numbers = _NUMBERS.get(machine)
    if numbers is None:
        raise ValueError(f"no seccomp filter for the {machine!r} architecture")
    errno_eperm = _RET_ERRNO | _EPERM
    ops = [
        _Op(_LD_W_ABS, _ARCH),
        _Op(_JEQ, _AUDIT_ARCH[machine], jt=1),
        _Op(_RET, _RET_KILL_PROCESS),
        _Op(_LD_W_ABS, _NR),
    ]
    if machine == "x86_64":  # the x32 ABI: the same architecture, other numbers
        ops += [_Op(_JGE, _X32_SYSCALL_BIT, jf=1), _Op(_RET, errno_eperm)]
    for name, number in numbers.items():
        if name not in _SPECIAL:
            ops += [_Op(_JEQ, number, jf=1), _Op(_RET, errno_eperm)]
    ops += [_Op(_JEQ, numbers["clone3"], jf=1), _Op(_RET, _RET_ERRNO | _ENOSYS)]
    # clone(flags, …): the flags are an int, the low half of the first argument.
    ops += [
        _Op(_JEQ, numbers["clone"], jf=4),
        _Op(_LD_W_ABS, _ARGS),
        _Op(_JSET, _CLONE_NEW_NAMESPACES, jf=1),
        _Op(_RET, errno_eperm),
        _Op(_RET, _RET_ALLOW),
    ]
    # ioctl(fd, cmd, …): the command is an unsigned int, so only the low half counts.
    ops += [
        _Op(_JEQ, numbers["ioctl"], jf=5),
        _Op(_LD_W_ABS, _ARGS + 8),
        _Op(_JEQ, _TIOCSTI, jt=2),
        _Op(_JEQ, _TIOCLINUX, jt=1),
        _Op(_RET, _RET_ALLOW),
        _Op(_RET, errno_eperm),
    ]
    ops.append(_Op(_RET, _RET_ALLOW))
    return b"".join(op.pack() for op in ops)


_written: Path | None = None


def filter_file() -> Path | None:
    """A private file holding :func:`filter_program`; None where the architecture has none.

    Written once per process (again if something removed it) to the host's temporary
    directory, mode 0600, which no sandbox sees (each has its own /tmp), and removed at exit.
    """
    global _written
    if not seccomp_supported():
        return None
    if _written is not None and _written.is_file():
        return _written
    fd, name = tempfile.mkstemp(prefix="wakeful-seccomp-", suffix=".bpf")
    with os.fdopen(fd, "wb") as file:
        file.write(filter_program())
    _written = Path(name)
    atexit.register(_remove, _written)
    return _written


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
