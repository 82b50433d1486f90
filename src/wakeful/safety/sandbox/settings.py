"""What a sandbox allows: network or not, resource limits, extra read-only paths, the environment.

Every option has a default that works on one machine; a deployment overrides them in its
configuration (looked up with :func:`wakeful.services.settings_of`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_ENV_ALLOWLIST = [
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TERM",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "PYTHONIOENCODING",
]
"""Variables that say how to format text, never who the user is or what they may reach."""


class SandboxSettings(BaseModel):
    """How shell commands and code run: which backend, what they may reach, how much they use.

    `backend="auto"` uses bubblewrap when it works on this machine and falls back to `none`,
    which is not a sandbox and says so loudly. The limits apply to each command as a whole.
    """

    model_config = ConfigDict(extra="forbid")

    backend: Literal["auto", "bwrap", "none"] = "auto"
    network: bool = False
    cpu_seconds: int = Field(default=60, ge=1)
    memory_mb: int = Field(default=2048, ge=16)
    max_processes: int = Field(default=256, ge=1)
    file_size_mb: int = Field(default=1024, ge=1)
    disk_quota_mb: int | None = Field(default=10240, ge=1)
    """How much the workspace may grow, in all, from its size when this process first ran a
    sandboxed command in it; a command that passes it is stopped. None: no quota."""
    tmp_size_mb: int = Field(default=1024, ge=1)
    """The size of each command's private /tmp (a tmpfs, so it counts as memory)."""
    read_only_paths: list[Path] = Field(default_factory=list)
    env_allowlist: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV_ALLOWLIST))
