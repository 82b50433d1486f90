"""`Sandbox`: one backend chosen per settings, turning a command into its sandboxed form."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from ...errors import ToolError, UserError
from ...tools.reaper import reaper, start_reaper
from ..protected import SANDBOX_SCRATCH
from .bwrap import SANDBOX_HOME, BwrapFeatures, bwrap_argv, bwrap_features
from .cgroups import CgroupLimits
from .quota import QuotaWatch, baseline_of
from .rlimits import MB, prlimit_argv
from .settings import SandboxSettings

log = logging.getLogger(__name__)

NOT_A_SANDBOX = (
    "none — NOT A SANDBOX: commands run with the runtime's own permissions, files and network "
    "(only resource limits apply); install bubblewrap (`bwrap`) to confine them"
)
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_warned_none = False


@dataclass(slots=True)
class PreparedCommand:
    """A command ready for `anyio.open_process(argv, env=env, cwd=cwd)`.

    `cgroups` are the command's cgroups (empty where none could be made). Ask
    :meth:`limits_hit` which limits the command ran into: inside the `prepare` block, so far;
    after it, the final answer (the workspace measured once more after the command ended).
    """

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    cgroups: CgroupLimits = field(default_factory=CgroupLimits)
    quota: QuotaWatch | None = None
    settled: list[str] | None = None
    """The limits hit, fixed when the `prepare` block ended."""

    def limits_hit(self) -> list[str]:
        """The limits the command ran into: "processes", "memory", "disk quota"."""
        if self.settled is not None:
            return list(self.settled)
        hit = self.cgroups.hit_limits()
        if self.quota is not None and self.quota.exceeded:
            hit.append("disk quota")
        return hit


class Sandbox:
    """Runs commands confined to one workspace, under the limits in `settings`.

    With the `bwrap` backend a command sees the system read-only, the workspace writable, a
    private /tmp (also its HOME), no network unless `settings.network`, and runs in its own PID
    namespace that dies with it. The `none` backend applies the same resource limits and filtered
    environment but confines nothing, and says so in :meth:`describe` and a warning log line.
    """

    def __init__(self, settings: SandboxSettings, workspace: Path) -> None:
        self.settings = settings
        self.workspace = workspace.resolve()
        self._features = _resolve_backend(settings)
        self._backend: Literal["bwrap", "none"] = "none" if self._features is None else "bwrap"
        if self._backend == "none":
            _warn_once()

    @property
    def backend(self) -> Literal["bwrap", "none"]:
        return self._backend

    def describe(self) -> str:
        """One line for results and logs; for `none` it starts with "NOT A SANDBOX"."""
        s = self.settings
        limits = (
            f"limits: {s.cpu_seconds} s CPU, {s.memory_mb} MB memory, {s.max_processes} "
            f"processes, {s.file_size_mb} MB per file"
        )
        if self._backend == "none":
            return f"{NOT_A_SANDBOX}; {limits}"
        network = "network allowed" if s.network else "no network"
        gaps = self._features.missing() if self._features is not None else []
        hardening = (
            "no capabilities, own user namespace, seccomp filter"
            if not gaps
            else f"no capabilities, WEAKER: {', '.join(gaps)}"
        )
        quota = f", {s.disk_quota_mb} MB workspace quota" if s.disk_quota_mb else ""
        return (
            f"bwrap: {network}, system read-only, only the workspace {str(self.workspace)!r} "
            f"writable (its .git and wakeful state read-only), private /tmp of "
            f"{s.tmp_size_mb} MB and HOME, own PID namespace, {hardening}; {limits}{quota}"
        )

    @asynccontextmanager
    async def prepare(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
    ) -> AsyncIterator[PreparedCommand]:
        """The sandboxed form of `argv`, run in `cwd` (inside the workspace).

        `env` adds variables on top of the host environment filtered to the allowlist. On exit
        every process still in the command's cgroups is killed and the cgroups are removed, so
        run the command to its end inside the `async with`.
        """
        if not argv:
            raise UserError("Sandbox.prepare needs a command: argv is empty.")
        real_cwd = _inside(cwd, self.workspace)
        s = self.settings
        cgroups = CgroupLimits.create(max_processes=s.max_processes, memory_bytes=s.memory_mb * MB)
        if cgroups.directories:  # the runtime's death kills what runs in them
            await start_reaper()
        for directory in cgroups.directories:
            reaper.watch_cgroup(directory)
        marker = f"wakeful-sandbox-{secrets.token_hex(8)}"
        quota = (
            QuotaWatch(self.workspace, s.disk_quota_mb * MB, marker, cgroups)
            if s.disk_quota_mb is not None
            else None
        )
        private_home: str | None = None
        prepared: PreparedCommand | None = None
        cancelled = False
        try:
            if self._features is not None:
                home = SANDBOX_HOME
                await anyio.to_thread.run_sync(_make_scratch, self.workspace)
                inner = bwrap_argv(
                    argv,
                    workspace=self.workspace,
                    cwd=real_cwd,
                    network=s.network,
                    read_only_paths=s.read_only_paths,
                    features=self._features,
                    tmp_size_mb=s.tmp_size_mb,
                    marker=marker,
                )
            else:
                private_home = await anyio.to_thread.run_sync(
                    lambda: tempfile.mkdtemp(prefix="wakeful-home-")
                )
                home = private_home
                inner = list(argv)
            limited = prlimit_argv(
                inner,
                cpu_seconds=s.cpu_seconds,
                memory_mb=s.memory_mb,
                max_processes=s.max_processes,
                file_size_mb=s.file_size_mb,
            )
            prepared = PreparedCommand(
                argv=cgroups.join_argv(limited),
                env=self._environment(env, home),
                cwd=real_cwd,
                cgroups=cgroups,
                quota=quota,
            )
            if quota is not None:
                # The size before the first command here is the baseline: measured before it
                # starts, so its own writes count.
                await anyio.to_thread.run_sync(baseline_of, self.workspace)
                quota.start()
            try:
                yield prepared
            except anyio.get_cancelled_exc_class():
                cancelled = True
                raise
        finally:
            with anyio.CancelScope(shield=True):
                if quota is not None:
                    await quota.stop(final_measure=not cancelled)
                if prepared is not None:
                    prepared.settled = prepared.limits_hit()
                directories = list(cgroups.directories)
                await cgroups.remove()
                for directory in directories:
                    reaper.forget_cgroup(directory)
                if private_home is not None:
                    await anyio.to_thread.run_sync(
                        lambda: shutil.rmtree(private_home, ignore_errors=True)
                    )

    def _environment(self, extra: Mapping[str, str] | None, home: str) -> dict[str, str]:
        allowed = set(self.settings.env_allowlist)
        env = {k: v for k, v in os.environ.items() if k in allowed}
        env.setdefault("PATH", _DEFAULT_PATH)
        # `python` inside is the runtime's own interpreter, with the packages it has.
        python_bin = str(Path(sys.executable).parent)
        if python_bin not in env["PATH"].split(os.pathsep):
            env["PATH"] = python_bin + os.pathsep + env["PATH"]
        env.update(HOME=home, TMPDIR=home if self._backend == "none" else "/tmp")
        if extra:
            env.update(extra)
        return env


def _resolve_backend(settings: SandboxSettings) -> BwrapFeatures | None:
    """What bubblewrap can do here, or None for the `none` backend."""
    if settings.backend == "none":
        return None
    features = bwrap_features()
    if features is not None:
        return features
    if settings.backend == "bwrap":
        raise UserError(
            "The sandbox backend is set to 'bwrap', but bubblewrap is not installed or cannot "
            "create namespaces on this machine (`bwrap --unshare-all true` fails). Install the "
            "bubblewrap package, allow user namespaces, or set backend = 'auto' or 'none' (which "
            "is not a sandbox)."
        )
    return None


def _make_scratch(workspace: Path) -> None:
    """The writable folders under a protected `.wakeful`: made here, since they cannot be made
    inside (where `.wakeful` is read-only). Only under a real `.wakeful`, never through a link."""
    state = workspace / ".wakeful"
    if not state.is_dir() or state.is_symlink():
        return
    for relative in SANDBOX_SCRATCH:
        path = workspace / relative
        if not os.path.lexists(path):
            try:
                path.mkdir()
            except OSError as exc:
                log.info("could not make the sandbox scratch folder %s: %s", path, exc)


def _warn_once() -> None:
    global _warned_none
    if not _warned_none:
        _warned_none = True
        log.warning("sandbox backend %s", NOT_A_SANDBOX)


def _inside(cwd: Path, workspace: Path) -> Path:
    real = cwd.resolve()
    if real != workspace and not real.is_relative_to(workspace):
        raise ToolError(
            f"The working directory {str(cwd)!r} is outside the workspace {str(workspace)!r}; "
            "sandboxed commands run only inside it. Give a directory under the workspace."
        )
    return real
