"""The bubblewrap command line: which host paths a sandboxed command sees, and with what rights.

The system directories and the Python installation are bound read-only, the workspace is the one
writable place (less the files the host executes, see :mod:`wakeful.safety.protected`), /tmp is
a private tmpfs of fixed size (HOME lives there), and /proc and /dev are the sandbox's own.
Everything else on the host, /root and /home included, does not exist inside. Files that hold
secrets in /etc (password hashes, SSH host keys) are replaced by an empty file.

The command gets no capabilities, even when the runtime is root: it runs in a user namespace of
its own, as an unprivileged user (65534 when the runtime is root), may not create further user
namespaces, and runs under the seccomp filter of :mod:`.seccomp`. It still has the runtime's
real user id on the host (bubblewrap maps only that one), so parts of /proc that check the real
user id rather than a capability (/proc/sys, /proc/irq, …) are bound read-only over it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..protected import AT_ROOT, SANDBOX_SCRATCH
from .seccomp import filter_file

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
SECRET_FILES = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
)
SECRET_GLOBS = ("ssh/ssh_host_*_key",)  # relative to /etc
PROC_READ_ONLY = (
    "sys",
    "sysrq-trigger",
    "irq",
    "bus",
    "mtrr",
    "pressure",
    "fs",
    "acpi",
    "driver",
    "scsi",
    "tty",
)
"""Parts of /proc with files the host's root user may write without a capability."""
SANDBOX_HOME = "/tmp"
SANDBOX_ROOT_UID = 65534
"""The user (and group) a root runtime's commands run as inside: `nobody`, in /etc/passwd."""
_SECCOMP_FD = 3
_PROBE_BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all")
_PROBE_SECONDS = 10


@dataclass(frozen=True, slots=True)
class BwrapFeatures:
    """What this machine's bubblewrap and kernel allow beyond the plain namespaces."""

    user_namespace: bool
    """`--unshare-user --disable-userns`: an own user namespace that cannot make more."""
    seccomp: bool
    """`--seccomp`: the filter of :mod:`.seccomp` (False where none exists for the CPU)."""
    tmp_size: bool
    """`--size` for the private /tmp."""

    def missing(self) -> list[str]:
        """What is missing, in words, for :meth:`Sandbox.describe`."""
        gaps = []
        if not self.user_namespace:
            gaps.append("no user namespace")
        if not self.seccomp:
            gaps.append("no seccomp filter")
        if not self.tmp_size:
            gaps.append("/tmp not size-limited")
        return gaps


@functools.cache
def bwrap_features() -> BwrapFeatures | None:
    """What bubblewrap can do here, or None where it is missing or cannot create namespaces.

    Probed once per process by running it: a container without user namespaces, or a seccomp
    profile that forbids them, makes `bwrap` fail even though it is installed.
    """
    if shutil.which("bwrap") is None:
        return None
    full = BwrapFeatures(user_namespace=True, seccomp=filter_file() is not None, tmp_size=True)
    if _probe(full):
        return full
    if not _probe(BwrapFeatures(user_namespace=False, seccomp=False, tmp_size=False)):
        return None
    return BwrapFeatures(
        user_namespace=_probe(BwrapFeatures(True, False, False)),
        seccomp=full.seccomp and _probe(BwrapFeatures(False, True, False)),
        tmp_size=_probe(BwrapFeatures(False, False, True)),
    )


def bwrap_works() -> bool:
    """Whether bubblewrap is installed and can create namespaces here (probed once)."""
    return bwrap_features() is not None


