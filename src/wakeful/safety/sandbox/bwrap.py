"""The bubblewrap command line: which host paths a sandboxed command sees, and how.

The system directories and the Python installation are bound read-only, the workspace is the one
writable place, /tmp is a private tmpfs (HOME lives there), and /proc and /dev are the sandbox's
own. Everything else on the host, /root and /home included, does not exist inside. Files that
hold secrets in /etc (password hashes, SSH host keys) are replaced by an empty file.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
SECRET_FILES = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
)
SECRET_GLOBS = ("ssh/ssh_host_*_key",)  # relative to /etc
SANDBOX_HOME = "/tmp"
_PROBE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all")
_PROBE_SECONDS = 10


@functools.cache
def bwrap_works() -> bool:
    """Whether bubblewrap is installed and can create namespaces here (probed once per process).

    A container without user namespaces, or a seccomp profile that forbids them, makes `bwrap`
    fail even though it is installed; only running it tells.
    """
    executable = shutil.which("bwrap")
    if executable is None:
        return False
    try:
        finished = subprocess.run(  # once per process, a few milliseconds
            [executable, *_PROBE, "--die-with-parent", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return finished.returncode == 0


def bwrap_argv(
    command: Iterable[str],
    *,
    workspace: Path,
    cwd: Path,
    network: bool,
    read_only_paths: Iterable[Path] = (),
) -> list[str]:
    """`bwrap … -- command`: the command confined to `workspace` (resolved, absolute paths)."""
    argv = ["bwrap", "--unshare-all"]
    if network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    for system_path in SYSTEM_PATHS:
        argv += _mirror(Path(system_path))
    for secret in _secret_files():
        argv += ["--ro-bind", "/dev/null", str(secret)]
    argv += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    # After the private /tmp, so that a Python (or venv) that lives under /tmp stays visible.
    for prefix in _python_paths():
        argv += ["--ro-bind", str(prefix), str(prefix)]
    for extra in read_only_paths:
        resolved = extra.resolve()
        if resolved.exists():
            argv += ["--ro-bind", str(resolved), str(resolved)]
    # The workspace comes last so nothing above can cover it (a read-only path inside it, /tmp).
    argv += ["--bind", str(workspace), str(workspace)]
    # The sandbox's own root (where bwrap made mount points such as /root) is read-only too.
    argv += ["--remount-ro", "/", "--chdir", str(cwd), "--", *command]
    return argv


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
