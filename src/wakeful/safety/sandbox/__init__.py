"""The OS sandbox for shell commands and code: bubblewrap namespaces plus resource limits.

:class:`Sandbox` turns a command into one that runs with no network (unless granted), the system
read-only, only the workspace writable, a private /tmp and HOME, its own PID namespace (so no
process outlives the call), and limits on CPU time, memory, processes and file size. Where
bubblewrap is missing the `none` backend applies the limits only and says it is not a sandbox.
"""

from __future__ import annotations

from .bwrap import bwrap_works
from .cgroups import CgroupLimits
from .sandbox import PreparedCommand, Sandbox
from .settings import DEFAULT_ENV_ALLOWLIST, SandboxSettings

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "CgroupLimits",
    "PreparedCommand",
    "Sandbox",
    "SandboxSettings",
    "bwrap_works",
]