def _probe(features: BwrapFeatures) -> bool:
    argv = [*seccomp_wrapper(features), "bwrap", *_PROBE_BASE, *_hardening(features)]
    if features.tmp_size:
        argv += ["--size", str(1024 * 1024), "--tmpfs", "/tmp"]
    try:
        finished = subprocess.run(  # once per process, a few milliseconds
            [*argv, "--die-with-parent", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return finished.returncode == 0


def seccomp_wrapper(features: BwrapFeatures) -> list[str]:
    """A shell that opens the filter file on the descriptor `--seccomp` reads, then execs."""
    path = filter_file() if features.seccomp else None
    if path is None:
        return []
    return ["/bin/sh", "-c", f'exec "$@" {_SECCOMP_FD}<"$0"', str(path)]


def _hardening(features: BwrapFeatures) -> list[str]:
    argv = ["--cap-drop", "ALL"]
    if features.user_namespace:
        argv += ["--unshare-user", "--disable-userns"]
        if os.geteuid() == 0:
            argv += ["--uid", str(SANDBOX_ROOT_UID), "--gid", str(SANDBOX_ROOT_UID)]
    if features.seccomp and filter_file() is not None:
        argv += ["--seccomp", str(_SECCOMP_FD)]
    return argv


def bwrap_argv(
    command: Iterable[str],
    *,
    workspace: Path,
    cwd: Path,
    network: bool,
    read_only_paths: Iterable[Path] = (),
    features: BwrapFeatures | None = None,
    tmp_size_mb: int = 1024,
    marker: str = "wakeful-sandbox",
) -> list[str]:
    """`bwrap … -- command`: the command confined to `workspace` (resolved, absolute paths).

    `read_only_paths` are made visible read-only; those inside the workspace stay read-only
    there too, like the protected entries of :mod:`wakeful.safety.protected`. Without
    `features` the strongest form is assumed (what a machine with a current bubblewrap does).
    `marker` is set as WAKEFUL_SANDBOX inside, and so appears in bwrap's command line.
    """
    features = features or BwrapFeatures(user_namespace=True, seccomp=True, tmp_size=True)
    argv = [*seccomp_wrapper(features), "bwrap", "--unshare-all"]
    if network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    # A word in bwrap's command line that finds its processes (see quota.QuotaWatch).
    argv += ["--setenv", "WAKEFUL_SANDBOX", marker]
    argv += _hardening(features)
    for system_path in SYSTEM_PATHS:
        argv += _mirror(Path(system_path))
    for secret in _secret_files():
        argv += ["--ro-bind", "/dev/null", str(secret)]
    if features.tmp_size:
        argv += ["--size", str(tmp_size_mb * 1024 * 1024)]
    argv += ["--tmpfs", "/tmp", "--proc", "/proc"]
    for name in PROC_READ_ONLY:
        if os.path.lexists(f"/proc/{name}"):
            argv += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    argv += ["--dev", "/dev"]
    # After the private /tmp, so that a Python (or venv) that lives under /tmp stays visible.
    for prefix in _python_paths():
        argv += ["--ro-bind", str(prefix), str(prefix)]
    inside: list[Path] = []
    for extra in read_only_paths:
        resolved = extra.resolve()
        if not resolved.exists():
            continue
        if resolved.is_relative_to(workspace):
            inside.append(resolved)
        else:
            argv += ["--ro-bind", str(resolved), str(resolved)]
    # The workspace after everything above, so nothing there covers it (/tmp, a Python in it);
    # then what in it must stay read-only, and the scratch folders inside those.
    argv += ["--bind", str(workspace), str(workspace)]
    for path in _unique([*protected_paths(workspace), *inside]):
        argv += ["--ro-bind", str(path), str(path)]
    for scratch in scratch_paths(workspace):
        argv += ["--bind", str(scratch), str(scratch)]
    # The sandbox's own root (where bwrap made mount points such as /root) is read-only too.
    argv += ["--remount-ro", "/", "--chdir", str(cwd), "--", *command]
    return argv


def protected_paths(workspace: Path) -> list[Path]:
    """The protected entries that exist at the top of the workspace and are no symlinks.

    A mount point cannot be renamed, removed or replaced, so binding these read-only also
    keeps the agent from moving `.git` aside and putting its own in its place.
    """
    names = [".git", *AT_ROOT]
    return [workspace / n for n in names if _is_real(workspace / n)]


def scratch_paths(workspace: Path) -> list[Path]:
    """The folders under a protected `.wakeful` that sandboxed code may still write."""
    if not _is_real(workspace / ".wakeful"):
        return []
    return [workspace / s for s in SANDBOX_SCRATCH if _is_real(workspace / s)]


def _is_real(path: Path) -> bool:
    return os.path.lexists(path) and not path.is_symlink()


def _unique(paths: Sequence[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def _mirror(path: Path) -> list[str]:
    """Bind a system path read-only, or recreate it as the same symlink (/bin -> usr/bin)."""
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    if path.exists():
        return ["--ro-bind", str(path), str(path)]
    return []


def _secret_files() -> list[Path]:
    found = [Path(p) for p in SECRET_FILES if Path(p).is_file()]
    for pattern in SECRET_GLOBS:
        found.extend(sorted(Path("/etc").glob(pattern)))
    return found


def _python_paths() -> list[Path]:
    """The interpreter's prefixes (a venv and the Python it was made from), if outside /usr."""
    paths: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        path = Path(prefix).resolve()
        covered = any(path.is_relative_to(p) for p in [*map(Path, SYSTEM_PATHS), *paths])
        if not covered and path.exists():
            paths.append(path)
    return paths
